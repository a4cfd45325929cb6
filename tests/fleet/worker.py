"""A worker process of the fleet harness (tests/fleet/harness.py), on the installed line.

    python -m tests.fleet.worker SPEC_JSON

Prints READY, then answers commands read from stdin, one a line:

- `TURN`: run the session's next turn as the app would (load the state, reply, save);
  prints `START t` before the reply and `SAVED t` after the save, or `OVER`.
- `CHECK`: load the session and check it from here (tests/fleet/checks.py); prints
  `CHECKED <json>`.

The manager lives as long as the process (a worker serves many runs); each run gets a fresh
agent, as the AgentScope 2.x app makes one per chat run.
"""

from __future__ import annotations

import asyncio
import json
import sys
import traceback
from pathlib import Path

from agentscope_ctx._line import IS_1X


async def main(raw: str) -> int:
    if IS_1X:
        from tests.fleet import session1 as session
    else:
        from tests.fleet import session2 as session  # type: ignore[no-redef]
    spec = session.Spec.from_json(raw)
    session.PROMPT_LOG = Path(spec.store["working_dir"]).parent / "prompts.log"
    worker = session.Worker(spec)
    await worker.open()
    print("READY", flush=True)
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        command = line.strip()
        if not command:
            break
        if command == "TURN":
            turn = await worker.turn(lambda t: print(f"START {t}", flush=True))
            print("OVER" if turn is None else f"SAVED {turn}", flush=True)
        elif command == "CHECK":
            try:
                result = await worker.check()
            except Exception:
                result = {"error": traceback.format_exc()}
            print(f"CHECKED {json.dumps(result)}", flush=True)
        else:
            print(f"UNKNOWN {command}", flush=True)
    await worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
