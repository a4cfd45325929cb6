"""How a `ContextMemory` keeps its summary, and a loaded state, in a backend.

A backend is any AgentScope memory (`RedisMemory`, `AsyncSQLAlchemyMemory`, ...). Each can
store messages with marks; few store a summary. So the summary is kept as one message named
`SUMMARY_MSG_NAME` and marked `SUMMARY_MARK`, and readers take the newest such message: a new
summary is written before the old one is removed, and a crash in between leaves two, never
none.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any

from .._entry import Msg

if TYPE_CHECKING:
    from agentscope.memory import MemoryBase

__all__ = [
    "KEPT_METADATA",
    "SHARED_MARKS",
    "SUMMARY_MARK",
    "SUMMARY_MSG_NAME",
    "import_state",
    "read",
    "read_marks",
    "write_summary",
]

logger = logging.getLogger("agentscope_ctx")

SUMMARY_MSG_NAME = "compact_summary"
SUMMARY_MARK = "agentscope_ctx.summary"
"""Mark of the message that carries the summary in a backend."""


KEPT_METADATA = "agentscope_ctx.carried"
"""Key, in the summary message's metadata, of what the summary carries by code (`_kept`)."""


async def read(backend: MemoryBase) -> tuple[list[Msg], str, object]:
    """The backend's messages (the summary left out), its summary ("" if none) and what the
    summary carries by code as data (`None` if nothing: `Kept.from_data` reads it)."""
    messages = await backend.get_memory(exclude_mark=SUMMARY_MARK, prepend_summary=False)
    summaries = await backend.get_memory(mark=SUMMARY_MARK, prepend_summary=False)
    if not summaries:
        return messages, "", None
    metadata = summaries[-1].metadata
    kept = metadata.get(KEPT_METADATA) if isinstance(metadata, dict) else None
    return messages, summaries[-1].get_text_content() or "", kept


SHARED_MARKS = ("hint",)
"""Marks a worker takes from the backend with messages it did not know (`read_marks`): the
hint mark (`_compaction.HINT_MARK`, AgentScope 1.x's `_MemoryMark.HINT`), so that a hint
another worker left (killed before its agent deleted it) is neither taken for the user's
words nor kept for ever (the agent deletes hints by mark)."""


async def read_marks(backend: MemoryBase) -> dict[str, list[str]]:
    """The `SHARED_MARKS` of the backend's messages, by message id."""
    marks: dict[str, list[str]] = {}
    for mark in SHARED_MARKS:
        for msg in await backend.get_memory(mark=mark, prepend_summary=False):
            marks.setdefault(msg.id, []).append(mark)
    return marks


async def write_summary(backend: MemoryBase, summary: str, kept: object = None) -> None:
    """Make `summary` the backend's summary ("": none), with what it carries by code (`kept`,
    `Kept.to_data()`, kept in the message's metadata): the new one first, then the old ones
    removed.

    Raises:
        Exception: whatever the backend raises while writing the new summary (the old one
            is then untouched). A failure to remove the old ones is only logged: the newest
            is the one read, and the next write removes them.
    """
    old = await backend.get_memory(mark=SUMMARY_MARK, prepend_summary=False)
    if summary:
        metadata: dict[str, Any] | None = {KEPT_METADATA: kept} if kept is not None else None
        msg = Msg(SUMMARY_MSG_NAME, summary, "user", metadata=metadata)
        await backend.add(msg, marks=SUMMARY_MARK)
    if not old:
        return
    try:
        await backend.delete([msg.id for msg in old])
    except Exception as exc:
        logger.warning(
            "agentscope_ctx: an older summary stays in the backend (%r); the newest is the "
            "one read, and the next update removes it",
            exc,
        )


async def import_state(
    backend: MemoryBase, content: list[tuple[Msg, list[str]]], summary: str
) -> bool:
    """Write a loaded state's messages (with their marks) to `backend` if it holds no others.

    A backend holding other messages has moved on (e.g. another replica compacted the
    state's messages into `dialog/`) and wins; one holding a part of them saw an earlier
    import cut short, and gets the rest, in order.

    Returns:
        Whether the state's summary should be written too: it has one and the backend none.
    """
    held = await backend.get_memory(exclude_mark=SUMMARY_MARK, prepend_summary=False)
    mine = {msg.id for msg, _ in content}
    if content and all(msg.id in mine for msg in held):
        have = {msg.id for msg in held}
        missing = [(msg, marks) for msg, marks in content if msg.id not in have]
        for marks, group in itertools.groupby(missing, key=lambda item: item[1]):
            await backend.add([msg for msg, _ in group], marks=marks or None)
    if not summary:
        return False
    return not await backend.get_memory(mark=SUMMARY_MARK, prepend_summary=False)
