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

from .._entry import Msg

__all__ = ["PIN_MARK", "is_pinned", "protected", "units"]

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
    (transitively: a reply of parallel calls comes with all their results; see `units`), as
    long as the protected messages hold at most `max_tokens` (raw estimate) together.
    Linear in the messages and their blocks: the units are found once, not again for each pin
    (issue 29 item 6: pins sharing one call id made each run cubic).
    """
    unit_of = units(msgs)
    members: dict[str, set[str]] = {}
    costs: dict[str, int] = {}
    for msg_id, unit in unit_of.items():
        members.setdefault(unit, set()).add(msg_id)
        costs[unit] = costs.get(unit, 0) + counts.get(msg_id, 0)
    kept: set[str] = set()
    taken: set[str] = set()
    used = 0
    dropped = 0
    for msg in reversed(msgs):
        if not is_pinned(msg):
            continue
        unit = unit_of[str(msg.id)]
        if unit in taken:
            continue
        cost = costs[unit]
        if used + cost > max_tokens:
            dropped += 1
            continue
        taken.add(unit)
        kept.update(members[unit])
        used += cost
    return kept, dropped


def units(msgs: Sequence[Msg]) -> dict[str, str]:
    """Each message's unit, by message id: messages that share a tool call id (a call and its
    results, and transitively the other calls of those messages) are one unit, named by one of
    its message ids. Union-find over the ids: near-linear in the messages and their blocks."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]  # path halving
            x = parent[x]
        return x

    first: dict[str, str] = {}  # call id -> the first message id that holds it
    for msg in msgs:
        msg_id = str(msg.id)
        parent.setdefault(msg_id, msg_id)
        for call_id in _ids(msg):
            other = first.setdefault(call_id, msg_id)
            a, b = root(msg_id), root(other)
            if a != b:
                parent[a] = b
    return {msg_id: root(msg_id) for msg_id in parent}
