"""The fleet example's client on AgentScope 1.x: one chat whose turns alternate between two
workers (examples/fleet/worker1.py), one of them SIGKILLed in the middle of a turn.

    python examples/fleet/client1.py --workers http://127.0.0.1:8101 http://127.0.0.1:8102 \
        --turns 10 --kill-at 5

A turn whose worker dies (its connection breaks) is sent to the other worker with the same
message id: the dead worker had written the message to RedisMemory already, which keeps an id
once. The last line printed is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client2 import turn_text, write_files  # the same turns as on 2.x


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workers", nargs=2, default=["http://127.0.0.1:8101", "http://127.0.0.1:8102"]
    )
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--kill-at", type=int, default=0, help="kill the worker of this turn")
    parser.add_argument("--user", default="alice")
    args = parser.parse_args()
    write_files(Path(os.environ["FLEET_DIR"]) / "files", args.turns)
    workers = list(args.workers)
    pids = {url: httpx.get(url + "/").json()["pid"] for url in workers}
    session = uuid.uuid4().hex
    summary: dict[str, Any] = {"user": args.user, "session_id": session, "answered": 0,
                               "replays": 0, "killed": None, "message_ids": []}  # fmt: skip
    for t in range(1, args.turns + 1):
        turn = {"user": args.user, "session": session, "id": uuid.uuid4().hex,
                "text": turn_text(t, slow=t == args.kill_at)}  # fmt: skip
        summary["message_ids"].append(turn["id"])
        url = workers[t % len(workers)]  # alternate while both live
        if t == args.kill_at:  # SIGKILL this turn's worker while it runs the turn's `sleep 4`
            threading.Timer(1.5, os.kill, (pids[url], signal.SIGKILL)).start()
            summary["killed"] = pids[url]
        try:
            answer = httpx.post(url + "/chat", json=turn, timeout=120).json()
        except httpx.TransportError:
            print(f"turn {t}: worker {pids[url]} died mid-turn; sent to the other", flush=True)
            workers.remove(url)
            summary["replays"] += 1
            time.sleep(0.1)
            answer = httpx.post(workers[0] + "/chat", json=turn, timeout=120).json()
        summary["answered"] += 1
        print(f"turn {t}: worker {answer['pid']}: {answer['reply']}", flush=True)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
