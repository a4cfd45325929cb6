"""AgentScope 2.x messages as the core's entries, and back.

The core works on 1.x-shaped messages (`agentscope_ctx.core._entry.Msg`, dict blocks). A 2.x
`Msg` is cut into entries so that the core's unit, a message, means the same on both lines:

- a user or system message is one entry with the message's id;
- an assistant message (a 2.x reply holds every round of it: text, thinking, tool calls, the
  tool results and the agent's runtime-state hints) is cut into runs: each run of text,
  thinking, tool-call and media blocks is an assistant entry, each tool result is an entry of
  its own (role ``"system"``, as 1.x stores tool results) and each hint is a ``"user"`` entry
  (what the model is sent). A run's id is ``"<msg id>/<first block id>"``, a result's
  ``"<msg id>/<call id>/result"``, a hint's ``"<msg id>/<hint id>"``: ids are stable while the
  agent appends blocks, and unique, so the dialog store keeps each part of a split reply.

Blocks map to the 1.x dict form the core knows: ``thinking`` keeps the provider's fields beside
its text (Anthropic's ``signature``; a redacted block's ``redacted_thinking_data``, with an
empty text), as 1.x keeps ``signature`` in its dict: a thinking block the API issued must go
back to it byte for byte (DESIGN.md §18); ``tool_call`` → ``tool_use`` (``input`` the
parsed arguments, ``raw_input`` the model's text), ``tool_result`` with its ``output``, a
``DataBlock`` → ``image``/``audio``/``video`` by media type (else ``file``), a hint's text →
``text``. `to_blocks` turns an entry's (possibly cut) content back into 2.x blocks, keeping
each block's id, state and times from the block it came from.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentscope.message import (
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
    URLSource,
)

from ..core._entry import Msg as Entry

__all__ = ["Entry", "Origin", "to_blocks", "to_entries"]

Block = Any
"""A 2.x content block (the pydantic union of `agentscope.message`)."""
Origin = tuple[str, tuple[Block, ...]]
"""Where an entry came from: the 2.x message's id and the blocks it was made of."""

_KINDS = ("image", "audio", "video")


def to_entries(msg: Msg, start: int = 0) -> list[tuple[Entry, Origin]]:
    """The entries of one 2.x message, each with its origin; from block `start` on (an
    assistant message grows by appended blocks: only its new part needs converting, from the
    first block of its last entry)."""
    stamp = msg.created_at
    if msg.role != "assistant":
        entry = Entry(msg.name, _dicts(msg.content), msg.role, dict(msg.metadata), stamp)
        entry.id = msg.id
        return [(entry, (msg.id, tuple(msg.content)))]
    out: list[tuple[Entry, Origin]] = []
    run: list[Block] = []

    def close_run() -> None:
        if run:
            entry = Entry(msg.name, _dicts(run), "assistant", dict(msg.metadata), stamp)
            entry.id = f"{msg.id}/{run[0].id}"
            out.append((entry, (msg.id, tuple(run))))
            run.clear()

    for block in msg.content[start:]:
        if isinstance(block, ToolResultBlock):
            close_run()
            entry = Entry("system", [_dict(block)], "system", {}, stamp)
            entry.id = f"{msg.id}/{block.id}/result"
            out.append((entry, (msg.id, (block,))))
        elif isinstance(block, HintBlock):
            close_run()
            entry = Entry("user", [_dict(block)], "user", {}, stamp)
            entry.id = f"{msg.id}/{block.id}"
            out.append((entry, (msg.id, (block,))))
        else:
            run.append(block)
    close_run()
    return out


def to_blocks(content: str | Sequence[dict[str, Any]], origin: Sequence[Block]) -> list[Block]:
    """2.x blocks for an entry's content, each taking id, state and times from the block of
    `origin` at its position when that is of the same kind."""
    items = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    blocks = []
    for i, item in enumerate(items):
        before = origin[i] if i < len(origin) else None
        blocks.append(_block(item, before))
    return blocks


# -- 2.x → dict ------------------------------------------------------------------------


def _dicts(blocks: Sequence[Block]) -> list[dict[str, Any]]:
    return [_dict(block) for block in blocks]


def _dict(block: Block) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ThinkingBlock):
        # a provider's fields ride along: Anthropic's `signature`, `redacted_thinking_data`
        return {**(block.model_extra or {}), "type": "thinking", "thinking": block.thinking}
    if isinstance(block, ToolCallBlock):
        try:
            arguments = json.loads(block.input) if block.input else {}
        except ValueError:
            arguments = {}
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": arguments if isinstance(arguments, dict) else {},
            "raw_input": block.input,
        }
    if isinstance(block, ToolResultBlock):
        output = block.output if isinstance(block.output, str) else _dicts(block.output)
        return {"type": "tool_result", "id": block.id, "name": block.name, "output": output}
    if isinstance(block, HintBlock):
        hint = block.hint
        return {"type": "text", "text": hint} if isinstance(hint, str) else _dicts(hint)[0]
    if isinstance(block, DataBlock):
        source = block.source
        kind = source.media_type.split("/", 1)[0]
        kind = kind if kind in _KINDS else "file"
        if isinstance(source, Base64Source):
            src = {"type": "base64", "media_type": source.media_type, "data": source.data}
        else:
            src = {"type": "url", "url": str(source.url), "media_type": source.media_type}
        return {"type": kind, "source": src}
    return {"type": "text", "text": str(getattr(block, "text", block))}


# -- dict → 2.x ------------------------------------------------------------------------


def _block(item: dict[str, Any], before: Block | None) -> Block:
    kind = item.get("type")
    keep: dict[str, Any] = {}
    if before is not None:
        keep = {"id": before.id, "created_at": before.created_at}
    if kind == "tool_use" and isinstance(before, ToolCallBlock):
        raw = item.get("raw_input")
        text = raw if isinstance(raw, str) else json.dumps(item.get("input") or {})
        return before.model_copy(update={"input": text, "name": item.get("name", before.name)})
    if kind == "tool_use":
        raw = item.get("raw_input")
        text = raw if isinstance(raw, str) else json.dumps(item.get("input") or {})
        return ToolCallBlock(id=str(item.get("id")), name=str(item.get("name")), input=text)
    if kind == "tool_result":
        output = item.get("output")
        if not isinstance(output, str):
            old = before.output if isinstance(before, ToolResultBlock) else ""
            old_parts = [] if isinstance(old, str) else old
            output = [
                _media_or_text(part, old_parts[i] if i < len(old_parts) else None)
                for i, part in enumerate(output or [])
            ]
        if isinstance(before, ToolResultBlock):
            return before.model_copy(update={"output": output})
        return ToolResultBlock(
            id=str(item.get("id")),
            name=str(item.get("name")),
            output=output,
            state=ToolResultState("success"),
        )
    if isinstance(before, HintBlock):
        return before.model_copy(update={"hint": _text_of(item)})
    if kind == "thinking":
        keep = keep if isinstance(before, ThinkingBlock) else {}
        extra = {k: v for k, v in item.items() if k not in ("type", "thinking", *keep)}
        return ThinkingBlock(thinking=str(item.get("thinking", "")), **extra, **keep)
    if kind in (*_KINDS, "file"):
        return _media_or_text(item, before)
    keep = keep if isinstance(before, TextBlock) else {}
    return TextBlock(text=_text_of(item), **keep)


def _media_or_text(item: dict[str, Any], before: Block | None) -> TextBlock | DataBlock:
    """A text or media block (of a tool result, or a message), keeping `before`'s id and
    times when it is of the same kind."""
    source = item.get("source")
    if item.get("type") in (*_KINDS, "file") and isinstance(source, dict):
        media_type = str(source.get("media_type") or f"{item['type']}/*")
        if source.get("type") == "base64":
            src: Any = Base64Source(data=source["data"], media_type=media_type)
        else:
            src = URLSource(url=source["url"], media_type=media_type)
        if isinstance(before, DataBlock):
            return before.model_copy(update={"source": src})
        return DataBlock(source=src)
    if isinstance(before, TextBlock):
        return before.model_copy(update={"text": _text_of(item)})
    return TextBlock(text=_text_of(item))


def _text_of(item: dict[str, Any]) -> str:
    text = item.get("text")
    return text if isinstance(text, str) else json.dumps(item, ensure_ascii=False)
