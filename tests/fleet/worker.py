"""A worker process of the fleet harness (tests/fleet/harness.py), on the installed line.

    python -m tests.fleet.worker

Prints READY, then answers commands read from stdin, one a line:

- `TURN <spec json>`: run the next turn of the session `spec` names as the app would (load
  the state, reply, save); prints `START t ATTEMPT` before the reply (ATTEMPT: the id of
  this run of the turn, in its tool calls' ids) and `SAVED t` after the save, or `OVER`.
- `TURNKILL <n> <spec json>`: `TURN`, but the process SIGKILLs itself as soon as the `n`-th
  dialog append of the turn has returned (a kill in the write-ahead window: saved to the
  dialog store, not yet removed from memory, the state not yet saved); a turn with fewer
  appends ends as `TURN` does.
- `CHECK <spec json>`: load the session and check it from here (tests/fleet/checks.py);
  prints `CHECKED <json>`.

A worker serves many runs (and, one after another, many sessions): its manager for a
session lives until a command names another session; each run gets a fresh agent, as the
AgentScope 2.x app makes one per chat run.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


async def main() -> int:
    from agentscope_ctx import TokenCounter
    from tests.fleet import session as shared

    session = shared.line_session()

    await TokenCounter("cl100k_base").count_text("warm up")  # load the encoding first
    print("READY", flush=True)
    current: tuple[str, Any] | None = None
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        command, _, raw = line.strip().partition(" ")
        if not command:
            break
        appends = 0
        if command == "TURNKILL":
            number, _, raw = raw.partition(" ")
            command, appends = "TURN", int(number)
        if current is None or current[0] != raw:
            if current is not None:
                await current[1].close()
            spec = shared.Spec.from_json(raw)
            shared.PROMPT_LOG = Path(spec.files).parent / "prompts.log"
            current = (raw, session.Worker(spec))
            await current[1].open()
        worker = current[1]
        if command == "TURN":
            disarm = _kill_after(type(worker.manager.dialog), appends) if appends else None
            try:
                turn = await worker.turn(
                    lambda t, attempt: print(f"START {t} {attempt}", flush=True)
                )
            finally:
                if disarm is not None:
                    disarm()
            print("OVER" if turn is None else f"SAVED {turn}", flush=True)
        elif command == "CHECK":
            try:
                result = await worker.check()
            except Exception:
                result = {"error": traceback.format_exc()}
            print(f"CHECKED {json.dumps(result)}", flush=True)
        else:
            print(f"UNKNOWN {command}", flush=True)
    if current is not None:
        await current[1].close()
    return 0


def _kill_after(store: type, appends: int) -> Callable[[], None]:
    """Make this process SIGKILL itself once `appends` calls of `store.append` (the dialog
    store's class, whichever the config chose) have returned; returns the undo."""
    original = store.append
    done = 0

    async def append(self: Any, msgs: Any) -> Any:
        nonlocal done
        written = await original(self, msgs)
        done += 1
        if done >= appends:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return written

    store.append = append  # type: ignore[method-assign]

    def disarm() -> None:
        store.append = original  # type: ignore[method-assign]

    return disarm


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
