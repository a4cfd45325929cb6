"""`remember` called many times by one fleet worker, in its own process (tests/fleet/test_memory).

The worker is a `ContextManager` of its own (its own working dir, its own connections) on the
shared PostgreSQL store; it saves COUNT facts ``"{prefix} fact {i}"`` as agent "helper" once
the go file exists, and reports how many answers said "Saved to" and the others.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from agentscope_ctx import ContextConfig, ContextManager
from tests.support.lines import text_of


def worker(config: ContextConfig, go_file: Path, prefix: str, count: int, results: Any) -> None:
    """Run in a forked child: puts "READY", then the report (or `None`: no go within 60 s)."""
    manager = ContextManager(config)
    memory = manager.long_term_of("helper")
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
    manager.backend.close()
    results.put({"saved": saved, "other": other[:5]})
