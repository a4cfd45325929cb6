"""The provider's cache figures per model call (issue 45 item 3), on the installed line: a
thinking session through the real `AnthropicChatModel` against the Anthropic simulator,
streaming; what the steps record, `context_usage` and the usage spans hold of each call equals
what the simulator reported (`sim.calls`). AgentScope 1.x's `AnthropicChatModel` passes only
``input_tokens`` (the uncached part) on: there the figures are unknown (null), never 0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry import trace

from agentscope_ctx.stores._steps_file import StepFile
from agentscope_ctx.telemetry._usage import USAGE_SPAN
from tests.support.lines import IS_1X
from tests.support.otel import Traced, traced
from tests.support.thinking_session import run_session

__all__ = ["traced"]  # the fixture, used by name


async def test_each_call_records_the_cache_figures_the_provider_reported(
    tmp_path: Path, traced: Traced
) -> None:
    usage: list[Any] = []

    async def after(manager: Any, agent: Any) -> None:
        usage.append(await manager.context_usage(agent))

    with trace.get_tracer("test").start_as_current_span("session"):
        sim, _ = await run_session(tmp_path, turns=2, steps=4, after=after)
    calls = sim.calls
    assert calls and all(c.status == 200 for c in calls)
    assert sum(c.cache_read_input_tokens for c in calls) > 0
    assert sum(c.cache_creation_input_tokens for c in calls) > 0
    steps = [r for r in StepFile(tmp_path).read("default") if r["call"]]
    spans = traced.named(USAGE_SPAN)
    assert len(steps) == len(calls)
    (context,) = usage
    if IS_1X:  # not reported through 1.x's ChatUsage: unknown, never 0
        assert {(r["input"], r["cache_read"], r["cache_creation"]) for r in steps} == {
            (None, None, None)
        }
        assert spans == []
        assert context.provider_cached_tokens is None
        assert context.provider_cache_creation_tokens is None
        assert context.session_cache_read_tokens is None and context.cache_reuse is None
        return
    reported = [
        (c.prompt_tokens, c.cache_read_input_tokens, c.cache_creation_input_tokens) for c in calls
    ]
    assert [(r["input"], r["cache_read"], r["cache_creation"]) for r in steps] == reported
    assert len(spans) == len(calls)
    assert [
        (
            s.attributes["gen_ai.usage.input_tokens"],
            s.attributes["gen_ai.usage.cache_read.input_tokens"],
            s.attributes["gen_ai.usage.cache_creation.input_tokens"],
        )
        for s in spans
        if s.attributes is not None
    ] == reported
    last = calls[-1]
    assert context.provider_prompt_tokens == last.prompt_tokens
    assert context.provider_cached_tokens == last.cache_read_input_tokens
    assert context.provider_cache_creation_tokens == last.cache_creation_input_tokens
    prompt = sum(c.prompt_tokens for c in calls)
    read = sum(c.cache_read_input_tokens for c in calls)
    assert context.session_prompt_tokens == prompt
    assert context.session_cache_read_tokens == read
    assert context.session_cache_creation_tokens == sum(
        c.cache_creation_input_tokens for c in calls
    )
    assert context.cache_reuse == read / prompt
