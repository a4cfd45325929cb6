"""The summary message within the budget, the last steps of rung (d) (`Ladder.fit`):
`fit_summary` trims it (the long-term note left out, then the summary cut to a head and a
notice, down to a notice alone), `drop_summary` takes it out of view when that alone is
enough; `cap_summary` holds it to its share of the budget after a compaction
(`ContextConfig.summary_max_share`). What is stored never changes: the next compaction
still gets the whole summary."""

from __future__ import annotations

import math

from ..context._memory import ContextMemory
from ..truncation._offload import clean_text
from ..truncation._truncation import utf8_len
from ._accountant import Accountant
from ._cuts import _MASK_BYTES, Cutter

__all__ = ["cap_summary", "drop_summary", "fit_summary"]

_NOTICE_TOKENS = 120
"""About what a notice adds to an excerpt, in tokens (the path and the read_file hint)."""


async def fit_summary(
    memory: ContextMemory, accountant: Accountant, cutter: Cutter, target: int
) -> int:
    """The summary message within `target`, as far as it can go: the long-term note
    left out (MEMORY.md is on disk; a line says where), then the summary cut to a head
    and a notice, its whole text saved to `tool_result/` first (the notice points there,
    `read_file` reads on), down to the notice alone; last, the whole message (the
    pointer to MEMORY.md and the guide to `dialog/` with it) saved and shown as a notice
    alone (issue 19: the guide and the pointer took ~130 tokens, too many at a
    1,000-token budget). What is stored does not change: the next compaction still gets
    the whole summary. Returns 1 if anything was cut."""
    if memory.summary_message() is None:
        return 0
    if await accountant.calibrated() <= target:
        return 0
    memory.trim_summary(None, note=False)
    summary = clean_text(memory.summary_text())  # measured and saved as valid UTF-8
    shown, limit = summary, utf8_len(summary)
    while limit > _MASK_BYTES and (over := await accountant.calibrated() - target) > 0:
        tokens = max(await accountant.counter.count_text(shown), 1)
        excess = math.ceil(over / accountant.calibration.scale) + _NOTICE_TOKENS
        wanted = int(utf8_len(shown) * (tokens - excess) / tokens)
        limit = max(min(wanted, limit if shown is summary else limit * 3 // 4), _MASK_BYTES)
        _, cut = await cutter.text(summary, limit, short=True)
        if cut == shown:
            break
        shown = cut
        memory.trim_summary(shown, note=False)
    if await accountant.calibrated() > target:
        before = await accountant.summary_tokens()
        whole = memory.whole_summary_message()
        _, bare = await cutter.text("" if whole is None else whole.content, _MASK_BYTES, short=True)
        memory.trim_summary(bare, note=True, bare=True)
        if await accountant.summary_tokens() >= before:  # never larger
            memory.trim_summary(shown if shown != summary else None, note=False)
    return 1


async def drop_summary(memory: ContextMemory, accountant: Accountant, target: int) -> int:
    """The summary message out of view, when that alone brings the prompt within
    `target` (after `fit`): the summary and the long-term memory stay stored, and the
    next compaction shows a new summary. Returns 1 if it was dropped."""
    shown = await accountant.summary_tokens()
    if not shown:
        return 0
    scale = accountant.calibration.scale
    if math.ceil((await accountant.prompt_tokens() - shown) * scale) > target:
        return 0
    memory.trim_summary("", note=False, bare=True)
    return 1


async def cap_summary(
    memory: ContextMemory, accountant: Accountant, cutter: Cutter, cap: int
) -> int:
    """The summary message as shown within `cap` tokens (calibrated), after a compaction
    (`ContextConfig.summary_max_share`), as far as the writer's text can give: that text is
    cut to a head and a notice, its whole saved first (the notice points there, `read_file`
    reads on); what code carried (the user's words, the artifact trail) and the eviction
    index stay whole. What is stored does not change. Returns 1 if anything was cut."""
    kept, summary = memory.kept, memory.summary_text()
    writer = None if kept is None else kept.writer(summary)
    if kept is None or not writer:
        return 0
    scale = accountant.calibration.scale
    shown, limit, changed = writer, utf8_len(writer), 0
    while limit > _MASK_BYTES:
        over = math.ceil(await accountant.summary_tokens() * scale) - cap
        if over <= 0:
            break
        tokens = max(await accountant.counter.count_text(shown), 1)
        excess = math.ceil(over / scale) + _NOTICE_TOKENS
        wanted = int(utf8_len(shown) * (tokens - excess) / tokens)
        limit = max(min(wanted, limit if shown is writer else limit * 3 // 4), _MASK_BYTES)
        _, cut = await cutter.text(writer, limit, short=True)
        if cut == shown:
            break
        shown, changed = cut, 1
        memory.trim_summary(shown + kept.tail, note=True)
    return changed
