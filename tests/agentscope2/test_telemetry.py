"""The spans and metrics of agentscope_ctx in AgentScope 2.x's own trace (docs/observability.md):
a real 2.x `Agent` with AgentScope's `TracingMiddleware` and ours, a real SDK tracer provider
with the in-memory exporter, a scripted model. One ``agentscope_ctx.pipeline`` span per model
call, a child of AgentScope's reply span, carrying the figures of the pipeline's own report for
that run; the compactor's model call as a GenAI span inside it."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentscope.event import CustomEvent
from agentscope.message import TextBlock, UserMsg
from agentscope.middleware import TracingMiddleware
from agentscope.model import ChatResponse, ChatUsage

from agentscope_ctx.agentscope2 import NOTICE_EVENT
from tests.agentscope2.test_adapter import _analyst, _config
from tests.support.fakes import NOTED_SUMMARY, FakeChatModel
from tests.support.otel import Traced, metric_points, traced
from tests.support.telemetry_checks import (
    check_compaction_span,
    check_pipeline_spans,
    recording,
)

__all__ = ["traced"]  # the fixture, used by name

HELPER_USAGE = ChatUsage(input_tokens=1_234, output_tokens=56, time=0.0)


async def test_one_pipeline_span_per_model_call_in_agentscope_reply_span(
    tmp_path: Path, traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = recording(monkeypatch)
    config = _config(tmp_path, mask_after=None, recent_max_share=None)
    helper = FakeChatModel(
        default=ChatResponse(
            content=[TextBlock(text=NOTED_SUMMARY)], is_last=True, usage=HELPER_USAGE
        )
    )
    _, session, manager, agent = _analyst(
        tmp_path, config, helper, middlewares=(TracingMiddleware(),)
    )
    events = [e async for e in agent.reply_stream(UserMsg(name="user", content="Read every log."))]
    await manager.close()

    spans = traced.spans()
    reports = [r for _, r in runs]
    model_calls = len(session.model.calls)
    traced_runs = check_pipeline_spans(
        spans, runs, model_calls=model_calls, reply_op="invoke_agent"
    )
    _, report, helpers = check_compaction_span(spans, traced_runs, len(helper.calls))
    first = helpers[0]
    assert (first.attributes or {})["gen_ai.operation.name"] == "chat"
    assert (first.attributes or {})["gen_ai.request.model"] == "fake-model"
    assert (first.attributes or {})["gen_ai.usage.output_tokens"] == 56

    # the notice events carry the same figures as values, beside their text
    notices = [e.value for e in events if isinstance(e, CustomEvent) and e.name == NOTICE_EVENT]
    compacted = [v for v in notices if "compacted" in v["text"]]
    assert compacted and compacted[0]["compacted"] == report.compacted
    assert compacted[0]["tokens_before"] == report.tokens_before
    assert compacted[0]["tokens_after"] == report.tokens_after
    assert compacted[0]["summary_source"] == "model"
    assert compacted[0]["freed"] == report.freed

    # the metrics count the same runs and tokens
    points = metric_points(traced.reader)
    assert sum(p.value for p in points["agentscope_ctx.pipeline.runs"]) == len(reports)
    assert sum(p.value for p in points["agentscope_ctx.compaction.messages"]) == sum(
        r.compacted for r in reports
    )
    before = points["agentscope_ctx.pipeline.tokens_before"]
    assert sum(p.count for p in before) == len(reports)
    assert sum(p.sum for p in before) == sum(r.tokens_before for r in reports)
    helper_tokens = {p.attributes["type"]: p.value for p in points["agentscope_ctx.helper.tokens"]}
    assert helper_tokens == {"input": 1_234 * len(helpers), "output": 56 * len(helpers)}


async def test_no_span_and_no_figures_lost_when_tracing_is_off(tmp_path: Path) -> None:
    """Without a tracer provider nothing is recorded, and the notice events still carry the
    figures."""
    from opentelemetry import trace

    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    config = _config(tmp_path, mask_after=None, recent_max_share=None)
    helper = FakeChatModel(default=NOTED_SUMMARY)
    _, _, manager, agent = _analyst(tmp_path, config, helper, middlewares=(TracingMiddleware(),))
    events = [e async for e in agent.reply_stream(UserMsg(name="user", content="Read every log."))]
    await manager.close()
    notices = [e.value for e in events if isinstance(e, CustomEvent) and e.name == NOTICE_EVENT]
    assert any(v.get("compacted") for v in notices), notices
