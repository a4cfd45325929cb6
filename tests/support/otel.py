"""A real OpenTelemetry SDK for the telemetry tests: an SDK `TracerProvider` with the in-memory
span exporter and a `MeterProvider` with the in-memory metric reader, set as the globals (as an
application's tracing setup does), and the globals put back afterwards so that tracing is off
again for the other tests of the worker (the API allows setting them once per process:
`opentelemetry-test-utils` resets them the same way)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from agentscope_ctx import telemetry

__all__ = ["Traced", "metric_points", "traced"]


@dataclass
class Traced:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == name]


def _reset_globals() -> None:
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    metrics_internal._METER_PROVIDER = None
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    telemetry.reset()


@pytest.fixture
def traced() -> Iterator[Traced]:
    """Tracing on, spans and metrics kept in memory."""
    _reset_globals()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    try:
        yield Traced(exporter, reader)
    finally:
        provider.shutdown()
        _reset_globals()


def metric_points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """The data points of each metric the reader has collected, by metric name."""
    data = reader.get_metrics_data()
    points: dict[str, list[Any]] = {}
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    return points
