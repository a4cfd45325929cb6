"""Load on the fleet store: many sessions over worker processes, one `ContextManager` per
session (issue 46 items 16-17), on the installed AgentScope line.

Run ``python -m benchmarks.fleet.load --sessions 10,100,1000 --workers 2`` (or ``python -m
benchmarks fleet_load --sessions 10,100``). For each session count, a private PostgreSQL
server (``tests/fleet/postgres_server``, fsync on, a unix socket) gets a schema of its own, and
`--workers` worker processes (`benchmarks.fleet.load_worker`) each serve their share of the
sessions at once, hand-wired as every 1.x user and a hand-wired 2.x service wire them: a
manager per session on the store, a real agent (`Agent`, 1.x `ReActAgent`), toolkit and
scripted model (`load_agents`). Each worker
names itself to the server (``application_name``); a third connection samples
`pg_stat_activity` every 20 ms meanwhile.

Printed per session count:

- per worker: the most connections the server saw it hold at once (and its pool's own peak),
  its RSS before the sessions, at peak and after (``gc.collect``, ``malloc_trim``), and the
  package's objects still alive then;
- the package's time per reply, p50 / p95 (2.x): the wall time in its middleware hooks, the
  waits for its threads and the database included, the model, the tools and the agent not
  (`benchmarks.fleet.timed`), beside the whole turn's and the workers' CPU time per turn;
- model calls over the budget (each prompt counted as the provider gets it; must be 0),
  `search_history` probes that found their output, compactions, errors;
- the load average at the start and at the end.

Then the memory each session leaves behind, from the smallest count to the largest: the
growth of the RSS after the run, per session served. Numbers only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

ROOT = Path(__file__).resolve().parents[2]
PASSWORD_ENV = "AGENTSCOPE_CTX_BENCH_PGPASSWORD"
APP = "actx-load-w"


class Sampler(threading.Thread):
    """Counts each worker's connections in `pg_stat_activity` until `stop`, keeping the peak."""

    def __init__(self, dsn: str, password: str) -> None:
        super().__init__(daemon=True)
        import psycopg

        self.conn = psycopg.connect(
            dsn, password=password, autocommit=True, application_name="actx-load-sampler"
        )
        self.peaks: dict[str, int] = {}
        self.samples = 0
        self.done = threading.Event()

    def run(self) -> None:
        query = (
            "SELECT application_name, count(*) FROM pg_stat_activity "
            "WHERE application_name LIKE %s GROUP BY 1"
        )
        while not self.done.wait(0.02):
            for name, count in self.conn.execute(query, (APP + "%",)).fetchall():
                self.peaks[name] = max(self.peaks.get(name, 0), count)
            self.samples += 1

    def stop(self) -> dict[str, int]:
        self.done.set()
        self.join()
        self.conn.close()
        return self.peaks


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run_point(
    server: Any, password: str, sessions: int, args: argparse.Namespace
) -> dict[str, Any]:
    """`sessions` over `args.workers` worker processes on a schema of their own."""
    folder = Path(tempfile.mkdtemp(prefix=f"actx-load-{sessions}-"))
    schema = f"load_{sessions}"
    env = {**os.environ, PASSWORD_ENV: password}
    shares = [sessions // args.workers + (k < sessions % args.workers) for k in range(args.workers)]
    load_start = os.getloadavg()
    sampler = Sampler(server.dsn, password)
    sampler.start()
    workers, first = [], 0
    for k, share in enumerate(shares):
        dsn = f"{server.dsn} application_name={APP}{k}"
        command = [
            sys.executable, "-m", "benchmarks.fleet.load_worker", "--worker", str(k),
            "--sessions", str(share), "--first", str(first), "--in-flight", str(args.in_flight),
            "--dsn", dsn, "--password-env", PASSWORD_ENV, "--schema", schema,
            "--max-connections", str(args.max_connections),
            "--working-dir", str(folder / f"w{k}"), "--out", str(folder / f"w{k}.json"),
        ]  # fmt: skip
        workers.append(subprocess.Popen(command, cwd=ROOT, env=env))
        first += share
    start = time.perf_counter()
    codes = [worker.wait() for worker in workers]
    wall = time.perf_counter() - start
    peaks = sampler.stop()
    if any(codes):
        raise SystemExit(f"a worker failed: exit codes {codes} (its output is above)")
    results = [json.loads((folder / f"w{k}.json").read_text()) for k in range(args.workers)]
    shutil.rmtree(folder, ignore_errors=True)
    for k, result in enumerate(results):
        result["connections_peak"] = peaks.get(f"{APP}{k}", 0)
    replies = [s for r in results for s in r["reply_seconds"]]
    turns = [s for r in results for s in r["turn_seconds"]]
    return {
        "sessions": sessions,
        "workers": results,
        "wall_seconds": round(wall, 1),
        "samples": sampler.samples,
        "load_start": load_start,
        "load_end": os.getloadavg(),
        "package_ms": {q: 1000 * _quantile(replies, v) for q, v in (("p50", 0.5), ("p95", 0.95))},
        "turn_ms": {q: 1000 * _quantile(turns, v) for q, v in (("p50", 0.5), ("p95", 0.95))},
        "replies": len(replies),
        "cpu_ms_per_turn": 1000 * sum(r["cpu_seconds"] for r in results) / max(len(turns), 1),
        "model_calls": sum(r["model_calls"] for r in results),
        "over_budget": [t for r in results for t in r["over_budget"]],
        "probes": sum(r["probes"] for r in results),
        "found": sum(r["found"] for r in results),
        "compactions": sum(r["compactions"] for r in results),
        "errors": [e for r in results for e in r["errors"]],
        "mean_ms": statistics.fmean(replies) * 1000 if replies else None,
    }


def _ms(quantiles: dict[str, float]) -> str:
    """p50 / p95, or n/a where nothing was timed (1.x: the package's time is not measured)."""
    if quantiles["p50"] != quantiles["p50"]:  # NaN
        return "n/a"
    return f"{quantiles['p50']:.1f} / {quantiles['p95']:.1f}"


def report(points: list[dict[str, Any]]) -> None:
    """Print the figures of each point, then the memory left per session."""
    mb = 1e6
    print(
        "sessions | worker | conns peak (pool) | RSS before / peak / after MB | "
        "managers alive at the end -> after (s) | pipelines, recorders after | usage records"
    )
    for point in points:
        for w in point["workers"]:
            held = w["held"]
            print(
                f"{point['sessions']:>8} | {w['worker']:>6} | {w['connections_peak']:>4} "
                f"({w['pool_peak']}) | {w['rss_before'] / mb:.0f} / {w['rss_peak'] / mb:.0f} / "
                f"{w['rss_after'] / mb:.0f} | {w['held_at_end']['managers']} -> "
                f"{held['managers']} ({w['release_seconds']:.1f}) | {held['pipelines']}, "
                f"{held['step_recorders']} | {w['usage_records']}"
            )
    print()
    print(
        "sessions | replies | package ms p50 / p95 | turn ms p50 / p95 | worker CPU ms / turn | model calls | "
        "over budget | probes found | compactions | errors | wall s | load start -> end"
    )
    for p in points:
        print(
            f"{p['sessions']:>8} | {p['replies']:>7} | {_ms(p['package_ms'])} | "
            f"{p['turn_ms']['p50']:.0f} / {p['turn_ms']['p95']:.0f}"
            f" | {p['cpu_ms_per_turn']:.0f} | {p['model_calls']} | {len(p['over_budget'])} | {p['found']} / {p['probes']} | "
            f"{p['compactions']} | {len(p['errors'])} | {p['wall_seconds']} | "
            f"{p['load_start'][0]:.1f} -> {p['load_end'][0]:.1f}"
        )
    for p in points:
        for error in p["errors"][:3]:
            print(f"  error ({p['sessions']} sessions): {error}")
        for w in p["workers"]:
            for said, count in sorted(w["warnings"].items(), key=lambda kv: -kv[1])[:5]:
                print(f"  worker {w['worker']} logged {count}x ({p['sessions']} sessions): {said}")
    if len(points) > 1:
        low, high = points[0], points[-1]
        print()
        for k, (a, b) in enumerate(zip(low["workers"], high["workers"], strict=True)):
            more = b["sessions"] - a["sessions"]
            grown = (b["rss_after"] - b["rss_before"]) - (a["rss_after"] - a["rss_before"])
            blocks = (b["blocks_after"] - b["blocks_before"]) - (
                a["blocks_after"] - a["blocks_before"]
            )
            print(
                f"worker {k}: {a['sessions']} -> {b['sessions']} sessions: RSS after the run "
                f"{grown / max(more, 1):,.0f} bytes more per session served; "
                f"{blocks / max(more, 1):,.1f} allocated blocks more per session"
            )


def options(words: list[str]) -> dict[str, Any]:
    """The keyword arguments of `main` from command-line words."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fleet.load", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--sessions", default="10,100", help="session counts, comma-separated")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--in-flight", type=int, default=0, help="per worker at once (0: all)")
    parser.add_argument("--max-connections", type=int, default=8, help="store.max_connections")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args(words)
    return vars(args)


def main(**kwargs: Any) -> dict[str, Any]:
    """Run the points; print and return their figures (skipped where no server runs)."""
    args = argparse.Namespace(**{**options([]), **kwargs})
    from tests.fleet.postgres_server import PASSWORD, PostgresServer, why_unavailable

    why = why_unavailable()
    if why is not None:
        print(f"skipped: {why}")
        return {"skipped": why}
    server = PostgresServer.start(durable=True)
    points = []
    try:
        for sessions in (int(n) for n in str(args.sessions).split(",")):
            points.append(run_point(server, PASSWORD, sessions, args))
            report(points[-1:])
            print()
    finally:
        server.stop()
    report(points)
    result = {"points": points, "workers": args.workers, "in_flight": args.in_flight}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


if __name__ == "__main__":
    main(**options(sys.argv[1:]))
