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

__all__ = ["Runs", "check_compaction_span", "check_pipeline_spans", "recording"]

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


def check_compaction_span(
    spans: Sequence[ReadableSpan],
    traced_runs: list[tuple[ReadableSpan, PipelineReport]],
    helper_calls: int,
) -> tuple[ReadableSpan, PipelineReport, list[ReadableSpan]]:
    """Check the first compacting run's span (of `check_pipeline_spans`' pairs): a model
    summary and the helper's usage (1,234 in, 56 out) on it, and the compactor's model calls
    (`helper_calls` of them) as spans, the first a child of it. The span, its report and the
    helper spans."""
    compacting = [(span, r) for span, r in traced_runs if r.compacted]
    assert compacting, "the session compacts"
    span, report = compacting[0]
    attributes = span.attributes or {}
    assert attributes["agentscope_ctx.summary_source"] == "model"
    assert attributes["agentscope_ctx.compaction.helper_input_tokens"] == 1_234
    assert attributes["agentscope_ctx.compaction.helper_output_tokens"] == 56
    helpers = [s for s in spans if s.name == "chat fake-model (agentscope_ctx.compactor)"]
    assert len(helpers) == helper_calls >= 1
    first = helpers[0]
    assert first.parent is not None and first.parent.span_id == span.context.span_id
    assert (first.attributes or {})["gen_ai.usage.input_tokens"] == 1_234
    return span, report, helpers
