"""The spans: one per pipeline run, one per helper model call (GenAI conventions).

`pipeline_span` opens ``agentscope_ctx.pipeline`` as a child of the current span (AgentScope's
reply span); the caller gives the run's figures to `PipelineRun.finish`. `helper_span` opens
``chat <model> (agentscope_ctx.<role>)`` for a helper agent's run; the line's runner reports
the model's usage with `note_helper_usage`, which is added to the helper span and to the
enclosing pipeline run (the compaction's helper tokens). Everything here logs and goes on when
OpenTelemetry fails: tracing never breaks a reply.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ._group import current_group
from ._otel import enabled, in_trace, instruments, tracer

__all__ = [
    "HelperCall",
    "PipelineRun",
    "helper_span",
    "note_helper_usage",
    "note_response",
    "noted_stream",
    "pipeline_span",
]

logger = logging.getLogger("agentscope_ctx")

PIPELINE_SPAN = "agentscope_ctx.pipeline"
"""The name of a pipeline run's span."""
PREFIX = "agentscope_ctx."
"""The prefix of our span attributes (besides the ``gen_ai.*`` ones of helper calls)."""

Figure = int | float | str | bool | None


@dataclass
class HelperCall:
    """The tokens of one helper agent's model calls (all its iterations)."""

    role: str
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0


@dataclass
class PipelineRun:
    """A pipeline run's span, open while the run goes on."""

    span: Any
    """The span; `None` for a run outside any trace (metrics only)."""
    helper_input_tokens: int = 0
    helper_output_tokens: int = 0

    def finish(self, figures: Mapping[str, Figure], freed: Mapping[str, int]) -> None:
        """Set the run's figures (`freed`: tokens freed per rung) on the span and record them
        in the metrics."""
        try:
            attributes: dict[str, Figure | list[str]] = {
                PREFIX + k: v for k, v in figures.items() if v is not None
            }
            for rung, tokens in freed.items():
                attributes[f"{PREFIX}freed.{rung.replace(' ', '_')}"] = tokens
            if freed:
                attributes[PREFIX + "rungs"] = list(freed)
            if self.helper_input_tokens or self.helper_output_tokens:
                attributes[PREFIX + "compaction.helper_input_tokens"] = self.helper_input_tokens
                attributes[PREFIX + "compaction.helper_output_tokens"] = self.helper_output_tokens
            if self.span is not None:
                self.span.set_attributes(attributes)
            meters = instruments()
            when = {"when": str(figures.get("when", ""))}
            meters.runs.add(1, when)
            for name in ("tokens_before", "tokens_after"):
                value = figures.get(name)
                if isinstance(value, int):
                    getattr(meters, name).record(value, when)
            for rung, tokens in freed.items():
                meters.freed.add(tokens, {"rung": rung})
            compacted = figures.get("compacted")
            if isinstance(compacted, int) and compacted:
                source = str(figures.get("summary_source") or "")
                meters.compacted.add(compacted, {"summary_source": source})
        except Exception:
            logger.exception("agentscope_ctx: could not record the pipeline's span")


_run: ContextVar[PipelineRun | None] = ContextVar("agentscope_ctx_pipeline_run", default=None)
_helper: ContextVar[HelperCall | None] = ContextVar("agentscope_ctx_helper_call", default=None)


@contextmanager
def pipeline_span(when: str) -> Iterator[PipelineRun | None]:
    """A span around one pipeline run (`None` when tracing is off). `when`: what the run is
    before (``model_call``, ``reply``, ``tool_result``, ``forced``, ``emergency``).

    The span goes into the trace under way (AgentScope's reply span): a run outside any
    trace gets no span of its own (it would be a trace of one span), only its metrics."""
    if not enabled():
        yield None
        return
    if not in_trace():  # 1.x's run before its reply span opens, a manual compact(): metrics
        run = PipelineRun(None)
        token = _run.set(run)
        try:
            yield run
        finally:
            _run.reset(token)
        return
    try:
        attributes = {PREFIX + "when": when, **current_group()}
        manager = tracer().start_as_current_span(PIPELINE_SPAN, attributes=attributes)
        span = manager.__enter__()
    except Exception:
        logger.exception("agentscope_ctx: could not open the pipeline's span")
        yield None
        return
    run = PipelineRun(span)
    token = _run.set(run)
    try:
        yield run
    except BaseException as error:
        manager.__exit__(type(error), error, error.__traceback__)
        raise
    else:
        manager.__exit__(None, None, None)
    finally:
        _run.reset(token)


@contextmanager
def helper_span(role: str, model: str) -> Iterator[HelperCall | None]:
    """A GenAI span ``chat <model> (agentscope_ctx.<role>)`` around a helper agent's run
    (`None` when tracing is off)."""
    if not enabled():
        yield None
        return
    call = HelperCall(role)
    try:
        manager = tracer().start_as_current_span(
            f"chat {model} ({PREFIX}{role})",
            kind=_client_kind(),
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                PREFIX + "helper": role,
                **current_group(),
            },
        )
        span = manager.__enter__()
    except Exception:
        logger.exception("agentscope_ctx: could not open the helper call's span")
        yield None
        return
    token = _helper.set(call)
    try:
        yield call
    except BaseException as error:
        _finish_helper(span, call)
        manager.__exit__(type(error), error, error.__traceback__)
        raise
    else:
        _finish_helper(span, call)
        manager.__exit__(None, None, None)
    finally:
        _helper.reset(token)


def note_helper_usage(input_tokens: int | None, output_tokens: int | None) -> None:
    """Add one model call's usage to the helper call under way (nothing when none is)."""
    call = _helper.get()
    if call is None:
        return
    call.calls += 1
    call.input_tokens += input_tokens or 0
    call.output_tokens += output_tokens or 0


def note_response(response: Any) -> None:
    """`note_helper_usage` with a model response's ``usage`` (both lines' `ChatResponse`)."""
    if _helper.get() is None:
        return
    usage = getattr(response, "usage", None)
    note_helper_usage(getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None))


async def noted_stream(chunks: AsyncGenerator[Any, None]) -> AsyncGenerator[Any, None]:
    """`chunks` (a streamed answer, its last chunk whole on both lines), its usage noted
    from the last chunk when a helper call is under way."""
    last = None
    try:
        async for chunk in chunks:
            last = chunk
            yield chunk
    finally:
        await chunks.aclose()
        if last is not None:
            note_response(last)


def _finish_helper(span: Any, call: HelperCall) -> None:
    try:
        span.set_attributes(
            {
                "gen_ai.usage.input_tokens": call.input_tokens,
                "gen_ai.usage.output_tokens": call.output_tokens,
                PREFIX + "helper.model_calls": call.calls,
            }
        )
        meters = instruments()
        meters.helper_tokens.add(call.input_tokens, {"role": call.role, "type": "input"})
        meters.helper_tokens.add(call.output_tokens, {"role": call.role, "type": "output"})
        run = _run.get()
        if run is not None:
            run.helper_input_tokens += call.input_tokens
            run.helper_output_tokens += call.output_tokens
    except Exception:
        logger.exception("agentscope_ctx: could not record the helper call's span")


def _client_kind() -> Any:
    from opentelemetry.trace import SpanKind

    return SpanKind.CLIENT
