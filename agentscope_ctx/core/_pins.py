"""Pinned messages (DESIGN.md §13): never masked, cut harder or compacted.

A message is pinned by the metadata mark ``{"agentscope_ctx.pinned": True}`` (set it when
the message is made, on either AgentScope line, or later with `ContextManager.pin`). Its tool
calls and their results are kept together: pinning one of them pins the pair, so that a
compaction never separates a `tool_use` from its `tool_result`.

Pins have a bounded share of the budget (`ContextConfig.pin_max_share`): the newest pins are
protected as long as together they hold at most that share; past it, the oldest pins are
treated as unpinned (masked and compacted like any other message, so the prompt holds its
budget), and the pipeline says so once per run that had to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._entry import Msg

__all__ = ["PIN_MARK", "is_pinned", "protected"]

PIN_MARK = "agentscope_ctx.pinned"
"""The metadata key whose true value pins a message."""


def is_pinned(msg: Msg) -> bool:
    """Whether `msg` carries the pin mark."""
    metadata = msg.metadata
    return isinstance(metadata, Mapping) and bool(metadata.get(PIN_MARK))


def _ids(msg: Msg) -> set[str]:
    content = msg.content
    blocks: Sequence[Any] = content if isinstance(content, (list, tuple)) else []
    return {
        str(b.get("id"))
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") in ("tool_use", "tool_result")
    }


def protected(
    msgs: Sequence[Msg], counts: Mapping[str, int], max_tokens: int
) -> tuple[set[str], int]:
    """The ids of the messages the pins protect, and how many pins were left unprotected.

    Pins are taken newest first, each with the messages that share a tool call with it
    (transitively: a reply of parallel calls comes with all their results), as
    long as the protected messages hold at most `max_tokens` (raw estimate) together.
    """
    by_call: dict[str, list[Msg]] = {}
    for msg in msgs:
        for call_id in _ids(msg):
            by_call.setdefault(call_id, []).append(msg)
    kept: set[str] = set()
    used = 0
    dropped = 0
    for msg in reversed(msgs):
        if not is_pinned(msg) or msg.id in kept:
            continue
        group = {msg.id: msg}
        todo = [msg]
        while todo:  # the whole unit: a call with all its results, and their other calls
            for call_id in _ids(todo.pop()):
                for other in by_call.get(call_id, []):
                    if other.id not in group:
                        group[other.id] = other
                        todo.append(other)
        cost = sum(counts.get(m_id, 0) for m_id in group if m_id not in kept)
        if used + cost > max_tokens:
            dropped += 1
            continue
        kept.update(group)
        used += cost
    return kept, dropped
