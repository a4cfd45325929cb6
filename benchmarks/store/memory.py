"""Long-term memory on the fleet store: what one `remember` and one `log_today` cost, and the
memory prompt's read, as MEMORY.md grows (docs/fleet-memory.md).

    python -m benchmarks.store.memory [--facts N]

Starts a private PostgreSQL server (tests/fleet/postgres_server.py, durable: fsync on), makes
N `remember` calls on one agent's memory (each one transaction on the row, then the memory's
chunks re-indexed for `search_history`), and prints the median and p95 of each step's
latency in ms, by MEMORY.md size, against the local files store (flock + atomic replace).
Numbers only: nothing here asserts a time limit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.core.tokens._tokens import TokenCounter
from agentscope_ctx.memory._long_term import LongTermMemory


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"{statistics.median(values) * 1000:6.2f} / {p95 * 1000:6.2f}"


def _measure(name: str, memory: LongTermMemory, facts: int) -> None:
    counter = TokenCounter()
    bands: dict[int, list[float]] = {}
    for i in range(facts):
        start = time.perf_counter()
        memory.remember(f"The user's preference number {i} is option {i * 7 % 13}")
        bands.setdefault(i * 4 // facts, []).append(time.perf_counter() - start)
    logs = []
    for i in range(50):
        start = time.perf_counter()
        memory.log_today(f"Lesson {i}: retry the flaky step {i}")
        logs.append(time.perf_counter() - start)
    reads = []
    for _ in range(50):
        start = time.perf_counter()
        asyncio.run(memory.memory_prompt(counter, 2_000))
        reads.append(time.perf_counter() - start)
    for band, values in sorted(bands.items()):
        lines = f"{band * facts // 4}-{(band + 1) * facts // 4}"
        print(f"{name:8} remember, MEMORY.md at {lines:>9} facts: {_ms(values)} ms")
    print(f"{name:8} log_today (50 notes):                {_ms(logs)} ms")
    print(f"{name:8} memory prompt read:                  {_ms(reads)} ms")


def main(facts: int) -> None:
    from tests.fleet.postgres_server import PASSWORD, PostgresServer, why_unavailable

    print("median / p95 latency")
    with tempfile.TemporaryDirectory() as tmp:
        _measure("local", LongTermMemory(Path(tmp) / "local"), facts)
    why = why_unavailable()
    if why:
        print(f"postgres: skipped ({why})")
        return
    server = PostgresServer.start(durable=True)
    os.environ["AGENTSCOPE_CTX_BENCH_PGPASSWORD"] = PASSWORD
    try:
        with tempfile.TemporaryDirectory() as tmp:
            config = ContextConfig(
                working_dir=Path(tmp),
                store={
                    "kind": "postgres",
                    "dsn": server.dsn,
                    "password_env": "AGENTSCOPE_CTX_BENCH_PGPASSWORD",
                },
            )
            manager = ContextManager(config)
            _measure("postgres", manager.long_term_of("bench"), facts)
            manager.backend.close()
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=400)
    main(parser.parse_args().facts)
