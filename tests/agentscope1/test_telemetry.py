"""The spans and metrics of agentscope_ctx in AgentScope 1.x's own trace (docs/observability.md):
a real `ReActAgent` with AgentScope's tracing on, a real SDK tracer provider with the in-memory
exporter, a scripted model. One ``agentscope_ctx.pipeline`` span per model call, a child of
AgentScope's reply span, carrying the figures of the pipeline's own report; the compactor's
model call as a GenAI span inside it. The line-neutral parts (tracing off, a failing exporter)
are tested here on either line; 2.x's agent: tests/agentscope2/test_telemetry.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry import trace

from agentscope_ctx import telemetry
from tests.support.lines import requires_1x
from tests.support.otel import Traced, metric_points, traced
from tests.support.telemetry_checks import (
    check_compaction_span,
    check_pipeline_spans,
    recording,
)

__all__ = ["traced"]  # the fixture, used by name


@requires_1x("drives a ReActAgent with AgentScope 1.x tracing on")
@pytest.mark.parametrize("relief", ["masking", "compaction"])
async def test_one_pipeline_span_per_model_call_in_agentscope_reply_span(
    tmp_path: Path, traced: Traced, monkeypatch: pytest.MonkeyPatch, relief: str
) -> None:
    """`relief`: masking frees enough (no compaction), or masking is off and the session
    compacts."""
    import agentscope
    from agentscope.formatter import OpenAIChatFormatter
    from agentscope.message import Msg, TextBlock
    from agentscope.model import ChatResponse
    from agentscope.model._model_usage import ChatUsage

    from agentscope_ctx import ContextConfig, ContextManager
    from tests.support.fakes import NOTED_SUMMARY, FakeChatModel, tool_call
    from tests.support.react1 import react, text_tools

    agentscope._config.trace_enabled = True  # what `agentscope.init(tracing_url=...)` turns on
    runs = recording(monkeypatch)

    def cat(path: str) -> str:
        """Print a log.

        Args:
            path (str): the log's name.
        """
        lines = "".join(f"{path} 10:{i % 60:02d} job={i} status=ok 用户\n" for i in range(400))
        return lines

    model = FakeChatModel(
        [tool_call("cat", call_id=f"c{i}", path=f"log{i}.txt") for i in range(12)],
        default="All logs read.",
    )
    helper = FakeChatModel(
        default=ChatResponse(
            content=[TextBlock(type="text", text=NOTED_SUMMARY)],
            usage=ChatUsage(input_tokens=1_234, output_tokens=56, time=0.0),
        )
    )
    config = ContextConfig(
        working_dir=tmp_path / "ctx",
        max_input_tokens=6_000,
        tool_result={"recent_max_bytes": 6_000, "old_max_bytes": 1_500}
        # (masking on: below 8,000 tokens the default is not to mask)
        | {"mask_after": None if relief == "compaction" else 10},
        summarizer={"enabled": False},
    )
    manager = ContextManager(config, model=helper, formatter=OpenAIChatFormatter())
    agent = react(model, text_tools(cat), name="analyst", sys_prompt="You read logs.", max_iters=20)
    manager.attach(agent)
    await agent(Msg("user", "Read every log.", "user"))
    await manager.close()

    spans = traced.spans()
    reports = [r for _, r in runs]
    traced_runs = check_pipeline_spans(
        spans, runs, model_calls=len(model.calls), reply_op="invoke_agent"
    )
    points = metric_points(traced.reader)
    assert sum(p.value for p in points["agentscope_ctx.pipeline.runs"]) == len(reports)
    if relief == "masking":
        assert any(r.freed for r in reports), "a rung freed tokens"
        freed = {p.attributes["rung"]: p.value for p in points["agentscope_ctx.rung.freed_tokens"]}
        expected: dict[str, int] = {}
        for r in reports:
            for rung, tokens in r.freed.items():
                expected[rung] = expected.get(rung, 0) + tokens
        assert freed == expected
        return
    check_compaction_span(spans, traced_runs, len(helper.calls))
    compacted = sum(p.value for p in points["agentscope_ctx.compaction.messages"])
    assert compacted == sum(r.compacted for r in reports)


async def test_tracing_off_opens_no_span() -> None:
    """No tracer provider set: the check says off, and no span or run is made."""
    assert not telemetry.enabled()
    with telemetry.pipeline_span("model_call") as run:
        assert run is None
    with telemetry.helper_span("compactor", "m") as call:
        assert call is None
    telemetry.note_helper_usage(5, 6)  # no helper call under way: nothing to add to


async def test_a_run_outside_any_trace_gets_metrics_and_no_span(traced: Traced) -> None:
    """1.x runs the pipeline before its reply span opens: no trace of one span, the metrics
    still count the run; inside a span, the run's span is its child."""
    with telemetry.pipeline_span("reply") as run:
        assert run is not None and run.span is None
        run.finish({"when": "reply", "tokens_before": 10}, {})
    assert traced.named("agentscope_ctx.pipeline") == []
    with trace.get_tracer("test").start_as_current_span("invoke_agent a") as parent:
        with telemetry.pipeline_span("model_call") as run:
            assert run is not None and run.span is not None
            run.finish({"when": "model_call", "tokens_before": 20}, {})
    (span,) = traced.named("agentscope_ctx.pipeline")
    assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
    points = metric_points(traced.reader)
    assert sum(p.value for p in points["agentscope_ctx.pipeline.runs"]) == 2
    assert sum(p.sum for p in points["agentscope_ctx.pipeline.tokens_before"]) == 30


async def test_helper_tokens_add_up_to_the_enclosing_run(traced: Traced) -> None:
    with (
        trace.get_tracer("test").start_as_current_span("invoke_agent a"),
        telemetry.pipeline_span("forced") as run,
    ):
        assert run is not None
        with telemetry.helper_span("compactor", "m") as call:
            assert call is not None
            telemetry.note_helper_usage(100, 7)
            telemetry.note_helper_usage(20, None)
        run.finish({"when": "forced", "compacted": 2}, {})
    (helper,) = traced.named("chat m (agentscope_ctx.compactor)")
    assert (helper.attributes or {})["gen_ai.usage.input_tokens"] == 120
    assert (helper.attributes or {})["agentscope_ctx.helper.model_calls"] == 2
    (span,) = traced.named("agentscope_ctx.pipeline")
    assert (span.attributes or {})["agentscope_ctx.compaction.helper_input_tokens"] == 120
    assert (span.attributes or {})["agentscope_ctx.compaction.helper_output_tokens"] == 7


def test_tracing_bench_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    """The benchmark measures the three ways and prints them; it leaves tracing on, which
    is put back off here."""
    from benchmarks.pipeline import tracing as bench_tracing
    from tests.support.otel import _reset_globals

    try:
        result = bench_tracing.main(history_sizes=(12,), steps=3)
    finally:
        _reset_globals()
    row = result["rows"]["12"]
    assert {"plain", "off", "plain_again", "on"} <= set(row)
    assert result["spans_exported"] == 3 + 1  # one per step, and the parent span
    assert "off/plain" in capsys.readouterr().out
