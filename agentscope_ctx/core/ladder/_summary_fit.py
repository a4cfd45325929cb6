"""The summary message within the budget, the last steps of rung (d) (`Ladder.fit`):
`fit_summary` trims it (the long-term note left out, then the summary cut to a head and a
notice, down to a notice alone), `drop_summary` takes it out of view when that alone is
enough; `cap_writer` holds it to its share of the budget after a compaction
(`ContextConfig.summary_max_share`, the cut kept with the summary in `Kept.shown`). What is
stored never changes: the next compaction still gets the whole summary.

Each cut saves the whole text once (its further tries point at the same file), and a cut's
byte limit holds its notice (nothing is added for it: counted twice, the head was cut some
120 tokens shorter than the budget needed); a cut in proportion that took too much is
widened again to the longest that fits (`_widen`). The file is recorded as a summary's saved
text, not a tool's output (`search._saved_summary.SAVED_SUMMARY`)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import replace

from ..context._memory import ContextMemory
from ..search._saved_summary import SAVED_SUMMARY
from ..summary._kept import Kept
from ..tokens._tokens import TokenCounter
from ..truncation._offload import clean_text
from ..truncation._truncation import excerpt_with_notice, parse_notice, utf8_len
from ._accountant import Accountant
from ._cuts import _MASK_BYTES, Cutter

__all__ = ["cap_writer", "drop_summary", "fit_summary"]

_WIDEN_BYTES = 64
"""A cut is widened until it is within this many bytes of the longest that fits (`_widen`)."""


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
    shown, limit, path = summary, utf8_len(summary), ""
    above = limit  # (the limit of a cut known not to fit)
    while limit > _MASK_BYTES and (over := await accountant.calibrated() - target) > 0:
        above = limit
        tokens = max(await accountant.counter.count_text(shown), 1)
        excess = math.ceil(over / accountant.calibration.scale)  # (`limit` holds the notice)
        wanted = int(utf8_len(shown) * (tokens - excess) / tokens)  # (in proportion)
        limit = max(min(wanted, limit if shown is summary else limit - 1), _MASK_BYTES)
        if path:  # saved once: the next cuts point at the same file
            cut = excerpt_with_notice(summary, max_bytes=limit, file_path=path)
        else:
            _, cut = await cutter.text(summary, limit, short=True)
            path = await _saved(cutter, cut)
        if cut == shown:
            break
        shown = cut
        memory.trim_summary(shown, note=False)
    if path and shown is not summary and await accountant.calibrated() <= target:

        async def fits(cut: str) -> bool:
            memory.trim_summary(cut, note=False)
            return await accountant.calibrated() <= target

        shown = await _widen(summary, path, limit, above, fits) or shown
        memory.trim_summary(shown, note=False)
    if await accountant.calibrated() > target:
        before = await accountant.summary_tokens()
        whole = memory.whole_summary_message()
        _, bare = await cutter.text("" if whole is None else whole.content, _MASK_BYTES, short=True)
        await _saved(cutter, bare)
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


async def cap_writer(
    memory: ContextMemory,
    counter: TokenCounter,
    cutter: Cutter,
    summary: str,
    kept: Kept,
    cap: int,
    scale: float,
) -> Kept:
    """`kept` with the writer's text of `summary` cut so that the summary message (without
    the long-term note) takes at most `cap` tokens (calibrated by `scale`), after a
    compaction (`ContextConfig.summary_max_share`), as far as the writer's text can give:
    a head and a notice, its whole saved first (the notice points there, `read_file` reads
    on); what code carried (the user's words, the artifact trail) and the eviction index stay
    whole. The summary itself (stored, given to the next compaction) does not change; the
    cut travels with it in `Kept.shown`."""
    writer = kept.writer(summary)
    if not writer:
        return kept
    writer = clean_text(writer)  # measured and saved as valid UTF-8 (a tool's lone surrogates)

    async def over(shown: str) -> int:
        msg = memory.summary_message_for(shown + kept.tail)
        return (0 if msg is None else math.ceil(await counter.count_msg(msg) * scale)) - cap

    async def fits(shown: str) -> bool:
        return await over(shown) <= 0

    shown, limit, path = writer, utf8_len(writer), ""
    above = limit  # (the limit of a cut known not to fit)
    while limit > _MASK_BYTES and (excess := await over(shown)) > 0:
        above = limit
        tokens = max(await counter.count_text(shown), 1)
        excess = math.ceil(excess / scale)  # (`limit` holds the notice: nothing added for it)
        wanted = int(utf8_len(shown) * (tokens - excess) / tokens)  # (in proportion)
        limit = max(min(wanted, limit if shown is writer else limit - 1), _MASK_BYTES)
        if path:  # saved once: the next cuts point at the same file
            shown = excerpt_with_notice(writer, max_bytes=limit, file_path=path)
            continue
        _, shown = await cutter.text(writer, limit, short=True)
        path = await _saved(cutter, shown)
        if not path:  # not saved (the store failed): shown whole, as before the cap
            return kept
    if shown is writer:
        return kept
    if await fits(shown):
        shown = await _widen(writer, path, limit, above, fits) or shown
    return replace(kept, shown=shown)


async def _widen(
    text: str, path: str, fits_at: int, over_at: int, fits: Callable[[str], Awaitable[bool]]
) -> str | None:
    """The longest cut of `text` (its notice pointing at `path`, saved already) that `fits`,
    between the limits of a cut known to fit (`fits_at` bytes) and of one known not to
    (`over_at`), to within `_WIDEN_BYTES` or a fiftieth; `None`: no longer one fits. A cut
    in proportion to the whole cuts too much of a text whose head has fewer tokens a byte
    than its rest (plain lines, then figures): some 830 tokens at a 3,000-token budget."""
    best = None
    while over_at - fits_at > max(_WIDEN_BYTES, fits_at // 50):
        mid = (fits_at + over_at) // 2
        cut = excerpt_with_notice(text, max_bytes=mid, file_path=path)
        if await fits(cut):
            fits_at, best = mid, cut
        else:
            over_at = mid
    return best


async def _saved(cutter: Cutter, shown: str) -> str:
    """The file the notice ending `shown` points at, just saved by `cutter` (``""``: none,
    the store failed), recorded as a summary's saved text (`SAVED_SUMMARY`), not a tool's
    output."""
    notice = parse_notice(shown)
    if notice is None:
        return ""
    path = notice[1].file_path
    if cutter.describe is not None:
        await cutter.describe([path], SAVED_SUMMARY, "")
    return path
