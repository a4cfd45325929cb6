"""Run every benchmark: ``python -m benchmarks`` (from the repository root).

Prints the machine, then one report per benchmark, and writes all the numbers to
``benchmarks/results/latest.json``. Numbers only: nothing here asserts a time limit.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python benchmarks/__main__.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import (
    bench_baseline,
    bench_cost,
    bench_pipeline,
    bench_search,
    bench_tokens,
    bench_truncation,
)

RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"

BENCHES: list[tuple[str, Callable[[], dict[str, Any]]]] = [
    ("tokens", bench_tokens.main),
    ("truncation", bench_truncation.main),
    ("pipeline", bench_pipeline.main),
    ("baseline", bench_baseline.main),
    ("cost", bench_cost.main),
    ("search", bench_search.main),
]


def machine() -> dict[str, Any]:
    """Where the numbers were taken."""
    try:
        import agentscope

        agentscope_version = getattr(agentscope, "__version__", "?")
    except ImportError:  # pragma: no cover
        agentscope_version = None
    try:
        import tiktoken

        tiktoken_version = getattr(tiktoken, "__version__", "?")
    except ImportError:
        tiktoken_version = None
    from agentscope_ctx import __version__

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "agentscope": agentscope_version,
        "tiktoken": tiktoken_version,
        "agentscope_ctx": __version__,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmarks named in `argv` (all by default), print and save the results."""
    names = argv if argv else [name for name, _ in BENCHES]
    unknown = set(names) - {name for name, _ in BENCHES}
    if unknown:
        raise SystemExit(
            f"unknown benchmark(s): {sorted(unknown)}; known: {[name for name, _ in BENCHES]}"
        )
    info = machine()
    print("agentscope-ctx benchmarks")
    for key, value in info.items():
        print(f"  {key:<15} {value}")
    results: dict[str, Any] = {"machine": info, "benchmarks": {}, "seconds": {}}
    started = time.perf_counter()
    for name, bench in BENCHES:
        if name not in names:
            continue
        print()
        print(f"=== {name} " + "=" * (70 - len(name)))
        start = time.perf_counter()
        results["benchmarks"][name] = bench()
        results["seconds"][name] = round(time.perf_counter() - start, 2)
        print(f"({name}: {results['seconds'][name]:.1f} s)")
    results["seconds"]["total"] = round(time.perf_counter() - started, 2)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(results, indent=2, default=str, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print()
    print(f"total {results['seconds']['total']:.1f} s; results written to {RESULTS}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
