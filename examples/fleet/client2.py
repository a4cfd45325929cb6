"""The fleet example's client on AgentScope 2.x: a long chat with tool calls over HTTP.

    python examples/fleet/client2.py --app http://127.0.0.1:8000 \
        --model http://127.0.0.1:8300/v1 --turns 12 --kill-at 5

It writes big log files into $FLEET_DIR/files, makes a credential for the model server, an
agent and a session, then sends one user turn at a time (each turn asks for a file or a shell
command whose output is big, so agentscope_ctx cuts and saves it). With --kill-at T it SIGKILLs
the worker that took turn T while the turn runs (the app names the worker in X-Worker-Pid; the
client only knows it because it runs on the same machine, as in this example), and the chat
goes on. The last line printed is a JSON summary.

After a worker dies mid-turn the turn is sent again, with the same message id, once the app
says the session is no longer running (the dead worker's lock has run out) and no reply
follows the message. Never replay a turn that has a reply: the app saves the reply before the
agent's state, so a reply there means the state may hold the turn already, and the message id
would then be in the state twice.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx


def write_files(folder: Path, turns: int) -> None:
    """One build log a turn, about 100 KB each, with a line to search for later."""
    folder.mkdir(parents=True, exist_ok=True)
    for t in range(1, turns + 1):
        lines = [
            f"build {t} step {n}: compiled module_{n % 97}.c in {n % 13} ms\n" for n in range(2_000)
        ]
        lines[1_234] = f"build {t} step 1234: ERROR disk quota exceeded on node-{t}\n"
        (folder / f"build-{t}.log").write_text("".join(lines), encoding="utf-8")


def turn_text(t: int, slow: bool) -> str:
    """Odd turns read a file, even turns run a command; a slow turn is one a kill can land in."""
    if slow:
        return f"turn {t}: run: sleep 4; grep -c step build-{t}.log; cat build-{t}.log"
    if t % 2:
        return f"turn {t}: read build-{t}.log"
    return f"turn {t}: run: grep -n module_{t} build-{t}.log"


class Chat:
    def __init__(self, app: str, user: str) -> None:
        # A new connection per request: the workers share the port, so requests spread over
        # them, and a killed worker takes no kept-alive connection of ours with it.
        no_keepalive = httpx.Limits(max_keepalive_connections=0)
        self.http = httpx.Client(
            base_url=app, headers={"X-User-ID": user}, timeout=60, limits=no_keepalive
        )

    def start(self, model_url: str) -> None:
        """A credential for the model server, an agent, and a session on them."""
        cred = {"type": "openai_credential", "api_key": "offline", "base_url": model_url}
        cred_id = self.post("/credential/", {"data": cred}).json()["credential_id"]
        self.agent_id = self.post("/agent/", {"name": "assistant"}).json()["agent_id"]
        model = {"type": "openai_chat", "credential_id": cred_id, "model": "scripted",
                 "parameters": {"stream": True}}  # fmt: skip
        body = {"agent_id": self.agent_id, "chat_model_config": model}
        self.session_id = self.post("/sessions/", body).json()["session_id"]

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        response = self.call("POST", path, json=body)
        if response.is_error:
            raise RuntimeError(f"POST {path}: {response.status_code} {response.text}")
        return response

    def send(self, message: dict[str, Any]) -> int:
        """Start a turn; the pid of the worker that runs it."""
        body = {"agent_id": self.agent_id, "session_id": self.session_id, "input": message}
        return int(self.post("/chat/", body).headers["X-Worker-Pid"])

    def page(self) -> dict[str, Any]:
        """The session's messages (the newest 200) and whether a turn is running."""
        params = {"agent_id": self.agent_id, "limit": 200}
        response = self.call("GET", f"/sessions/{self.session_id}/messages", params=params)
        response.raise_for_status()
        return dict(response.json())

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; sent again when its connection broke (its worker died): the next
        connection goes to a live worker."""
        for _attempt in range(20):
            try:
                return self.http.request(method, path, **kwargs)
            except httpx.TransportError:
                time.sleep(0.5)
        return self.http.request(method, path, **kwargs)

    def wait_reply(self, message_id: str, timeout: float = 120) -> str | None:
        """The reply to `message_id`, or None once the turn is lost: the session is not running,
        our message is saved (the run had started) and nothing follows it."""
        deadline, started = time.monotonic() + timeout, time.monotonic()
        while time.monotonic() < deadline:
            page = self.page()
            ids = [m["id"] for m in page["messages"]]
            if message_id in ids:
                after = page["messages"][ids.index(message_id) + 1 :]
                replies = [m for m in after if m["role"] == "assistant"]
                if replies and not page["is_running"]:
                    return text_of(replies[-1])
                if not page["is_running"]:
                    return None
            elif not page["is_running"] and time.monotonic() - started > 30:
                return None  # accepted, but its worker died before the run began
            time.sleep(0.2)
        raise TimeoutError(f"no answer to {message_id} in {timeout:.0f} s")


def text_of(message: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--app", default="http://127.0.0.1:8000")
    parser.add_argument("--model", default="http://127.0.0.1:8300/v1", help="the model server")
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--kill-at", type=int, default=0, help="kill the worker of this turn")
    parser.add_argument("--user", default="alice")
    args = parser.parse_args()
    write_files(Path(os.environ["FLEET_DIR"]) / "files", args.turns)
    chat = Chat(args.app, args.user)
    chat.start(args.model)
    summary: dict[str, Any] = {"user": args.user, "agent_id": chat.agent_id,
                               "session_id": chat.session_id, "answered": 0, "replays": 0,
                               "killed": None, "pids": [], "message_ids": []}  # fmt: skip
    for t in range(1, args.turns + 1):
        text = turn_text(t, slow=t == args.kill_at)
        message = {"id": uuid.uuid4().hex, "role": "user", "name": args.user,
                   "content": [{"type": "text", "text": text}]}  # fmt: skip
        summary["message_ids"].append(message["id"])
        pid = chat.send(message)
        if t == args.kill_at:
            time.sleep(1.5)  # inside the turn's `sleep 4`
            os.kill(pid, signal.SIGKILL)
            summary["killed"] = pid
            print(f"turn {t}: killed worker {pid} mid-turn", flush=True)
        for _attempt in range(3):
            answer = chat.wait_reply(message["id"])
            if answer is not None:
                break
            summary["replays"] += 1
            print(f"turn {t}: lost with its worker; sent again (same message id)", flush=True)
            pid = chat.send(message)
        else:
            print(f"turn {t}: no answer after 3 attempts", file=sys.stderr)
            return 1
        summary["answered"] += 1
        summary["pids"].append(pid)
        print(f"turn {t}: worker {pid}: {answer}", flush=True)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
