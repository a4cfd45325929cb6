"""What the telemetry tests of both lines check on the exported spans (tests/agentscope1/test_telemetry.py
for 1.x, tests/agentscope2/test_telemetry.py for 2.x): one ``agentscope_ctx.pipeline`` span per pipeline
run inside the reply (`recording` tells which span each run was in), a child of the line's
reply span, its attributes equal to the run's own report; one before each model call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

from agentscope_ctx.core._pipeline import ContextPipeline, PipelineReport

__all__ = ["Runs", "check_pipeline_spans", "recording"]

Runs = list[tuple[int | None, PipelineReport]]


def recording(monkeypatch: pytest.MonkeyPatch) -> Runs:
    """The pipeline's own reports, in the order of its runs (the real run, called through),
    each with the id of the ``agentscope_ctx.pipeline`` span it ran in (`None`: no span)."""
    runs: Runs = []
    real = ContextPipeline.run

    async def run(self: ContextPipeline, **kwargs: Any) -> PipelineReport:
        span = trace.get_current_span()
        ours = getattr(span, "name", None) == "agentscope_ctx.pipeline"
        report = await real(self, **kwargs)
        runs.append((span.get_span_context().span_id if ours else None, report))
        return report

    monkeypatch.setattr(ContextPipeline, "run", run)
    return runs


def check_pipeline_spans(
    spans: Sequence[ReadableSpan], runs: Runs, *, model_calls: int, reply_op: str
) -> list[tuple[ReadableSpan, PipelineReport]]:
    """Check the pipeline spans against the reports of `recording`; the (span, report) pairs
    of the runs in a span."""
    by_id = {span.context.span_id: span for span in spans}
    ours = [s for s in spans if s.name == "agentscope_ctx.pipeline"]
    traced_runs = [(by_id[span_id], r) for span_id, r in runs if span_id is not None]
    assert len(ours) == len(traced_runs), (len(ours), len(traced_runs))
    before_calls = [
        (s, r)
        for s, r in traced_runs
        if (s.attributes or {})["agentscope_ctx.when"] == "model_call"
    ]
    assert len(before_calls) == model_calls
    for span, report in traced_runs:
        attributes = dict(span.attributes or {})
        assert span.parent is not None, "a child of the reply span"
        parent = by_id[span.parent.span_id]
        assert (parent.attributes or {})["gen_ai.operation.name"] == reply_op, parent.name
        for name, value in report.figures().items():
            key = f"agentscope_ctx.{name}"
            if value is None:
                assert key not in attributes
            else:
                assert attributes[key] == value, (key, attributes.get(key), value)
        freed = {
            k.removeprefix("agentscope_ctx.freed."): v
            for k, v in attributes.items()
            if k.startswith("agentscope_ctx.freed.")
        }
        assert freed == {k.replace(" ", "_"): v for k, v in report.freed.items()}
        assert list(attributes.get("agentscope_ctx.rungs", ())) == list(report.freed)
    return traced_runs
