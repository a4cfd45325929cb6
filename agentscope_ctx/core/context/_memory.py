"""`ContextMemory`: the agent's memory, holding the compact summary and the live messages."""

from __future__ import annotations

from copy import deepcopy
from pathlib import Path
from typing import Any

import shortuuid

from .._entry import Msg
from .._failures import FailureLog
from ..summary._kept import KEPT_KEY, Kept
from ..summary._summary_text import LANGUAGES
from ..tokens._calibration_state import checked_calibration
from ._memory_backend import (
    SUMMARY_MARK,
    SUMMARY_MSG_NAME,
    import_state,
    read,
    read_marks,
    write_summary,
)
from ._memory_base import MemoryBase
from ._memory_summary import SummaryViews
from ._memory_views import MemoryViews

__all__ = ["SUMMARY_MARK", "SUMMARY_MSG_NAME", "ContextMemory"]


class ContextMemory(MemoryViews, SummaryViews, MemoryBase):
    """A `MemoryBase` whose `get_memory` presents the compact summary (and the long-term
    memory note, if any) as the first message, followed by the live messages.

    Besides the `MemoryBase` API it keeps a `revision` number, bumped by every change other
    than an append, so that the pipeline can work incrementally: while the revision stays,
    the first `size` messages it has seen are unchanged.

    With a `backend` (any AgentScope memory, e.g. `RedisMemory`), every add, delete, mark
    change and summary update is written through to it, and `refresh()` (run by the manager
    at the start of each reply) reloads the message list from it: replicas that serve the
    same session one reply at a time share its history. The backend holds each message as it
    entered the context; the harder cuts of old tool output are made again locally (they are
    deterministic), so they are not written back. The summary is a marked message (see
    `_memory_backend`). A summary the backend refused (e.g. "database is locked") leaves the
    old one there, stays the local summary (the messages it replaces are already gone), and
    is written again at the next update or refresh.

    With a backend, the session state (`state_dict`) holds the summary but not the messages:
    the backend has them. A loaded state is reconciled with the backend at the next refresh
    or write: the backend wins, but loses nothing of the state. Its messages (a state saved
    by an older version, or without a backend) are written to the backend if it holds no
    others (one that does has moved on: e.g. another replica compacted them into `dialog/`),
    and its summary if the backend holds none.
    """

    def __init__(
        self,
        working_dir: Path | str = ".",
        *,
        language: str = "en",
        backend: MemoryBase | None = None,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.working_dir = Path(working_dir)
        self.language = language if language in LANGUAGES else "en"
        self.content: list[tuple[Msg, list[str]]] = []
        self.long_term_note: str | None = None
        """Text offered with the summary (set by the manager at the start of a reply)."""
        self.dialog_days: str | None = None
        """How the summary's guide names the dialog's days when they are not the files
        ``working_dir/dialog/YYYY-MM-DD.jsonl`` (the fleet store: ``pg-dialog:YYYY-MM-DD``);
        set by the manager."""
        self.calibration: dict[str, float] = {}
        """Per-model ratio of provider-reported to estimated prompt tokens."""
        self.kept: Kept | None = None
        """What the summary carries by code (the carried block's state, the eviction index's
        entries), as data: the next compaction starts from it (`_kept`)."""
        self.revision = 0
        self._ids: tuple[object, int, int, set[str]] | None = None
        """`add`'s ids of the live messages, with the list, length and revision they are of."""
        self.edited: set[str] | None = None
        """Ids of the messages whose content `replace_content` changed, when an adapter keeps
        them (it sets a set and empties it): the 2.x mirror writes back only those."""
        self.views: dict[str, Msg] = {}
        """What the model is shown instead of a message, by id: a cut copy of an output that
        could not be saved to disk (the message itself stays whole)."""
        self.hidden: set[str] = set()
        """Ids of messages compacted but not yet saved to `dialog/` (the disk failed): kept
        here, not shown; `pending_summary` stands for them until they can be saved."""
        self.pending_summary: str | None = None
        self.failures = FailureLog()
        self._unwritten_summary: str | None = None
        """A summary the backend refused: written again at the next update or refresh."""
        self._loaded: tuple[list[tuple[Msg, list[str]]], str] | None = None
        """Messages and summary of a loaded state, to write to the backend (see the class)."""
        self._summary_msg: Msg | None = None
        self._summary_key: tuple[object, ...] | None = None
        self._summary_trim: tuple[str, str | None, str | None, bool, bool] | None = None
        """The last-resort cut of the summary message (`trim_summary`): the summary and note
        it was made for, the summary shown, whether the note is shown, and whether what is
        shown stands for the whole message (`bare`)."""
        self.register_state("_compressed_summary")

    # -- the summary -------------------------------------------------------------------

    @property
    def compact_summary(self) -> str:
        """The current summary of the messages that left the context ("" if none)."""
        return self._compressed_summary

    async def update_compressed_summary(self, summary: str, *, kept: Kept | None = None) -> None:
        """Set the summary ("": none) and what it carries by code (`kept`: none for a summary
        written by anyone but the compaction). With a backend it is written through; a
        failed write is logged and retried (see the class), never raised."""
        self._compressed_summary = summary
        self.kept = kept
        self.hidden.clear()
        self.pending_summary = None
        self.revision += 1
        if self.backend is not None:
            self._unwritten_summary = summary
            try:
                await self._sync_backend()
            except Exception as exc:  # writing a loaded state failed: retried, as the summary
                self.failures.failed(
                    "the backend", f"could not write a loaded state to the backend ({exc!r})"
                )

    async def refresh(self) -> bool:
        """Reload the message list (and summary) from the backend; returns whether anything
        changed. Messages known here keep their local (possibly harder-cut) content and
        marks; new ones come with their `SHARED_MARKS` (a hint's) only; ones the backend no
        longer has are dropped.
        What the backend still lacks (an unwritten summary, a loaded state) is written first;
        an unwritten summary that still cannot be written stays the local one."""
        if self.backend is None:
            return False
        await self._sync_backend()
        shared, summary, kept = await read(self.backend)
        shared_marks = await read_marks(self.backend)
        local = {msg.id: (msg, marks) for msg, marks in self.content}
        content = [local.get(msg.id, (msg, shared_marks.get(msg.id, []))) for msg in shared]
        if self._unwritten_summary is not None:
            summary = self._compressed_summary
        changed = [m.id for m, _ in content] != [m.id for m, _ in self.content] or (
            summary != self._compressed_summary
        )
        if changed:
            if summary != self._compressed_summary:
                self.kept = Kept.from_data(kept)
            self.content = content
            self._compressed_summary = summary
            self.revision += 1
        return changed

    async def _sync_backend(self) -> None:
        """Write to the backend what it lacks: a loaded state (raises if that fails, kept for
        a retry), then an unwritten summary (a failure is logged, kept for a retry)."""
        if self.backend is None:
            return
        if self._loaded is not None:
            wanted = await import_state(self.backend, *self._loaded)
            if wanted and self._unwritten_summary is None:  # (an update since load wins)
                self._unwritten_summary = self._loaded[1]
            self._loaded = None
        if self._unwritten_summary is None:
            return
        try:
            kept = self.kept if self._unwritten_summary == self._compressed_summary else None
            await write_summary(
                self.backend, self._unwritten_summary, None if kept is None else kept.to_data()
            )
        except Exception as exc:
            self.failures.failed(
                "the backend",
                f"could not write the summary to the backend ({exc!r}); it keeps the previous "
                "one until the next update or refresh writes this one",
            )
            return
        self._unwritten_summary = None
        self.failures.recovered("the backend")

    def adopt(self, content: list[tuple[Msg, list[str]]], summary: str) -> None:
        """Take over the messages (with their marks) and the summary of the memory this one
        replaces (`ContextManager.attach`). What the summary carried by code stays only when
        the summary does (the caller sets `kept` otherwise)."""
        if summary != self._compressed_summary:
            self.kept = None
        self.content = [(msg, list(marks)) for msg, marks in content]
        self._compressed_summary = summary
        self.revision += 1

    # -- MemoryBase --------------------------------------------------------------------

    async def add(
        self,
        memories: Msg | list[Msg] | None,
        marks: str | list[str] | None = None,
        allow_duplicates: bool = False,
        **kwargs: Any,
    ) -> None:
        if memories is None:
            return
        msgs = [memories] if isinstance(memories, Msg) else list(memories)
        if not all(isinstance(msg, Msg) for msg in msgs):
            raise TypeError(f"memories must be Msg objects; got {[type(m) for m in msgs]}")
        mark_list = _marks(marks)
        await self._sync_backend()
        known = self._live_ids()
        if not allow_duplicates:
            msgs = [msg for msg in msgs if msg.id not in known]
        stored = []
        for msg in msgs:
            copy = deepcopy(msg)
            # Every message needs its own id: the dialog store and removal after compaction
            # go by id, and two messages sharing one would lose one of them.
            if not isinstance(copy.id, str) or not copy.id or copy.id in known:
                copy.id = shortuuid.uuid()
            known.add(copy.id)
            stored.append(copy)
            self.content.append((copy, list(mark_list)))
        self._ids = (self.content, len(self.content), self.revision, known)
        msgs = stored
        if self.backend is not None and msgs:
            await self.backend.add(msgs, marks=mark_list or None)

    def _live_ids(self) -> set[str]:
        """The ids of the live messages: kept from the last `add` while the list is the same
        one with as many messages and no new revision (a step adds, it does not pass over
        the history), else gathered again."""
        content, ids = self.content, self._ids
        if ids is None or ids[0] is not content or ids[1:3] != (len(content), self.revision):
            return {msg.id for msg, _ in content}
        return ids[3]

    async def delete(self, msg_ids: list[str], **kwargs: Any) -> int:
        await self._sync_backend()
        doomed = set(msg_ids)
        before = len(self.content)
        self.content = [(msg, marks) for msg, marks in self.content if msg.id not in doomed]
        removed = before - len(self.content)
        if removed:
            self.revision += 1
            self.hidden -= doomed
            for msg_id in doomed:
                self.views.pop(msg_id, None)
        if self.backend is not None and doomed:
            await self.backend.delete(list(doomed))
        return removed

    async def delete_by_mark(self, mark: str | list[str], *args: Any, **kwargs: Any) -> int:
        doomed = set(_marks(mark))
        removed_ids = [m.id for m, marks in self.content if doomed & set(marks)]
        if removed_ids:
            await self.delete(removed_ids)
        return len(removed_ids)

    async def size(self) -> int:
        return len(self.content)

    async def clear(self) -> None:
        self.content.clear()
        self.views.clear()
        self.hidden.clear()
        self.revision += 1
        self._loaded = None
        if self.backend is not None:
            await self.backend.clear()
            if self._compressed_summary:  # as in `InMemoryMemory`, clearing keeps the summary
                self._unwritten_summary = self._compressed_summary
                await self._sync_backend()

    async def get_memory(
        self,
        mark: str | None = None,
        exclude_mark: str | None = None,
        prepend_summary: bool = True,
        **kwargs: Any,
    ) -> list[Msg]:
        if mark is not None and not isinstance(mark, str):
            raise TypeError(f"mark must be a string or None; got {type(mark).__name__}")
        if exclude_mark is not None and not isinstance(exclude_mark, str):
            raise TypeError(
                f"exclude_mark must be a string or None; got {type(exclude_mark).__name__}"
            )
        msgs = [
            self.views.get(msg.id, msg)
            for msg, marks in self.content
            if (mark is None or mark in marks)
            and (exclude_mark is None or exclude_mark not in marks)
            and msg.id not in self.hidden
        ]
        summary = self.summary_message() if prepend_summary else None
        return [summary, *msgs] if summary is not None else msgs

    async def update_messages_mark(
        self,
        new_mark: str | None,
        old_mark: str | None = None,
        msg_ids: list[str] | None = None,
    ) -> int:
        await self._sync_backend()
        wanted = None if msg_ids is None else set(msg_ids)
        updated = 0
        for msg, marks in self.content:
            if wanted is not None and msg.id not in wanted:
                continue
            if old_mark is not None and old_mark not in marks:
                continue
            if new_mark is None:
                if old_mark in marks:
                    marks.remove(old_mark)
                    updated += 1
                continue
            if old_mark is not None:
                marks.remove(old_mark)
            if new_mark not in marks:
                marks.append(new_mark)
                updated += 1
        if self.backend is not None and updated:
            await self.backend.update_messages_mark(new_mark, old_mark=old_mark, msg_ids=msg_ids)
        return updated

    # -- state -------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The summary, the messages unless a backend holds them, and the calibration
        unless it is empty: without a backend and calibration, the state of an AgentScope
        `InMemoryMemory`; with a backend and none, that of an `AsyncSQLAlchemyMemory`."""
        state: dict[str, Any] = super().state_dict()
        state.pop("backend", None)  # a store, not state (AgentScope saves sub-modules' state)
        if self.backend is None:
            state["content"] = [[msg.to_dict(), list(marks)] for msg, marks in self.content]
        if self.calibration:
            state["calibration"] = dict(self.calibration)
        if self.kept is not None:
            state[KEPT_KEY] = self.kept.to_data()
        return state

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        """Load a state. Without a backend, `strict` requires its messages (`content`); with
        one, they are optional, and are written to the backend as the class says. A state
        without what its summary carried by code as data (saved by an older version) carries
        nothing by code: its whole summary is the writer's (see `_kept`)."""
        if strict and self.backend is None and "content" not in state_dict:
            raise KeyError("the state_dict of a ContextMemory needs a 'content' key")
        self._compressed_summary = state_dict.get("_compressed_summary", "")
        self.kept = Kept.from_data(state_dict.get(KEPT_KEY))
        content: list[tuple[Msg, list[str]]] = []
        for item in state_dict.get("content", []):
            if isinstance(item, dict):  # an InMemoryMemory state of an older version
                content.append((Msg.from_dict(item), []))
            elif isinstance(item, (list, tuple)) and len(item) == 2:
                content.append((Msg.from_dict(item[0]), list(item[1])))
            else:
                raise ValueError(f"invalid memory item in state_dict: {item!r:.200}")
        if self.backend is None or "content" in state_dict:
            self.content = content
        self._unwritten_summary = None
        if self.backend is not None:
            self._loaded = (content, self._compressed_summary)
        self.views.clear()
        self.hidden.clear()
        self.pending_summary = None
        self.calibration = checked_calibration(state_dict.get("calibration"), owner="a memory")
        self.revision += 1


def _marks(marks: str | list[str] | None) -> list[str]:
    if marks is None:
        return []
    if isinstance(marks, str):
        return [marks]
    if isinstance(marks, list) and all(isinstance(m, str) for m in marks):
        return list(marks)
    raise TypeError(f"marks must be a string, a list of strings or None; got {marks!r}")
