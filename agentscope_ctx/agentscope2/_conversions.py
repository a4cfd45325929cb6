"""`Conversions`: the entries each 2.x message of an agent's state was cut into, kept so that
a message is converted again only when it changed, and the 2.x message rebuilt from entries
the core changed (the table behind `StateMirror`; the cutting itself is `_entries`).

A 2.x agent keeps an unchanged message as the same object and grows only its live reply, by
appended blocks; so a message is known by its object and its block count, and a grown reply
is converted from the first block of its last entry on (that entry may have grown: a run of
text and tool calls), not from its start.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from agentscope.message import Msg

from ..core.context._memory import ContextMemory
from ._entries import Entry, Origin, to_blocks, to_entries

__all__ = ["Conversions", "Pairs"]

Pairs = list[tuple[Entry, Origin]]
"""A message's entries, each with its origin, in order."""


class Conversions:
    """By 2.x message id, the message object, its block count and its entries; by entry id,
    the entry's origin (its message's id and the blocks it was made of)."""

    def __init__(self) -> None:
        self.by_msg: dict[str, tuple[Msg, int, Pairs]] = {}
        self.origin: dict[str, Origin] = {}

    def convert(self, msg: Msg) -> tuple[Pairs, int, Pairs]:
        """`msg`'s entries (recorded), the index from which they are newly converted, and the
        entries known before from that index on (what the new ones replace)."""
        known = self.by_msg.get(msg.id)
        size = len(msg.content)
        if known is not None and known[0] is msg and known[1] == size:
            return known[2], len(known[2]), []
        if (
            known is not None
            and known[0] is msg
            and 0 < known[1] < size
            and msg.role == "assistant"
            and known[2]
        ):  # grown by appended blocks (the live reply): convert from its last entry on
            pairs = known[2]
            first = len(pairs) - 1
            replaced = pairs[first:]
            fresh = to_entries(msg, known[1] - len(replaced[0][1][1]))
            pairs[first:] = fresh
        else:
            first, replaced = 0, [] if known is None else known[2]
            pairs = fresh = to_entries(msg)
        for entry, origin in fresh:
            self.origin[entry.id] = origin
        self.by_msg[msg.id] = (msg, size, pairs)
        return pairs, first, replaced

    def keep_only(self, context: Sequence[Msg]) -> None:
        """Forget the messages no longer in `context` (and their entries' origins)."""
        live = {msg.id for msg in context}
        for msg_id in [i for i in self.by_msg if i not in live]:
            for entry, _ in self.by_msg.pop(msg_id)[2]:
                self.origin.pop(entry.id, None)

    def forget(self, msg_id: str) -> None:
        """Convert message `msg_id` afresh next time."""
        self.by_msg.pop(msg_id, None)

    def message(self, msg_id: str, entries: list[Entry]) -> tuple[Msg, Pairs | None]:
        """The 2.x message for `entries` (all from message `msg_id`): the known object when
        none of them changed, else a copy with its blocks rebuilt (each keeps its id), with
        its entries (`None`: the known object)."""
        msg, _, pairs = self.by_msg[msg_id]
        if [e.id for e in entries] == [e.id for e, _ in pairs] and all(
            e.content == p.content for e, (p, _) in zip(entries, pairs, strict=True)
        ):
            return msg, None
        blocks: list[Any] = []
        for entry in entries:
            blocks.extend(to_blocks(entry.content, self.origin[entry.id][1]))
        rebuilt = msg.model_copy(update={"content": blocks})
        fresh = to_entries(rebuilt)
        for entry, origin in fresh:
            self.origin[entry.id] = origin
        self.by_msg[msg_id] = (rebuilt, len(blocks), fresh)
        return rebuilt, fresh

    def groups(self, entries: Sequence[Entry]) -> Iterator[tuple[str, list[Entry]]]:
        """`entries` grouped by the 2.x message they came from."""
        for msg_id, group in itertools.groupby(entries, key=lambda e: self.origin[e.id][0]):
            yield msg_id, list(group)

    def shown(self, memory: ContextMemory, messages: list[Msg]) -> list[Msg]:
        """`messages` (a model call's) with `memory`'s views applied and its hidden entries
        left out (cheap when there are none: the usual case)."""
        if not memory.views and not memory.hidden:
            return messages
        by_msg = {msg_id: group for msg_id, group in self.groups(memory.messages())}
        out = []
        for msg in messages:
            group = by_msg.get(msg.id)
            if group is None or not any(
                e.id in memory.views or e.id in memory.hidden for e in group
            ):
                out.append(msg)
                continue
            blocks: list[Any] = []
            for entry in group:
                if entry.id not in memory.hidden:
                    view = memory.shown(entry)
                    blocks.extend(to_blocks(view.content, self.origin[entry.id][1]))
            if blocks:
                out.append(msg.model_copy(update={"content": blocks}))
        return out
