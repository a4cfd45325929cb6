"""A pipeline run inside its OpenTelemetry span (`agentscope_ctx.telemetry`; DESIGN.md §17),
and its figures for the 2.x notice event.

The span's attributes are the run's own report (`PipelineReport.figures` and `freed`), not a
second count. With tracing off, the run costs one check more.
"""

from __future__ import annotations

from typing import Any

from ..core._pipeline import ContextPipeline, PipelineReport
from ..telemetry import grouped, pipeline_span

__all__ = ["notice_figures", "traced_run"]


async def traced_run(pipeline: ContextPipeline, when: str, **kwargs: Any) -> PipelineReport:
    """`pipeline.run(**kwargs)` in an ``agentscope_ctx.pipeline`` span (when tracing is on),
    a child of the current span; it and the spans inside (the Compactor's call) carry the
    agent's session and user (`ContextPipeline.span_group`). `when`: what the run precedes
    (``model_call``, ``reply``, ``tool_result``, ``forced``, ``emergency``).

    Raises:
        PromptTooLargeError: as `ContextPipeline.run` (the span records it)."""
    with grouped(pipeline.span_group), pipeline_span(when) as run:
        report = await pipeline.run(**kwargs)
        if run is not None:
            run.finish({"when": when, **report.figures()}, report.freed)
        return report


def notice_figures(report: PipelineReport | None) -> dict[str, object]:
    """The figures of a run as the 2.x notice event's value carries them beside its
    ``text``: `PipelineReport.figures` and ``freed`` (tokens per rung); empty when the run
    failed (`None`)."""
    if report is None:
        return {}
    return {**report.figures(), "freed": dict(report.freed)}
