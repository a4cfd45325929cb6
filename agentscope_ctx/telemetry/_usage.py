"""`note_model_usage`: what the provider reported of one of the agent's model calls, as a
span carrying the GenAI usage attributes (cache reads and writes among them).

AgentScope's own ``chat`` span of the call is out of reach where the usage is read (on 1.x
it ends inside the model's ``__call__``), and on Anthropic its ``gen_ai.usage.input_tokens``
leaves the cached tokens out. So each response's usage becomes a span of its own,
``agentscope_ctx.model_usage``, a child of the span that is current when the usage arrives
(on 2.x AgentScope's ``chat`` span for a whole response, else the reply span), opened and
ended at that moment. Outside any trace, or with tracing off, or when the usage holds none
of the three figures, nothing is recorded.
"""

from __future__ import annotations

import logging

from ._group import current_group
from ._otel import enabled, in_trace, tracer

__all__ = ["USAGE_SPAN", "note_model_usage"]

logger = logging.getLogger("agentscope_ctx")

USAGE_SPAN = "agentscope_ctx.model_usage"
"""The name of a model call's usage span."""


def note_model_usage(
    model: str, input_tokens: int | None, cache_read: int | None, cache_creation: int | None
) -> None:
    """Record one model call's usage (see the module docstring). A figure the provider did
    not report (`None`) is left out, never written as 0.

    Args:
        model: the model's name (``gen_ai.request.model``).
        input_tokens: the whole prompt, cache reads and writes included
            (``gen_ai.usage.input_tokens``, as the conventions ask).
        cache_read: the part read from the provider's cache
            (``gen_ai.usage.cache_read.input_tokens``).
        cache_creation: the part written to it (``gen_ai.usage.cache_creation.input_tokens``).
    """
    if not enabled() or not in_trace():
        return
    if input_tokens is None and cache_read is None and cache_creation is None:
        return  # nothing the provider said in full (1.x's Anthropic model: see the docs)
    try:
        attributes: dict[str, str | int] = {"gen_ai.request.model": model, **current_group()}
        for name, value in (
            ("gen_ai.usage.input_tokens", input_tokens),
            ("gen_ai.usage.cache_read.input_tokens", cache_read),
            ("gen_ai.usage.cache_creation.input_tokens", cache_creation),
        ):
            if value is not None:
                attributes[name] = value
        tracer().start_span(USAGE_SPAN, attributes=attributes).end()
    except Exception:  # tracing never breaks a reply
        logger.exception("agentscope_ctx: could not record the model call's usage span")
