"""Benchmark search while the history is being written (issue 46, item 11): several handles
of one store (each its own `open_stores`, as agents of one process or workers on one host
have) save and search in turn, every handle's background indexing left running.

Run ``python -m benchmarks store --live`` (10,000 messages and 100 MB of saved outputs), or
this module to choose the sizes::

    python -m benchmarks.store.live --points 10000:100 --handles 10 --stores local
    python -m benchmarks store --live --points 100000:1024

Each point is MESSAGES:OUTPUT_MB. The handles take turns, handle k of `handles` at turn t
when t % handles == k: it appends 10 messages (its background indexing is told) and saves an
output when one is due (OUTPUT_MB / 100 each, indexed at its save up to 8 MB); then, inside
a measured window, the next `searches` handles (k + 1, k + 2, ...) each search as their
tenant (agent ``bench``, session ``s<n>``) with the default catch-up: each search is its
handle's first after the other handles wrote, the first of them just after a write. Nothing waits
for the indexing to be idle. The windows are the last fifth of the history's first tenth and
the last fiftieth of all of it: p50/p95/p99 of each, the p95 growth from the tenth to the
whole, how far the background indexing was behind (what each search reported as pending:
files or dialog rows it could not search whole), and what the searches did in their own path
(files they indexed, text index commits they waited for, reader reloads), with the load
averages of the machine at the start and end of each window. Numbers only: no target is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.stores.factory import Stores, open_stores
from benchmarks.store.stores import _output, _queries, _text, each_point

DEFAULT_POINTS = ((10_000, 100),)
HANDLES = 10
SEARCHES = 2
APPEND_BATCH = 10
OUTPUTS = 100


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _figures(times: Sequence[float]) -> dict[str, float]:
    return {
        "searches": len(times),
        "p50_ms": round(_pct(times, 0.5) * 1000, 2),
        "p95_ms": round(_pct(times, 0.95) * 1000, 2),
        "p99_ms": round(_pct(times, 0.99) * 1000, 2),
        "max_ms": round(max(times, default=float("nan")) * 1000, 2),
    }


def _backlog(pending: Sequence[int]) -> dict[str, float]:
    """What the background had not indexed yet, as the window's searches reported it
    (`SearchResult.pending`: files or dialog rows each search could not search whole)."""
    if not pending:
        return {}
    return {"mean": round(sum(pending) / len(pending), 1), "max": max(pending), "last": pending[-1]}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _search_work(opened: Sequence[Stores]) -> dict[str, int]:
    """What the handles' searches did in their own path (`SearchIndex.search_work`; none on
    PostgreSQL)."""
    total: dict[str, int] = {}
    for one in opened:
        for key, value in getattr(one.search, "search_work", {}).items():
            total[key] = total.get(key, 0) + value
    return total


def run_point(
    kind: str,
    config: ContextConfig,
    messages: int,
    output_mb: int,
    *,
    handles: int = HANDLES,
    searches: int = SEARCHES,
) -> dict[str, Any]:
    """Fill the store to `messages` and `output_mb` through `handles` handles taking turns;
    returns the figures of the two windows."""
    rng = random.Random(7)
    opened = [open_stores(config, agent="bench", session=f"s{k}") for k in range(handles)]
    tenants = [Filters(tenant=Tenant.of("bench", f"s{k}")) for k in range(handles)]
    queries = _queries(rng)
    each = max((output_mb << 20) // OUTPUTS, 1)
    tenth = max(messages // 10, APPEND_BATCH)
    windows = {  # name: (first message count searched at, last)
        "tenth": (tenth // 2, tenth),
        "whole": (messages - max(messages // 20, APPEND_BATCH * handles), messages),
    }
    times: dict[str, list[float]] = {name: [] for name in windows}
    pending: dict[str, list[int]] = {name: [] for name in windows}
    loads: dict[str, list[list[float]]] = {name: [] for name in windows}
    work: dict[str, dict[str, int]] = {}

    async def fill() -> None:
        stored, turn, next_output = 0, 0, 0
        while stored < messages:
            k = turn % handles
            one = opened[k]
            await one.dialog.append([Msg("user", _text(rng, 30), "user") for _ in range(10)])
            stored += APPEND_BATCH
            due = stored * OUTPUTS // messages
            while next_output < min(due, OUTPUTS):
                one.outputs.save(_output(rng, each))
                next_output += 1
            for name, (low, high) in windows.items():
                if low < stored <= high:
                    if not times[name]:
                        loads[name].append(_load())
                        work[name] = _search_work(opened)
                    for j in range(1, searches + 1):  # the next handles, in turn
                        who = (k + j) % handles
                        query = queries[(turn * searches + j) % len(queries)]
                        start = time.perf_counter()
                        result = await asyncio.to_thread(
                            opened[who].search.search, query, tenants[who], limit=5
                        )
                        times[name].append(time.perf_counter() - start)
                        pending[name].append(result.pending)
                    if stored + APPEND_BATCH > high:
                        loads[name].append(_load())
                        after = _search_work(opened)
                        work[name] = {
                            key: value - work[name].get(key, 0) for key, value in after.items()
                        }
            turn += 1

    started = time.perf_counter()
    try:
        asyncio.run(fill())
    finally:
        for one in opened:
            one.search.close()  # its background indexing first (PostgreSQL: before the engine)
            one.close()
    figures = {name: _figures(values) for name, values in times.items()}
    growth = figures["whole"]["p95_ms"] / max(figures["tenth"]["p95_ms"], 1e-3)
    return {
        "kind": kind,
        "messages": messages,
        "output_mb": output_mb,
        "handles": handles,
        "searches_per_turn": searches,
        "fill_s": round(time.perf_counter() - started, 1),
        "windows": {
            name: f"{low + APPEND_BATCH}..{high} messages" for name, (low, high) in windows.items()
        },
        "tenth": figures["tenth"],
        "whole": figures["whole"],
        "p95_growth": round(growth, 2),
        "load_tenth": loads["tenth"],
        "load_whole": loads["whole"],
        "pending_tenth": _backlog(pending["tenth"]),
        "pending_whole": _backlog(pending["whole"]),
        "search_work_tenth": work.get("tenth", {}),
        "search_work_whole": work.get("whole", {}),
        "cpu_count": os.cpu_count(),
    }


def print_row(row: dict[str, Any]) -> None:
    tenth, whole = row["tenth"], row["whole"]
    print(
        f"{row['kind']:<9}{row['messages']:>8} msgs {row['output_mb']:>5} MB, "
        f"{row['handles']} handles in turn, indexing live | "
        f"search@{row['messages'] // 10} p50/p95/p99 {tenth['p50_ms']:.1f}/{tenth['p95_ms']:.1f}/"
        f"{tenth['p99_ms']:.1f} ms ({tenth['searches']} searches, load {row['load_tenth']}) | "
        f"search@{row['messages']} {whole['p50_ms']:.1f}/{whole['p95_ms']:.1f}/"
        f"{whole['p99_ms']:.1f} ms ({whole['searches']} searches, load {row['load_whole']}) | "
        f"p95 growth {row['p95_growth']:.2f}x | fill {row['fill_s']} s"
    )
    for name in ("tenth", "whole"):
        print(f"{'':<9}not indexed yet, per search ({name}): {row[f'pending_{name}']}")
        done = row[f"search_work_{name}"]
        if done:
            print(f"{'':<9}in the searches' path ({name}): {done}")


def main(
    points: Sequence[tuple[int, int]] | None = None,
    *,
    handles: int = HANDLES,
    searches: int = SEARCHES,
    stores: Sequence[str] = ("local", "postgres"),
) -> dict[str, Any]:
    """Run every point on `stores`; print the figures and return them."""
    points = points or DEFAULT_POINTS
    results: dict[str, Any] = {"live": {}, "skipped": {}}
    print(
        f"search while {handles} handles save (p50/p95/p99 in ms; the machine's load averages "
        f"over 1/5/15 min at the start and end of each window; {os.cpu_count()} cores)"
    )
    for kind, messages, output_mb, config in each_point(points, stores, "live", results["skipped"]):
        row = run_point(kind, config, messages, output_mb, handles=handles, searches=searches)
        results["live"][f"{kind}:{messages}:{output_mb}"] = row
        print_row(row)
    return results


def options(argv: Sequence[str]) -> dict[str, Any]:
    """`main`'s keyword arguments from the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", nargs="*", metavar="MESSAGES:OUTPUT_MB")
    parser.add_argument("--handles", type=int, default=HANDLES, help="handles of the store")
    parser.add_argument(
        "--searches", type=int, default=SEARCHES, help="searches after each turn's save"
    )
    parser.add_argument(
        "--stores", nargs="+", choices=("local", "postgres"), default=("local", "postgres")
    )
    args = parser.parse_args(argv)
    chosen = [tuple(map(int, p.split(":"))) for p in args.points] if args.points else None
    return {
        "points": chosen,
        "handles": args.handles,
        "searches": args.searches,
        "stores": args.stores,
    }


if __name__ == "__main__":
    main(**options(sys.argv[1:]))
