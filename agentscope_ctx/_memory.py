"""`ContextMemory`: the agent's memory, holding the compact summary and the live messages."""

from __future__ import annotations

from copy import deepcopy
from pathlib import Path
from typing import Any

import shortuuid
from agentscope.memory import MemoryBase
from agentscope.message import Msg

__all__ = ["SUMMARY_MSG_NAME", "ContextMemory"]

SUMMARY_MSG_NAME = "compact_summary"
SUMMARY_MARK = "agentscope_ctx.summary"
"""Mark of the message that carries the summary in a backend (any AgentScope memory can
store a message; few store a summary)."""

_GUIDE = {
    "en": (
        "Older messages of this conversation were moved out of the context. This summary "
        "replaces them. The raw messages are saved, one JSON object per line, in "
        "{dialog_dir}/YYYY-MM-DD.jsonl (one file per day). If you need an exact detail, read "
        "them with `read_file`, starting from the newest file and going backwards."
    ),
    "zh": (
        "本对话较早的消息已移出上下文，由以下摘要代替。原始消息按日期保存在 "
        "{dialog_dir}/YYYY-MM-DD.jsonl（每行一个 JSON 对象）。如需确切细节，请用 `read_file` "
        "从最新的文件开始向前阅读。"
    ),
}


_UNSAVED = {
    "en": " ({n} older messages are not shown and not yet in dialog/: they could not be saved;"
    " they are kept and will be saved when the disk works again.)",
    "zh": "（另有 {n} 条较早的消息暂未显示，也尚未写入 dialog/：保存失败；"
    "它们仍被保留，磁盘恢复后会写入。）",
}


class ContextMemory(MemoryBase):
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
    deterministic), so they are not written back.
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
        self.language = language if language in _GUIDE else "en"
        self.content: list[tuple[Msg, list[str]]] = []
        self.long_term_note: str | None = None
        """Text offered with the summary (set by the manager at the start of a reply)."""
        self.calibration: dict[str, float] = {}
        """Per-model ratio of provider-reported to estimated prompt tokens."""
        self.revision = 0
        self.views: dict[str, Msg] = {}
        """What the model is shown instead of a message, by id: a cut copy of an output that
        could not be saved to disk (the message itself stays whole)."""
        self.hidden: set[str] = set()
        """Ids of messages compacted but not yet saved to `dialog/` (the disk failed): kept
        here, not shown; `pending_summary` stands for them until they can be saved."""
        self.pending_summary: str | None = None
        self._summary_msg: Msg | None = None
        self._summary_key: tuple[str, str | None, int] | None = None
        self.register_state("_compressed_summary")

    # -- the summary -------------------------------------------------------------------

    @property
    def compact_summary(self) -> str:
        """The current summary of the messages that left the context ("" if none)."""
        return self._compressed_summary

    async def update_compressed_summary(self, summary: str) -> None:
        self._compressed_summary = summary
        self.hidden.clear()
        self.pending_summary = None
        self.revision += 1
        if self.backend is not None:
            old = await self.backend.get_memory(mark=SUMMARY_MARK, prepend_summary=False)
            if old:
                await self.backend.delete([msg.id for msg in old])
            if summary:
                await self.backend.add(Msg(SUMMARY_MSG_NAME, summary, "user"), marks=SUMMARY_MARK)

    async def refresh(self) -> bool:
        """Reload the message list (and summary) from the backend; returns whether anything
        changed. Messages known here keep their local (possibly harder-cut) content and
        marks; new ones come with no marks; ones the backend no longer has are dropped."""
        if self.backend is None:
            return False
        shared = await self.backend.get_memory(exclude_mark=SUMMARY_MARK, prepend_summary=False)
        summaries = await self.backend.get_memory(mark=SUMMARY_MARK, prepend_summary=False)
        local = {msg.id: (msg, marks) for msg, marks in self.content}
        content = [local.get(msg.id, (msg, [])) for msg in shared]
        summary = (summaries[-1].get_text_content() or "") if summaries else ""
        changed = [m.id for m, _ in content] != [m.id for m, _ in self.content] or (
            summary != self._compressed_summary
        )
        if changed:
            self.content = content
            self._compressed_summary = summary
            self.revision += 1
        return changed

    def summary_message(self) -> Msg | None:
        """The first message the model sees, or `None` when there is nothing to present.

        The same `Msg` object (same id) is returned while the text is unchanged, so that
        token counts are cached."""
        summary = self.pending_summary if self.hidden else self._compressed_summary
        key = (summary or "", self.long_term_note, len(self.hidden))
        if key == self._summary_key:
            return self._summary_msg
        parts = []
        if self.long_term_note:
            parts.append(f"<long_term_memory>\n{self.long_term_note}\n</long_term_memory>")
        if summary:
            guide = _GUIDE[self.language].format(dialog_dir=self.working_dir / "dialog")
            if self.hidden:
                guide += _UNSAVED[self.language].format(n=len(self.hidden))
            parts.append(f"<compact_summary>\n{guide}\n\n{summary}\n</compact_summary>")
        self._summary_key = key
        self._summary_msg = Msg(SUMMARY_MSG_NAME, "\n\n".join(parts), "user") if parts else None
        return self._summary_msg

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
        known = {msg.id for msg, _ in self.content}
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
        msgs = stored
        if self.backend is not None and msgs:
            await self.backend.add(msgs, marks=mark_list or None)

    async def delete(self, msg_ids: list[str], **kwargs: Any) -> int:
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
        if self.backend is not None:
            await self.backend.clear()

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

    # -- used by the pipeline ----------------------------------------------------------

    def messages(self) -> list[Msg]:
        """The live messages (the stored objects themselves, in order)."""
        return [msg for msg, _ in self.content]

    def replace_content(self, msg_id: str, content: Any) -> None:
        """Replace the content of one stored message (a harder truncation of its output).

        Not counted as a revision: the pipeline, its only caller, accounts for it itself."""
        for msg, _ in self.content:
            if msg.id == msg_id:
                msg.content = content
                self.views.pop(msg_id, None)
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

    # -- state -------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "content": [[msg.to_dict(), list(marks)] for msg, marks in self.content],
            "calibration": dict(self.calibration),
        }

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        if strict and "content" not in state_dict:
            raise KeyError("the state_dict of a ContextMemory needs a 'content' key")
        self._compressed_summary = state_dict.get("_compressed_summary", "")
        content: list[tuple[Msg, list[str]]] = []
        for item in state_dict.get("content", []):
            if isinstance(item, dict):  # an InMemoryMemory state of an older version
                content.append((Msg.from_dict(item), []))
            elif isinstance(item, (list, tuple)) and len(item) == 2:
                content.append((Msg.from_dict(item[0]), list(item[1])))
            else:
                raise ValueError(f"invalid memory item in state_dict: {item!r:.200}")
        self.content = content
        self.views.clear()
        self.hidden.clear()
        self.pending_summary = None
        self.calibration = {
            str(k): float(v) for k, v in dict(state_dict.get("calibration", {})).items()
        }
        self.revision += 1


def _marks(marks: str | list[str] | None) -> list[str]:
    if marks is None:
        return []
    if isinstance(marks, str):
        return [marks]
    if isinstance(marks, list) and all(isinstance(m, str) for m in marks):
        return list(marks)
    raise TypeError(f"marks must be a string, a list of strings or None; got {marks!r}")
