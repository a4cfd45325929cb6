"""Provider-native compaction, the request and response shaping (DESIGN.md §18,
docs/providers.md "Native context management").

Two providers compact a prompt on their side and answer an opaque block that, sent back,
stands for everything before it:

- Anthropic's Messages API: the ``compact_20260112`` edit of ``context_management`` (beta
  ``compact-2026-01-12``), with a trigger in input tokens (at least 50,000); the response
  opens with a ``compaction`` block (``content``: the provider's summary, ``signature``).
  Sent back at the head of an assistant message, the API ignores every block before it.
- OpenAI's Responses API: ``context_management=[{"type": "compaction", "compact_threshold":
  N}]``; the output opens with a ``compaction`` item (``encrypted_content``: opaque). Sent
  back, the items before it are ignored (the system prompt then goes to ``instructions``).

AgentScope's parsers drop both. The package keeps a block as the session's summary: a
*stand-in* text whose first line names the block (`stand_in`), followed by what can be
read of it (Anthropic's summary; for OpenAI, a note). The stand-in is counted by the local
accountant like any summary, stored with the session like any summary, and sent as it is
when the provider cannot take the block (a readable fallback). While the package's model
call is under way, the request is rewritten at the client (`models._native_client`): the
stand-in gives way to the block (`anthropic_request`, `responses_request`), and the block a
response opens with is captured (`read_anthropic`, `read_anthropic_event`,
`read_responses`, `read_responses_event`).

This module imports no AgentScope and no SDK: requests are the keyword arguments of the
SDK's ``create``, responses are read by attribute or key.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from ._cache import unwrapped

__all__ = [
    "ANTHROPIC_MIN_TRIGGER",
    "COMPACT_BETA",
    "NATIVE_RECORD",
    "NativeCall",
    "NativeKind",
    "anthropic_request",
    "is_refusal",
    "item_key",
    "native_kind",
    "parse_stand_in",
    "read_anthropic",
    "read_anthropic_event",
    "read_responses",
    "read_responses_event",
    "responses_request",
    "stand_in",
]

NativeKind = Literal["anthropic", "responses"]

COMPACT_BETA = "compact-2026-01-12"
ANTHROPIC_MIN_TRIGGER = 50_000
"""Anthropic's least ``compact_20260112`` trigger, in input tokens."""

NATIVE_RECORD = "agentscope_ctx.native"
"""Metadata key of the dialog record that keeps a provider's block beside what it replaced."""

_HEAD = "[agentscope_ctx: the earlier conversation, compacted by "
_LINE = re.compile(
    r"\[agentscope_ctx: the earlier conversation, compacted by (?P<who>anthropic|openai)"
    r" \((?P<size>\d+) characters follow; (?P<ref>[^)\s]+)\)\]\n"
)
_ABOVE = "(The earlier conversation is in the provider's compaction block above.)"
_REFUSED = ("context_management", "compact", "beta", "encrypted content", "encrypted_content")


@dataclass
class NativeCall:
    """One model call in native mode: what its request may send back, what it captured."""

    kind: NativeKind
    trigger: int
    """Prompt tokens at which the provider compacts."""
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    """OpenAI's compaction items the request may send back, by `item_key`."""
    replaced: list[str] = field(default_factory=list)
    """Ids of the live messages the request sends (what a compaction replaces)."""
    captured: dict[str, Any] | None = None
    """The block the response opened with (`None`: none)."""
    output_tokens: int = 0
    """The response's output tokens (OpenAI: a bound on the compaction item's size)."""
    refused: str | None = None
    """The provider's refusal of native context management, when it refused."""
    sent_block: bool = False
    """Whether the request carried a block back."""
    _parts: list[str] = field(default_factory=list)


def native_kind(model: Any) -> NativeKind | None:
    """Which native compaction `model` (1.x or 2.x; a wrapper's ``inner``) speaks, if any."""
    names = {cls.__name__ for cls in type(unwrapped(model)).__mro__}
    if "AnthropicChatModel" in names:
        return "anthropic"
    if "OpenAIResponseModel" in names:
        return "responses"
    return None


def item_key(item: dict[str, Any]) -> str:
    """A short, stable name of an OpenAI compaction item (a digest of its content)."""
    return "cmp-" + hashlib.sha256(str(item.get("encrypted_content")).encode()).hexdigest()[:24]


def stand_in(kind: NativeKind, block: dict[str, Any], replaced: int) -> str:
    """The summary text that stands for `block` (which replaced `replaced` messages)."""
    if kind == "anthropic":
        body = str(block.get("content") or "")
        ref = "signature=" + str(block.get("signature") or "")
    else:
        body = (
            f"{replaced} earlier messages were compacted by OpenAI into an encrypted item that "
            "only the provider can read; they are saved in dialog/ (search_history finds them)."
        )
        ref = "item=" + item_key(block)
    who = "anthropic" if kind == "anthropic" else "openai"
    return f"{_HEAD}{who} ({len(body)} characters follow; {ref})]\n{body}"


def parse_stand_in(text: str) -> tuple[str, str, str, int, int] | None:
    """The stand-in in a message's text (the summary message wraps it in its guide): (its
    provider, ``signature=...`` or ``item=...``, its body, where it starts, where it ends),
    or `None` (none, or one cut short: the last resort may cut the summary)."""
    found = _LINE.search(text)
    if found is None:
        return None
    start, size = found.end(), int(found["size"])
    body = text[start : start + size]
    if len(body) != size:
        return None
    return found["who"], found["ref"], body, found.start(), start + size


# -- requests ------------------------------------------------------------------------------


def anthropic_request(kwargs: dict[str, Any], call: NativeCall) -> dict[str, Any]:
    """The ``messages.create`` arguments with the compaction edit, its beta, and the block
    of a stand-in in place of its text (`kwargs` is not changed)."""
    out = dict(kwargs)
    body = dict(out.get("extra_body") or {})
    edit = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": call.trigger}}
    body["context_management"] = {"edits": [edit]}
    out["extra_body"] = body
    headers = dict(out.get("extra_headers") or {})
    betas = [b for b in str(headers.get("anthropic-beta") or "").split(",") if b.strip()]
    headers["anthropic-beta"] = ",".join([*betas, COMPACT_BETA])
    out["extra_headers"] = headers
    messages = list(out.get("messages") or [])
    for i, message in enumerate(messages):
        swapped = _swap(message, "anthropic")
        if swapped is None:
            continue
        (signature, content), rest = swapped
        block = {"type": "compaction", "content": content, "signature": signature}
        out["messages"] = [{"role": "assistant", "content": [block]}, rest, *messages[i + 1 :]]
        call.sent_block = True
        break
    return out


def responses_request(kwargs: dict[str, Any], call: NativeCall) -> dict[str, Any]:
    """The ``responses.create`` arguments with compaction on and the item of a stand-in in
    place of its text; the system messages before it go to ``instructions``."""
    out = dict(kwargs)
    out["context_management"] = [{"type": "compaction", "compact_threshold": call.trigger}]
    items = list(out.get("input") or [])
    for i, item in enumerate(items):
        swapped = _swap(item, "openai")
        if swapped is None or swapped[0][0] not in call.items:
            continue
        (key, _), rest = swapped
        system = [_text_of(x) for x in items[:i] if x.get("role") in ("system", "developer")]
        if out.get("instructions"):
            system.insert(0, str(out["instructions"]))
        if system:
            out["instructions"] = "\n\n".join(t for t in system if t)
        out["input"] = [call.items[key], rest, *items[i + 1 :]]
        call.sent_block = True
        break
    return out


def _swap(message: Any, who: str) -> tuple[tuple[str, str], dict[str, Any]] | None:
    """For a user message holding `who`'s stand-in in its first text: ((the reference's
    value, the body), the message with the stand-in replaced by a pointer to the block);
    `None` for any other message."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return None
    content = message.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(parts, list) or not parts or not isinstance(parts[0], dict):
        return None
    text = parts[0].get("text")
    if not isinstance(text, str):
        return None
    parsed = parse_stand_in(text)
    if parsed is None or parsed[0] != who:
        return None
    _, ref, body, start, end = parsed
    first = {**parts[0], "text": text[:start] + _ABOVE + text[end:]}
    new_content: Any = first["text"] if isinstance(content, str) else [first, *parts[1:]]
    return (ref.split("=", 1)[1], body), {**message, "content": new_content}


def _text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(
        str(p.get("text", "")) for p in content or [] if isinstance(p, dict) and "text" in p
    )


# -- responses -----------------------------------------------------------------------------


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def read_anthropic(response: Any, call: NativeCall) -> None:
    """Capture the ``compaction`` block a Messages response opens with."""
    for block in _get(response, "content") or []:
        if _get(block, "type") == "compaction" and _get(block, "content"):
            call.captured = {
                "type": "compaction",
                "content": str(_get(block, "content")),
                "signature": _get(block, "signature"),
            }
    usage = _get(response, "usage")
    call.output_tokens = int(_get(usage, "output_tokens") or 0) if usage is not None else 0


def read_anthropic_event(event: Any, call: NativeCall) -> None:
    """Follow one streamed event: a ``compaction`` block starts (its signature), its
    ``compaction_delta`` pieces, its stop."""
    kind = _get(event, "type")
    if kind == "content_block_start":
        block = _get(event, "content_block")
        if _get(block, "type") == "compaction":
            call._parts = [str(_get(block, "content") or "")]
            call.captured = {"type": "compaction", "content": "", "signature": None}
            call.captured["signature"] = _get(block, "signature")
    elif kind == "content_block_delta" and call.captured is not None and call._parts:
        delta = _get(event, "delta")
        if _get(delta, "type") == "compaction_delta":
            call._parts.append(str(_get(delta, "content") or ""))
    elif kind == "content_block_stop" and call.captured is not None and call._parts:
        call.captured["content"] = "".join(call._parts)
        call._parts = []
        if not call.captured["content"]:
            call.captured = None


def read_responses(response: Any, call: NativeCall) -> None:
    """Capture the ``compaction`` item a Responses output opens with."""
    for item in _get(response, "output") or []:
        if _get(item, "type") == "compaction" and _get(item, "encrypted_content"):
            call.captured = _item(item)
    usage = _get(response, "usage")
    call.output_tokens = int(_get(usage, "output_tokens") or 0) if usage is not None else 0


def read_responses_event(event: Any, call: NativeCall) -> None:
    """Follow one streamed event: an output item done that is a compaction item, and the
    completed response's usage."""
    kind = _get(event, "type")
    if kind == "response.output_item.done":
        item = _get(event, "item")
        if _get(item, "type") == "compaction" and _get(item, "encrypted_content"):
            call.captured = _item(item)
    elif kind == "response.completed":
        usage = _get(_get(event, "response"), "usage")
        call.output_tokens = int(_get(usage, "output_tokens") or 0) if usage is not None else 0


def _item(item: Any) -> dict[str, Any]:
    """An item as the dict to send back (the SDK's model dumped, without empty fields)."""
    if isinstance(item, dict):
        return {k: v for k, v in item.items() if v is not None}
    dumped: dict[str, Any] = item.model_dump(exclude_none=True)
    return dumped


def is_refusal(error: BaseException) -> bool:
    """Whether `error` is the provider refusing native context management (the beta, the
    edit, the model, or a block it cannot verify): a 400 that names one of them."""
    status = getattr(error, "status_code", None) or getattr(error, "status", None)
    if status != 400:
        return False
    text = str(getattr(error, "message", "") or error).lower()
    body = getattr(error, "body", None)
    if body is not None:
        text += " " + str(body).lower()
    return any(word in text for word in _REFUSED)
