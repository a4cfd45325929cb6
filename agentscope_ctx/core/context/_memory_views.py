"""`MemoryViews`: what the pipeline does to `ContextMemory`'s messages besides the `MemoryBase`
API: pins, harder cuts in place, views shown instead of a message, messages hidden until saved.
A part of `ContextMemory` (its first base), kept apart to keep each module to one job."""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from .._entry import Msg
from ._pins import PIN_MARK

__all__ = ["MemoryViews"]


class MemoryViews:
    """The pipeline's methods of `ContextMemory` (whose `__init__` sets these attributes)."""

    content: list[tuple[Msg, list[str]]]
    views: dict[str, Msg]
    hidden: set[str]
    pending_summary: str | None
    revision: int
    edited: set[str] | None

    def messages(self) -> list[Msg]:
        """The live messages (the stored objects themselves, in order)."""
        return [msg for msg, _ in self.content]

    def pin(self, msg_id: str, pinned: bool = True) -> int:
        """Set (or clear) the pin mark in the metadata of message `msg_id` (on 2.x, of every
        entry made from the 2.x message `msg_id`); returns how many messages carry it now
        (0: no such message)."""
        found = 0
        for msg, _ in self.content:
            if msg.id != msg_id and not str(msg.id).startswith(f"{msg_id}/"):
                continue
            metadata = dict(msg.metadata or {})
            if pinned:
                metadata[PIN_MARK] = True
            else:
                metadata.pop(PIN_MARK, None)
            msg.metadata = metadata
            found += 1
        return found

    def replace_content(self, msg_id: str, content: Any) -> None:
        """Replace the content of one stored message (a harder truncation of its output).

        Not counted as a revision: the pipeline, its only caller, accounts for it itself.
        Noted in `edited` when that is kept. Looked up from the newest (the usual case)."""
        for msg, _ in reversed(self.content):
            if msg.id == msg_id:
                msg.content = content
                self.views.pop(msg_id, None)
                if self.edited is not None:
                    self.edited.add(msg_id)
                return
        raise KeyError(msg_id)

    def show(self, msg: Msg, content: Any) -> Msg:
        """Show the model `content` instead of `msg`'s own (which stays whole)."""
        view = deepcopy(msg)
        view.content = content
        self.views[msg.id] = view
        return view

    def shown(self, msg: Msg) -> Msg:
        """What the model is shown for `msg`."""
        return self.views.get(msg.id, msg)

    def hide(self, msg_ids: list[str], summary: str) -> None:
        """Stop showing messages that were compacted but could not be saved; `summary`
        stands for them until a later compaction saves and removes them."""
        self.hidden = set(msg_ids)
        self.pending_summary = summary
        self.revision += 1
