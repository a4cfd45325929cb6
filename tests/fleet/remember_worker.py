"""`remember` called many times by two processes at once, each a forked child of the test:
on the PostgreSQL store, two fleet workers (a `ContextManager` each, its own working dir and
connections: tests/fleet/test_memory.py); on a local working dir, two processes sharing its
files (tests/test_memory_writes.py).

`remember_in_two_processes` starts both, lets them go together, and returns their reports;
each saves COUNT facts ``"{name} fact {i}"`` as agent "helper".
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.memory._long_term import LongTermMemory
from tests.support.lines import text_of

NAMES = ("alpha", "beta")
"""The two processes' names (each fact says whose it is)."""


def worker(
    where: ContextConfig | Path, go_file: Path, prefix: str, count: int, results: Any
) -> None:
    """Run in a forked child: puts "READY", then the report (or `None`: no go within 60 s).
    `where`: a config (a manager's memory of agent "helper", as a fleet worker has it) or a
    working dir (its `LongTermMemory`)."""
    manager = ContextManager(where) if isinstance(where, ContextConfig) else None
    memory = LongTermMemory(where) if manager is None else manager.long_term_of("helper")
    results.put("READY")
    deadline = time.monotonic() + 60
    while not go_file.exists():
        if time.monotonic() > deadline:
            results.put(None)
            return
        time.sleep(0.001)
    saved, other = 0, []
    for i in range(count):
        try:
            result = memory.remember(f"{prefix} fact {i}")
            answer = result if isinstance(result, str) else text_of(result)
        except Exception as exc:  # what the tool raised: the agent would see an error
            answer = f"raised {exc!r}"
        if answer.startswith("Saved to"):
            saved += 1
        else:
            other.append(answer)
    if manager is not None:
        manager.backend.close()
    results.put({"saved": saved, "other": other[:5]})


def remember_in_two_processes(
    where: Callable[[str], ContextConfig | Path], go: Path, count: int
) -> None:
    """Two forked children (`NAMES`; `where(name)` is each one's `worker` target) save
    `count` facts each, started together; both must save every one."""
    context = multiprocessing.get_context("fork")  # starts at once: AgentScope is imported
    results = context.Queue()
    procs = [
        context.Process(target=worker, args=(where(name), go, name, count, results))
        for name in NAMES
    ]
    for proc in procs:
        proc.start()
    assert [results.get(timeout=120) for _ in procs] == ["READY"] * 2  # they start together
    go.touch()
    reports = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0  # a failure's traceback is in the captured stderr
    assert reports == [{"saved": count, "other": []}] * 2, reports


def expected_facts(count: int) -> set[str]:
    """The MEMORY.md lines `remember_in_two_processes` leaves."""
    return {f"- {name} fact {i}" for name in NAMES for i in range(count)}
