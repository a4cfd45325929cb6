"""Benchmark what tracing costs the pipeline step (issue 32 item 1; docs/observability.md).

Run ``python -m benchmarks.pipeline.tracing`` (or ``python -m benchmarks``, on either line).
The steady-state step of `pipeline.step` (append a tool_use and its tool_result to a history
of 200 and 800 messages, then run the pipeline; nothing compacts), measured three ways on
three pipelines of the same history:

- ``plain``: `ContextPipeline.run()` as the adapters called it before the spans (no hook);
- ``off``: `traced_run` (what the adapters call now) with no tracer provider set: tracing off;
- ``on``: `traced_run` with an SDK `TracerProvider` (the in-memory exporter, a simple span
  processor) and a meter provider, inside a parent span, as under AgentScope's reply span.

``plain`` and ``off`` alternate step by step (the order rotating), so that the machine's load
weighs on both alike; ``on`` runs after them (it sets the global providers, which the API sets
once per process), alternating with ``plain`` again on a fourth pipeline: ``on/plain`` compares
the two of that phase. The target: ``off`` within 5% of ``plain``. Numbers only: nothing asserts
a time limit. ``on`` needs the OpenTelemetry SDK (``pip install opentelemetry-sdk``); without
it only ``plain`` and ``off`` are measured.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from agentscope_ctx.core._pipeline import ContextPipeline, PipelineReport
from agentscope_ctx.core.tokens._tokens import TokenCounter
from agentscope_ctx.services._traced import traced_run
from benchmarks._table import print_table, run_and_report
from benchmarks.pipeline.step import ENCODING, _make_pipeline, build_history, tool_pair

HISTORY_SIZES = (200, 800)
STEPS = 60
TARGET_OFF_RATIO = 1.05

Step = Callable[[ContextPipeline], Awaitable[PipelineReport]]


async def _plain(pipeline: ContextPipeline) -> PipelineReport:
    return await pipeline.run()


async def _traced(pipeline: ContextPipeline) -> PipelineReport:
    return await traced_run(pipeline, "model_call")


async def _pipeline(root: Path, n: int, counter: TokenCounter) -> ContextPipeline:
    pipeline, memory = _make_pipeline(root, 10_000_000, counter)
    await memory.add(build_history(n, seed=n))
    await pipeline.run()  # warm
    return pipeline


async def _steps(runs: dict[str, tuple[ContextPipeline, Step]], steps: int) -> dict[str, float]:
    """Median step time (us) of each run, the runs alternating step by step."""
    rngs = {name: random.Random(1) for name in runs}  # the same messages for each run
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for i in range(steps):
        pairs = {name: tool_pair(rng) for name, rng in rngs.items()}  # outside the timing
        for name in names[i % len(names) :] + names[: i % len(names)]:
            pipeline, step = runs[name]
            start = time.perf_counter()
            await pipeline.memory.add(pairs[name])
            report = await step(pipeline)
            times[name].append(time.perf_counter() - start)
            assert report.compacted == 0, "steady state must not compact"
    return {name: statistics.median(t) * 1e6 for name, t in times.items()}


def _tracing_on() -> Any:
    """Set an SDK tracer provider (in-memory exporter) and meter provider; the exporter, or
    `None` without the SDK."""
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return None
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    return exporter


async def _run(history_sizes: Sequence[int], steps: int) -> dict[str, Any]:
    from agentscope_ctx import telemetry

    assert not telemetry.enabled(), "run before any tracing setup: `off` must be off"
    root = Path(tempfile.mkdtemp(prefix="bench_tracing_"))
    counter = TokenCounter(ENCODING)
    rows: dict[str, Any] = {}
    try:
        for n in history_sizes:
            plain = await _pipeline(root / f"plain_{n}", n, counter)
            off = await _pipeline(root / f"off_{n}", n, counter)
            rows[str(n)] = await _steps({"plain": (plain, _plain), "off": (off, _traced)}, steps)
        exporter = _tracing_on()
        if exporter is not None:
            from opentelemetry import trace

            with trace.get_tracer("bench").start_as_current_span("invoke_agent bench"):
                for n in history_sizes:
                    on = await _pipeline(root / f"on_{n}", n, counter)
                    again = await _pipeline(root / f"plain_again_{n}", n, counter)
                    runs = {"plain_again": (again, _plain), "on": (on, _traced)}
                    rows[str(n)].update(await _steps(runs, steps))
            rows["spans"] = len(exporter.get_finished_spans())
    finally:
        shutil.rmtree(root, ignore_errors=True)
    spans = rows.pop("spans", 0)
    for row in rows.values():
        row["off_vs_plain"] = row["off"] / row["plain"]
        if "on" in row:
            row["on_vs_plain"] = row["on"] / row["plain_again"]
    return {
        "encoding": ENCODING,
        "steps": steps,
        "target_off_ratio": TARGET_OFF_RATIO,
        "rows": rows,
        "spans_exported": spans,
        "meets_target": all(r["off_vs_plain"] <= TARGET_OFF_RATIO for r in rows.values()),
    }


def _row(n: str, row: dict[str, Any]) -> str:
    on = f"{row['plain_again']:9.0f} {row['on']:8.0f}" if "on" in row else f"{'-':>18}"
    on_ratio = f"{row['on_vs_plain']:7.3f}x" if "on" in row else f"{'-':>8}"
    return (
        f"{n:>8} {row['plain']:9.0f} {row['off']:8.0f} {on} {row['off_vs_plain']:8.3f}x {on_ratio}"
    )


def report(result: dict[str, Any]) -> None:
    """Print the table for `result`."""
    print(
        f"pipeline step, median of {result['steps']} steps: plain run() / traced, tracing off /"
        " traced, tracing on (SDK, in-memory exporter)"
    )
    header = (
        f"{'messages':>8} {'plain us':>9} {'off us':>8} {'plain us':>9} {'on us':>8}"
        f" {'off/plain':>9} {'on/plain':>8}"
    )
    print_table(header, (_row(n, row) for n, row in result["rows"].items()))
    print(
        f"target: tracing off within {result['target_off_ratio']:.2f}x of plain -> "
        f"{'yes' if result['meets_target'] else 'NO'}; spans exported (on): "
        f"{result['spans_exported']}"
    )


def main(history_sizes: Sequence[int] = HISTORY_SIZES, steps: int = STEPS) -> dict[str, Any]:
    """Run the benchmark, print a report and return the numbers."""
    return run_and_report(_run(history_sizes, steps), report)


if __name__ == "__main__":
    main()
