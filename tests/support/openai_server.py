"""A local OpenAI-compatible HTTP server for tests (stdlib `http.server` on 127.0.0.1, in a
thread), shared by the 1.x and 2.x tests: it speaks the chat-completions wire format, JSON for
plain calls and server-sent events for streamed ones (text and tool-call deltas in pieces,
then a usage chunk with no choices, then ``[DONE]``). Only the replies are scripted."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPORTED_PROMPT_TOKENS = 9_000
"""What the server says each prompt cost: far above our estimate, so calibration shows."""
SUMMARY = (
    "## Goal\n- find the TODOs\n## Constraints\n- (none)\n## Progress\n### Done\n"
    "- grep ran\n### In progress\n- (none)\n### Blocked\n- (none)\n## Key Decisions\n"
    "- (none)\n## Next Steps\n- (none)\n## Critical Context\n- notes.txt line 2"
)


@dataclass
class Reply:
    """One scripted answer: a text, or a call of `tool` with `arguments`."""

    text: str = ""
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    error: int = 0
    """An HTTP error status instead (400: OpenAI's context_length_exceeded)."""


Script = Reply | Callable[[dict[str, Any]], Reply]
"""A scripted answer, or a function of the request body that makes one."""


class Server(ThreadingHTTPServer):
    daemon_threads = True
    script: list[Script]
    requests: list[dict[str, Any]]
    reported: int | None
    """The prompt tokens the usage reports; `None`: about a token per 4 characters sent."""

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        prompt = self.reported or len(json.dumps(body["messages"])) // 4
        return {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7}

    def next_reply(self, body: dict[str, Any]) -> Reply:
        """The compactor gets a valid summary; everyone else the next scripted reply."""
        system = str(body["messages"][0].get("content", "")) if body["messages"] else ""
        if "context compactor" in system:
            return Reply(text=SUMMARY)
        item = self.script.pop(0) if self.script else Reply(text="Done.")
        return item if isinstance(item, Reply) else item(body)


def _message(reply: Reply, n: int) -> dict[str, Any]:
    if reply.tool is None:
        return {"role": "assistant", "content": reply.text}
    call = {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": reply.tool, "arguments": json.dumps(reply.arguments)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _deltas(reply: Reply, n: int) -> Iterator[dict[str, Any]]:
    """The deltas of a streamed answer, the way OpenAI sends them."""
    yield {"role": "assistant", "content": ""}
    if reply.tool is None:
        for piece in _pieces(reply.text):
            yield {"content": piece}
        return
    head = {"index": 0, "id": f"call_{n}", "type": "function"}
    yield {"tool_calls": [{**head, "function": {"name": reply.tool, "arguments": ""}}]}
    for piece in _pieces(json.dumps(reply.arguments)):
        yield {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}


class Handler(BaseHTTPRequestHandler):
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self.path.endswith("/chat/completions"):
            self.send_error(404)
            return
        self.server.requests.append(body)
        n = len(self.server.requests)
        reply = self.server.next_reply(body)
        base = {"id": f"chatcmpl-{n}", "created": 1_764_000_000, "model": body["model"]}
        finish = "stop" if reply.tool is None else "tool_calls"
        if reply.error:
            self._send_error(reply.error)
            return
        if not body.get("stream"):
            data = json.dumps(
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [
                        {"index": 0, "message": _message(reply, n), "finish_reason": finish}
                    ],
                    "usage": self.server.usage(body),
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        chunk = {**base, "object": "chat.completion.chunk"}
        events = [
            {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            for delta in _deltas(reply, n)
        ]
        events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if body.get("stream_options", {}).get("include_usage"):
            events.append({**chunk, "choices": [], "usage": self.server.usage(body)})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
        for event in events:
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def _send_error(self, status: int) -> None:
        error = {
            "message": "This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 9100 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
        data = json.dumps({"error": error}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def serving() -> Iterator[Server]:
    """A running server on a free port of 127.0.0.1 (stopped on exit)."""
    srv = Server(("127.0.0.1", 0), Handler)
    srv.script, srv.requests, srv.reported = [], [], REPORTED_PROMPT_TOKENS
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def base_url(server: Server) -> str:
    """The server's OpenAI base URL (``.../v1``)."""
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def model_fields(server: Server, stream: bool) -> dict[str, Any]:
    """The ``model:`` fields of an OpenAI chat model on `server` (no API key, no retries)."""
    return {
        "provider": "openai",
        "model_name": "local-test-model",
        "base_url": base_url(server),
        "api_key_env": None,
        "stream": stream,
        "client_kwargs": {"max_retries": 0, "timeout": 20},
    }


REPORT_ANSWER = "All 1500 checks of checkout-api passed; the slowest took 96 ms."
"""The model's last answer in `report_script`."""


def build_report(service: str) -> str:
    """Build the status report of a service.

    Args:
        service (str): the service's name.
    """
    return "".join(f"{service} check {i:04d}: ok, latency {i % 97} ms\n" for i in range(1_500))


def report_script() -> list[Reply]:
    """The model calls `build_report` for checkout-api, then answers `REPORT_ANSWER`."""
    return [
        Reply(tool="build_report", arguments={"service": "checkout-api"}),
        Reply(text=REPORT_ANSWER),
    ]


def check_report_reached_cut(server: Server, reply_text: str, stream: bool) -> None:
    """After `report_script` on an agent whose tool outputs are cut at 4,096 bytes: the answer
    came back, both requests went out (streamed or plain, with the agent's tools and our
    `read_file`), and the report reached the second request cut, with a notice pointing at
    the saved full text."""
    from agentscope_ctx.core.truncation._truncation import parse_notice

    assert reply_text == REPORT_ANSWER
    assert len(server.requests) == 2
    assert all(request.get("stream", False) is stream for request in server.requests)
    assert "read_file" in [t["function"]["name"] for t in server.requests[0]["tools"]]
    tool_messages = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 1
    content = tool_messages[0]["content"]
    shown = content if isinstance(content, str) else "".join(p["text"] for p in content)
    assert shown.startswith("checkout-api check 0000: ok") and len(shown.encode()) <= 4_096
    parsed = parse_notice(shown)
    assert parsed is not None
    assert Path(parsed[1].file_path).read_text(encoding="utf-8") == build_report("checkout-api")
