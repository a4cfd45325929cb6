"""The summary message within the budget, the last steps of rung (d) (`Ladder.fit`):
`fit_summary` trims it (the long-term note left out, then the summary cut to a head and a
notice, down to a notice alone), `drop_summary` takes it out of view when that alone is
enough; `cap_writer` holds it to its share of the budget after a compaction
(`ContextConfig.summary_max_share`, the cut kept with the summary in `Kept.shown`). What is
stored never changes: the next compaction still gets the whole summary.

Both cut in one loop (`_cut_to_fit`), each measuring its own limit (`Over`). Each cut saves
the whole text once (its further tries point at the same file), and a cut's byte limit holds
its notice (nothing is added for it: counted twice, the head was cut some 120 tokens shorter
than the budget needed); a cut in proportion that took too much is widened again to the
longest that fits (`_widen`). The file is recorded as a summary's saved text, not a tool's
output (`search._saved_summary.SAVED_SUMMARY`). Where the store cannot save, `cap_writer`
shows the whole (the fit still holds the budget) and `fit_summary`, which must fit, a marked
cut whose rest is kept in memory, as the cutter shows any part it could not save."""

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

Over = Callable[[str], Awaitable[int]]
"""Calibrated tokens over its limit of the summary message with a text shown (0 or less:
within); each caller measures its own (the prompt for the fit, the message for the cap)."""

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
    1,000-token budget). A store that cannot save: the head and a note that the rest is
    kept in memory, as the cutter shows any part it could not save. What is stored does not
    change: the next compaction still gets the whole summary. Returns 1 if anything was
    cut."""
    if memory.summary_message() is None:
        return 0
    if await accountant.calibrated() <= target:
        return 0
    memory.trim_summary(None, note=False)
    summary = clean_text(memory.summary_text())  # measured and saved as valid UTF-8

    def show(shown: str) -> None:  # (`summary` itself: as shown before the fit, `Kept.shown`)
        memory.trim_summary(None if shown is summary else shown, note=False)

    async def over(shown: str) -> int:
        show(shown)
        return await accountant.calibrated() - target

    scale = accountant.calibration.scale
    shown = await _cut_to_fit(summary, over, accountant.counter, scale, cutter, unsaved=True)
    show(shown)
    if await accountant.calibrated() > target:
        before = await accountant.summary_tokens()
        whole = memory.whole_summary_message()
        _, bare = await cutter.text("" if whole is None else whole.content, _MASK_BYTES, short=True)
        await _saved(cutter, bare)
        memory.trim_summary(bare, note=True, bare=True)
        if await accountant.summary_tokens() >= before:  # never larger
            show(shown)
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
    cut travels with it in `Kept.shown`. A store that cannot save: `kept` as it is (shown
    whole, as with no share: the last-resort fit still holds the budget)."""
    writer = kept.writer(summary)
    if not writer:
        return kept
    writer = clean_text(writer)  # measured and saved as valid UTF-8 (a tool's lone surrogates)

    async def over(shown: str) -> int:
        msg = memory.summary_message_for(shown + kept.tail)
        return (0 if msg is None else math.ceil(await counter.count_msg(msg) * scale)) - cap

    shown = await _cut_to_fit(writer, over, counter, scale, cutter, unsaved=False)
    return kept if shown is writer else replace(kept, shown=shown)


async def _cut_to_fit(
    text: str, over: Over, counter: TokenCounter, scale: float, cutter: Cutter, *, unsaved: bool
) -> str:
    """The longest head of `text` and a notice that `over` finds within its limit, down to
    the least cut (the notice and a few bytes of head, shown even when still over); `text`
    itself when it is within. The whole is saved at the first cut and recorded as a
    summary's (`_saved`); every later try points at that file: cut in proportion to the
    tokens over (`counter`'s, calibrated by `scale`), narrowed until one fits, then widened
    again (`_widen`); a cut that no longer shrinks ends the tries. A store that cannot save:
    with `unsaved`, the head and a note that the rest is kept in memory (`Cutter.text`, each
    try saving again), else `text` itself."""
    shown, limit, path = text, utf8_len(text), ""
    above = limit  # (the limit of a cut known not to fit)
    while limit > _MASK_BYTES and (excess := await over(shown)) > 0:
        above = limit
        tokens = max(await counter.count_text(shown), 1)
        excess = math.ceil(excess / scale)  # (`limit` holds the notice: nothing added for it)
        wanted = int(utf8_len(shown) * (tokens - excess) / tokens)  # (in proportion)
        limit = max(min(wanted, limit if shown is text else limit - 1), _MASK_BYTES)
        if path:  # saved once: the next cuts point at the same file
            cut = excerpt_with_notice(text, max_bytes=limit, file_path=path)
        else:
            _, cut = await cutter.text(text, limit, short=True)
            path = await _saved(cutter, cut)
            if not path and not unsaved:  # (not saved, or given back whole: nothing cut)
                return text
        if cut == shown:  # (at its least: any narrower limit gives it again)
            break
        shown = cut
    if path and shown is not text and await over(shown) <= 0:
        shown = await _widen(text, path, limit, above, over) or shown
    return shown


async def _widen(text: str, path: str, fits_at: int, over_at: int, over: Over) -> str | None:
    """The longest cut of `text` (its notice pointing at `path`, saved already) that `over`
    finds within its limit, between the limits of a cut known to fit (`fits_at` bytes) and of
    one known not to (`over_at`), to within `_WIDEN_BYTES` or a fiftieth; `None`: no longer
    one fits. A cut in proportion to the whole cuts too much of a text whose head has fewer
    tokens a byte than its rest (plain lines, then figures): some 830 tokens at a 3,000-token
    budget."""
    best = None
    while over_at - fits_at > max(_WIDEN_BYTES, fits_at // 50):
        mid = (fits_at + over_at) // 2
        cut = excerpt_with_notice(text, max_bytes=mid, file_path=path)
        if await over(cut) <= 0:
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
