"""Issue 48: the package's spans carry the tenant's session and end user (``session.id``,
``gen_ai.conversation.id``, ``user.id``), so that Langfuse, Phoenix and other OpenTelemetry
backends show one session's runs together: a real agent of the installed line in a trace,
with the SDK's in-memory exporter; every span of ours (the pipeline runs, the provider's
usage of each model call, the Compactor's call, the Summarizer's run in the background)."""

from __future__ import annotations

from pathlib import Path

from opentelemetry import trace

from agentscope_ctx import ContextConfig
from agentscope_ctx.telemetry import current_group, group_attributes, grouped
from tests.support.agent_line import Line
from tests.support.fakes import NOTED_SUMMARY, usage
from tests.support.otel import Traced, traced

__all__ = ["traced"]  # the fixture, used by name

GROUP = {"session.id": "s-42", "gen_ai.conversation.id": "s-42", "user.id": "alice"}


def _dump(arg: str) -> str:
    return "".join(f"build step {n}: compiled module {arg}{n}\n" for n in range(300))


def _config(tmp_path: Path, **recall: str) -> ContextConfig:
    return ContextConfig(
        working_dir=tmp_path / "ctx",
        max_input_tokens=20_000,
        keep_recent_ratio=0.01,
        recall=recall,  # type: ignore[arg-type]
        token_counter="cl100k_base",
    )


async def test_every_span_of_ours_names_the_session_and_the_user(
    tmp_path: Path, line: Line, traced: Traced
) -> None:
    helper = line.fake_model(default=NOTED_SUMMARY)
    session = line.session(_config(tmp_path, session="s-42", user="alice"), helper, {"dump": _dump})
    session.model.usage = usage(900, 10, 400)  # the provider reports each call's usage
    reply = trace.get_tracer("the app").start_as_current_span("invoke_agent coder")
    try:
        with reply:
            await session.turn("Build core.", line.tool_call("dump", arg="core"), line.text("ok"))
            await session.turn("And util?", line.text("util too"))
            assert await session.compact() > 0
    finally:
        await session.close()  # the Summarizer's run on what the compaction moved out
    ours = [s for s in traced.spans() if s.instrumentation_scope.name == "agentscope_ctx"]
    kinds = {s.name for s in ours}
    assert {"agentscope_ctx.pipeline", "agentscope_ctx.model_usage"} <= kinds
    assert any(name.endswith("(agentscope_ctx.compactor)") for name in kinds), kinds
    assert any(name.endswith("(agentscope_ctx.summarizer)") for name in kinds), kinds
    for span in ours:
        attributes = dict(span.attributes or {})
        assert {k: attributes.get(k) for k in GROUP} == GROUP, (span.name, attributes)
    assert current_group() == {}  # nothing left behind


async def test_a_tenant_without_session_or_user_adds_nothing(
    tmp_path: Path, line: Line, traced: Traced
) -> None:
    session = line.session(_config(tmp_path), None, {"dump": _dump})
    try:
        with trace.get_tracer("the app").start_as_current_span("invoke_agent coder"):
            await session.turn("Build core.", line.tool_call("dump", arg="core"), line.text("ok"))
    finally:
        await session.close()
    ours = [s for s in traced.spans() if s.instrumentation_scope.name == "agentscope_ctx"]
    assert ours
    for span in ours:
        assert not set(GROUP) & set(span.attributes or {}), span.attributes


def test_group_attributes_leave_out_what_is_not_known() -> None:
    assert group_attributes("s-1", None) == {"session.id": "s-1", "gen_ai.conversation.id": "s-1"}
    assert group_attributes("", "bob") == {"user.id": "bob"}
    assert group_attributes(None, None) == {}
    with grouped(group_attributes("s-1", "bob")):
        assert current_group()["user.id"] == "bob"
        with grouped({}):
            assert current_group() == {}
        assert current_group()["session.id"] == "s-1"
    assert current_group() == {}
