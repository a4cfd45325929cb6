"""OpenTelemetry spans and metrics for what the package does to a context (DESIGN.md §17).

The pipeline's runs, the helper model calls (Compactor, Summarizer, consolidation) and the
provider's usage of each of the agent's model calls (cache reads and writes) appear in
AgentScope's own trace, children of the span that is current (AgentScope's reply span), with
counters and histograms for the same figures. Each span carries the session and end user of
the work it records (``session.id``, ``user.id``, ``gen_ai.conversation.id``: `grouped`), so
that a backend shows one session's runs together. Only `opentelemetry-api` is used (the ``otel``
extra), imported on first use; with no SDK tracer provider set (tracing off) every entry point
returns after one cached check, and nothing is recorded. See docs/observability.md.

This package imports nothing else of `agentscope_ctx`: it takes plain figures (a mapping of
attribute names to numbers and strings), so that every layer can use it.
"""

from __future__ import annotations

from ._group import current_group, group_attributes, grouped
from ._otel import enabled, reset
from ._spans import (
    HelperCall,
    helper_span,
    note_helper_usage,
    note_response,
    noted_stream,
    pipeline_span,
)
from ._usage import note_model_usage

__all__ = [
    "HelperCall",
    "current_group",
    "enabled",
    "group_attributes",
    "grouped",
    "helper_span",
    "note_helper_usage",
    "note_model_usage",
    "note_response",
    "noted_stream",
    "pipeline_span",
    "reset",
]
