"""`remember` called many times in its own process (tests/memory/test_memory_writes.py).

    python -m tests.support.remember_proc WORKING_DIR GO_FILE PREFIX COUNT

Waits until GO_FILE exists (so that the processes start together), then saves COUNT facts
``"{PREFIX} fact {i}"`` with `LongTermMemory.remember`, and prints one JSON line: how many
answers said "Saved to", and the other answers (errors) or exceptions. The tests run `worker`
in forked children instead (they start at once: AgentScope is imported).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentscope_ctx.memory._long_term import LongTermMemory
from tests.support.lines import text_of


def remember_all(
    working_dir: Path, go_file: Path, prefix: str, count: int, ready: Callable[[], object]
) -> dict[str, Any] | None:
    """Call `ready` once set up, save the facts once GO_FILE exists; the report, or `None`
    when GO_FILE did not appear within a minute."""
    memory = LongTermMemory(working_dir)
    ready()
    deadline = time.monotonic() + 60
    while not go_file.exists():
        if time.monotonic() > deadline:
            return None
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
    return {"saved": saved, "other": other[:5]}


def worker(working_dir: Path, go_file: Path, prefix: str, count: int, results: Any) -> None:
    """`remember_all` in a `multiprocessing` child: puts "READY", then the report."""
    results.put(remember_all(working_dir, go_file, prefix, count, lambda: results.put("READY")))


def main(argv: list[str]) -> int:
    working_dir, go_file, prefix, count = Path(argv[0]), Path(argv[1]), argv[2], int(argv[3])
    report = remember_all(working_dir, go_file, prefix, count, lambda: print("READY", flush=True))
    if report is None:
        return 2
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
