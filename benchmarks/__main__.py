"""Run every benchmark: ``python -m benchmarks`` (from the repository root).

Runs on whichever AgentScope line is installed. Prints the machine (the AgentScope version
with it), then one report per benchmark, and writes all the numbers to
``benchmarks/results/latest.json`` and ``latest-<line>.json`` (``latest-1.x.json``,
``latest-2.x.json``: run it in both venvs, then ``python -m benchmarks.compare`` prints the
lines side by side). A benchmark that only makes sense on the other line is skipped, with
the reason printed. Numbers only: nothing here asserts a time limit.

On both lines: tokens, truncation, pipeline (the core's step), pins (pinned messages that
share a call id), search, fleet_load (10 and 100 sessions, a manager each, on two worker
processes and one PostgreSQL server), probes (what the
agent still knows after 1, 3 and 10 compactions), startup (importing the package and the
quick CLI commands against ``import agentscope``), tracing (the pipeline step with tracing
off and on, against the plain run; last, as it sets the global tracer provider). `cost` is
`cost.line1` on 1.x (a `ReActAgent`) and `cost.line2` on 2.x (an `Agent`);
`compaction_cost` (the compactor's prefix request against the plain one, at providers'
cache prices) on both; `baseline` (1.x's
`CompressionConfig`) is 1.x only, `steady2` (the 2.x adapter's step) 2.x only.

The options after a benchmark's name go to it, as to its module run alone:
``python -m benchmarks store --large --stores local`` is
``python -m benchmarks.store.stores --large --stores local``, within a full run's report
(`options` in the module reads them; a benchmark without one takes none).
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python benchmarks/__main__.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentscope_ctx._line import AGENTSCOPE_VERSION, IS_1X

LINE = "1.x" if IS_1X else "2.x"
RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"

_PLAN: list[tuple[str, str | None, str | None, str]] = [
    # name, module on 1.x, module on 2.x, why it is skipped on the other line
    ("tokens", "pipeline.tokens", "pipeline.tokens", ""),
    ("truncation", "pipeline.truncation", "pipeline.truncation", ""),
    ("pipeline", "pipeline.step", "pipeline.step", ""),
    ("pins", "pipeline.pins", "pipeline.pins", ""),
    (
        "steady2",
        None,
        "pipeline.steady2",
        "the 2.x adapter's step (AgentState <-> memory); on 1.x, `pipeline` is the step",
    ),
    (
        "baseline",
        "cost.baseline",
        None,
        "1.x's ReActAgent.CompressionConfig; 2.x's own context management is in `cost`",
    ),
    ("cost", "cost.line1", "cost.line2", ""),
    ("compaction_cost", "cost.compaction", "cost.compaction", ""),
    ("search", "store.search", "store.search", ""),
    ("probes", "pipeline.probes", "pipeline.probes", ""),
    ("startup", "startup.imports", "startup.imports", ""),
    ("store", "store.stores", "store.stores", ""),
    ("fleet_load", "fleet.load", "fleet.load", ""),
    # last: its tracing-on phase sets the global tracer provider for the rest of the process
    ("tracing", "pipeline.tracing", "pipeline.tracing", ""),
]


MODULES: dict[str, str] = {
    name: f"benchmarks.{one if IS_1X else two}"
    for name, one, two, _ in _PLAN
    if (one if IS_1X else two) is not None
}
"""The module of each benchmark of the installed line."""


def _runner(module: str) -> Callable[..., dict[str, Any]]:
    def run(**options: Any) -> dict[str, Any]:
        result: dict[str, Any] = importlib.import_module(module).main(**options)
        return result

    return run


BENCHES: list[tuple[str, Callable[..., dict[str, Any]]]] = [
    (name, _runner(module)) for name, module in MODULES.items()
]
"""The benchmarks of the installed line (imported when they run); each takes its `main`'s
keyword arguments."""

SKIPPED: dict[str, str] = {
    name: f"AgentScope {'2' if IS_1X else '1'}.x only: {why}"
    for name, one, two, why in _PLAN
    if (one if IS_1X else two) is None
}
"""The benchmarks of the other line, with the reason."""


def machine() -> dict[str, Any]:
    """Where the numbers were taken."""
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
        "agentscope": AGENTSCOPE_VERSION,
        "agentscope_line": LINE,
        "tiktoken": tiktoken_version,
        "agentscope_ctx": __version__,
    }


def _options(name: str, words: list[str]) -> dict[str, Any]:
    """Benchmark `name`'s keyword arguments from the `words` after its name (none: its
    defaults)."""
    if not words or name in SKIPPED:  # the other line's: it does not run
        return {}
    read = getattr(importlib.import_module(MODULES[name]), "options", None)
    if read is None:
        raise SystemExit(f"benchmark {name!r} takes no options; got {words}")
    options: dict[str, Any] = read(words)
    return options


def plan(argv: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The benchmarks `argv` names, each with its keyword arguments: the options after a name
    up to the next name are that benchmark's (``store --large --stores local``)."""
    known = {name for name, _ in BENCHES} | set(SKIPPED)
    words: dict[str, list[str]] = {}
    unknown: list[str] = []
    current: list[str] | None = None
    for word in argv:
        if word in known:
            current = words.setdefault(word, [])
        elif current is not None:
            current.append(word)  # an option, or an option's value (``--stores local``)
        elif word.startswith("-"):
            raise SystemExit(f"{word!r}: options go after the name of the benchmark they are for")
        else:
            unknown.append(word)
    if unknown:
        raise SystemExit(
            f"unknown benchmark(s): {sorted(set(unknown))}; known: {[name for name, _ in BENCHES]}"
        )
    return {name: _options(name, after) for name, after in words.items()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmarks named in `argv` (all by default; the options after a name are that
    benchmark's), print and save the results."""
    chosen = plan(argv or [])
    names = list(chosen) if chosen else [name for name, _ in BENCHES]
    info = machine()
    print("agentscope-ctx benchmarks")
    for key, value in info.items():
        print(f"  {key:<15} {value}")
    results: dict[str, Any] = {"machine": info, "benchmarks": {}, "seconds": {}, "skipped": {}}
    for name, why in SKIPPED.items():
        if not chosen or name in names:
            print(f"  skipped {name}: {why}")
            results["skipped"][name] = why
    started = time.perf_counter()
    for name, bench in BENCHES:
        if name not in names:
            continue
        print()
        print(f"=== {name} " + "=" * (70 - len(name)))
        start = time.perf_counter()
        results["benchmarks"][name] = bench(**chosen.get(name, {}))
        results["seconds"][name] = round(time.perf_counter() - start, 2)
        print(f"({name}: {results['seconds'][name]:.1f} s)")
    results["seconds"]["total"] = round(time.perf_counter() - started, 2)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(results, indent=2, default=str, ensure_ascii=False) + "\n"
    by_line = RESULTS.with_name(f"{RESULTS.stem}-{LINE}.json")
    for path in (RESULTS, by_line):
        path.write_text(text, encoding="utf-8")
    print()
    print(f"total {results['seconds']['total']:.1f} s; results written to {RESULTS} and {by_line}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
