"""Whether tracing is on, and the tracer and instruments when it is.

Tracing is on when a real tracer provider is set globally (an SDK `TracerProvider`, as
AgentScope's own setup installs: 2.x `setup_tracing`, 1.x `agentscope.init(tracing_url=...)`):
`opentelemetry.trace.get_tracer_provider()` then returns something other than the API's
placeholders (`ProxyTracerProvider`, `NoOpTracerProvider`). Without `opentelemetry-api`
installed, tracing is off. The check costs one attribute read and one `isinstance` per call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Instruments", "enabled", "in_trace", "instruments", "reset", "tracer"]

SCOPE = "agentscope_ctx"
"""The instrumentation scope of our tracer and meter."""

_api: Any = None
"""The `opentelemetry.trace` module once imported; `False` when it is not installed."""
_placeholders: tuple[type, ...] = ()
_instruments: Instruments | None = None


def _load() -> Any:
    global _api, _placeholders
    if _api is None:
        try:
            from opentelemetry import trace
        except ImportError:  # the `otel` extra is not installed: tracing stays off
            _api = False
        else:
            _api = trace
            _placeholders = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    return _api


def enabled() -> bool:
    """Whether a real tracer provider is set (tracing is on)."""
    api = _api if _api is not None else _load()
    return api is not False and not isinstance(api.get_tracer_provider(), _placeholders)


def in_trace() -> bool:
    """Whether a span is current (a trace is under way; call only when `enabled`)."""
    return bool(_load().get_current_span().get_span_context().is_valid)


def tracer() -> Any:
    """Our tracer (call only when `enabled`)."""
    return _load().get_tracer(SCOPE)


@dataclass(frozen=True)
class Instruments:
    """The counters and histograms (their names: docs/observability.md)."""

    runs: Any
    tokens_before: Any
    tokens_after: Any
    freed: Any
    compacted: Any
    helper_tokens: Any


_INSTRUMENTS: dict[str, tuple[str, str, str, str]] = {
    "runs": ("counter", "agentscope_ctx.pipeline.runs", "{run}", "Pipeline runs"),
    "tokens_before": (
        "histogram",
        "agentscope_ctx.pipeline.tokens_before",
        "{token}",
        "Prompt size before relief",
    ),
    "tokens_after": (
        "histogram",
        "agentscope_ctx.pipeline.tokens_after",
        "{token}",
        "Prompt size after relief",
    ),
    "freed": (
        "counter",
        "agentscope_ctx.rung.freed_tokens",
        "{token}",
        "Tokens freed by a rung of the ladder",
    ),
    "compacted": (
        "counter",
        "agentscope_ctx.compaction.messages",
        "{message}",
        "Messages moved from memory to the dialog store",
    ),
    "helper_tokens": (
        "counter",
        "agentscope_ctx.helper.tokens",
        "{token}",
        "Tokens of the helper model calls (Compactor, Summarizer)",
    ),
}
"""Each field of `Instruments`: its kind, name, unit and description."""


def instruments() -> Instruments:
    """The instruments, made on first use from the global meter provider (a no-op meter when
    none is set)."""
    global _instruments
    if _instruments is None:
        from opentelemetry import metrics

        meter = metrics.get_meter(SCOPE)
        make: dict[str, Callable[..., Any]] = {
            "counter": meter.create_counter,
            "histogram": meter.create_histogram,
        }
        _instruments = Instruments(
            **{
                field: make[kind](name, unit=unit, description=description)
                for field, (kind, name, unit, description) in _INSTRUMENTS.items()
            }
        )
    return _instruments


def reset() -> None:
    """Forget the instruments (after a test swaps the global meter provider)."""
    global _instruments
    _instruments = None
