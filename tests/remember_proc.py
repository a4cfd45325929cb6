"""`remember` called many times in its own process (tests/test_memory_writes.py).

    python -m tests.remember_proc WORKING_DIR GO_FILE PREFIX COUNT

Waits until GO_FILE exists (so that the processes start together), then saves COUNT facts
``"{PREFIX} fact {i}"`` with `LongTermMemory.remember`, and prints one JSON line: how many
answers said "Saved to", and the other answers (errors) or exceptions.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from agentscope_ctx.memory._long_term import LongTermMemory
from tests.lines import text_of


def main(argv: list[str]) -> int:
    working_dir, go_file, prefix, count = Path(argv[0]), Path(argv[1]), argv[2], int(argv[3])
    memory = LongTermMemory(working_dir)
    print("READY", flush=True)
    deadline = time.monotonic() + 60
    while not go_file.exists():
        if time.monotonic() > deadline:
            return 2
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
    print(json.dumps({"saved": saved, "other": other[:5]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
