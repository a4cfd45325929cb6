"""What the telemetry tests of both lines check on the exported spans (tests/test_telemetry.py
for 1.x, tests/v2/test_telemetry.py for 2.x): one ``agentscope_ctx.pipeline`` span per pipeline
run, in the order of the runs, each a child of the line's reply span, its attributes equal to
the run's own report."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan

from agentscope_ctx.core._pipeline import PipelineReport

__all__ = ["check_pipeline_spans"]


def check_pipeline_spans(
    spans: Sequence[ReadableSpan],
    reports: Sequence[PipelineReport],
    *,
    model_calls: int,
    reply_op: str,
) -> list[tuple[ReadableSpan, PipelineReport]]:
    """Check the pipeline spans against the reports; the (span, report) pairs of the runs
    before a model call."""
    by_id = {span.context.span_id: span for span in spans}
    ours = sorted(
        (s for s in spans if s.name == "agentscope_ctx.pipeline"), key=lambda s: s.start_time or 0
    )
    assert len(ours) == len(reports), (len(ours), len(reports))
    pairs = list(zip(ours, reports, strict=True))
    before_calls = [
        (s, r) for s, r in pairs if (s.attributes or {})["agentscope_ctx.when"] == "model_call"
    ]
    assert len(before_calls) == model_calls
    for span, report in pairs:
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
    return before_calls
