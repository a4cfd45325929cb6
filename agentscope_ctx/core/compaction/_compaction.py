"""`Compaction`: rung (c) of the pressure ladder, the model summary (DESIGN.md §3).

The older messages are split off (the newest `keep_recent_ratio` of the budget stays, a
tool_use never apart from its tool_result), summarised by the compactor, appended to
`dialog/` durably, and only then removed from memory; the summary takes their place, with
what is carried by code whoever wrote it (the user's words and the artifact trail, `_carry`)
and the eviction index of what left (issue 13) after it.

Three rules (DESIGN.md §13):

- **The current user turn never leaves the prompt**: the newest user message (not a tool
  result, not a hint) stays in memory even when it falls in the older part; the agent's work
  after it can still be compacted. It is written to `dialog/` with the older part (in order;
  the store skips it when it leaves later), so the files keep the conversation's order. A
  tool call after it still waiting for its result (a call running, or awaiting the user's
  confirmation) belongs to the turn too: its result will come, and a result without its call
  is a prompt the providers reject (`turn_ids`).
- **Pinned messages stay** (`_pins`, within `pin_max_share`), in their place; like the
  current turn, they are written to `dialog/` with the older part.
- **A compaction that would not make the prompt smaller is not made**: before the model
  call when the older part is smaller than the least a summary takes (the guide, the carried
  block and the eviction index), after it when the new summary is; nothing is removed, and
  the notice says so.

The adapter leaves the agent's last prompt in `prompts` (a `_prefix.PromptKeeper`, through
its `expect` and `keep`; kept as `prompts.last` unless `compactor.request: plain`); with
``prefix``, or ``auto`` once the provider reported cache reads, and while it still matches
the memory (the same summary, none of its messages gone or hidden), the compactor is given it
(`Prefix`), so that its request can start with that prompt.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .._entry import Msg
from .._errors import PersistenceError
from .._failures import FailureLog
from ..config._config import ContextConfig
from ..context._pins import protected
from ..context._turns import HINT_MARK, split_point, turn_ids
from ..ladder._accountant import Accountant
from ..ladder._cuts import Cutter
from ..ladder._summary_fit import cap_writer
from ..summary._carry import carried
from ..summary._carry_text import with_carry
from ..summary._eviction import IndexEntry, eviction_index, with_index
from ..summary._extractive import _result_text
from ..summary._kept import Kept, compose
from ..summary._outcome import ReadSaved, judge_ahead
from ..tokens._calibration import CacheStats
from ._prefix import Prefix, PromptKeeper

if TYPE_CHECKING:  # annotations only: the caller passes the store in
    from .._seams import DialogSeam

__all__ = ["Compaction", "CompactionOutcome", "CompactorLike"]

Notify = Callable[[str], Awaitable[None]]


class _Summary(Protocol):
    @property
    def summary(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def reason(self) -> str | None: ...


class CompactorLike(Protocol):
    """What the pipeline needs of a compactor (`agentscope_ctx.Compactor` is one)."""

    async def compact(
        self,
        previous_summary: str,
        messages: Sequence[Msg],
        *,
        extra_instruction: str | None = None,
        prefix: Prefix | None = None,
    ) -> _Summary: ...


@dataclass
class CompactionOutcome:
    """What one compaction did."""

    compacted: int = 0
    """Messages moved from memory to `dialog/`."""
    source: str | None = None
    """Who wrote the summary: "model", "model_retry" or "extractive"."""
    note: str | None = None


class Compaction:
    """The compaction stage of one agent's pipeline."""

    def __init__(
        self,
        config: ContextConfig,
        accountant: Accountant,
        *,
        dialog: DialogSeam,
        compactor: CompactorLike,
        failures: FailureLog,
        notify: Notify,
        on_compacted: Callable[[list[Msg]], Awaitable[None]] | None = None,
        read_saved: ReadSaved | None = None,
        internal: Callable[[str], bool] = lambda path: False,
        cache: CacheStats | None = None,
        cutter: Cutter | None = None,
    ) -> None:
        """`read_saved` reads a saved output back (bounded) to judge a run whose output was
        cut or masked; `internal` tells the package's own paths (saved outputs) apart from the
        agent's artifacts (see `_carry`); `cache` is what the provider reported of its prompt
        cache (`compactor.request: auto` makes prefix requests once it reported reads);
        `cutter` saves and cuts the writer's summary held to its share of the budget
        (`ContextConfig.summary_max_share`; without one it is shown whole)."""
        self.config = config
        self.accountant = accountant
        self.memory = accountant.memory
        self.dialog = dialog
        self.compactor = compactor
        self.failures = failures
        self.notify = notify
        self.on_compacted = on_compacted
        self.read_saved = read_saved
        self.internal = internal
        self.cache = cache
        self.cutter = cutter
        self._stalled_at: int | None = None
        self._pending: tuple[str, Kept | None] | None = None
        """The summary standing for the messages hidden because the dialog store failed, and
        what it carries by code (`save_hidden` makes it the summary once they are saved)."""
        self.prompts = PromptKeeper(config, self.memory, cache)
        """The agent's last prompt, for the compactor's prefix request: the adapter says
        when the agent's model is called next (`expect`) and with what (`keep`)."""

    def stalled(self, tokens: int) -> bool:
        """Loop guard: after a compaction that did not help, wait for real growth (5% of
        the budget) from the smallest prompt since (see `settle`)."""
        if self._stalled_at is None:
            return False
        return tokens - self._stalled_at < 0.05 * self.accountant.calibration.budget

    def settle(self, tokens: int) -> None:
        """The prompt at the end of a pipeline run: the guard's mark follows it down, so
        that growth is counted from what the model was last given, never from a peak that
        later rungs cut (issue 19: a mark that never came down kept compaction off)."""
        if self._stalled_at is not None and tokens < self._stalled_at:
            self._stalled_at = tokens

    async def run(
        self,
        tokens_before: int,
        threshold: int,
        *,
        extra_instruction: str | None = None,
        keep_ratio: float | None = None,
        everything: bool = False,
        least: int | None = None,
    ) -> CompactionOutcome:
        """Compact all but the newest `keep_ratio` (default `keep_recent_ratio`) of the
        budget. `tokens_before` and `threshold` are for the messages and the loop guard.
        `everything` (the last resort, when the newest messages cut to their least are still
        over the budget): all but the current user turn and the pins, the newest tool calls
        and results too. Then `least` is what the pipeline will leave of the summary
        message at most (the fit cuts it to a notice, or takes it out of view): the no-grow
        rule weighs what leaves, as it is shown, against that."""
        start = await self.accountant.calibrated()
        msgs = self.memory.messages()
        counts = [self.accountant.ledger.counts[m.id] for m in msgs]
        calibration = self.accountant.calibration
        ratio = self.config.keep_recent_ratio if keep_ratio is None else keep_ratio
        keep = int(ratio * calibration.budget / calibration.scale)  # in raw estimate units
        if keep_ratio is None and not everything:
            keep = min(keep, await self._headroom_keep(threshold))
        leaving = msgs if everything else msgs[: split_point(msgs, counts, keep)]
        turn = turn_ids(self.memory.content)
        share = int(self.config.pin_max_share * calibration.budget / calibration.scale)
        pinned, unprotected = protected(msgs, self.accountant.ledger.counts, share)
        # the current user turn (with its calls still waiting) and the pins stay, in place
        older = [m for m in leaving if m.id not in turn and m.id not in pinned]
        if unprotected:
            await self.notify(
                f"[agentscope_ctx] {unprotected} pinned message(s) over pin_max_share "
                f"({self.config.pin_max_share:g} of the budget) are compacted like the rest"
            )
        if not older:
            held = sum(m.id in pinned and m.id not in turn for m in leaving)
            return CompactionOutcome(note=_why_nothing(len(msgs), len(leaving), held, ratio))
        # What code carried is data beside the summary, never read back out of its text
        # (DESIGN.md §15); a summary without it is all the writer's (`_kept`).
        previous = self.memory.compact_summary
        kept = self.memory.kept
        writer = kept.writer(previous) if kept is not None else None
        if kept is not None and writer is not None:
            previous, previous_carry, previous_index = writer, kept.carry, kept.index
        else:
            previous_carry, previous_index = None, ()
        carry_chars = min(self.config.compactor.carry_max_chars, calibration.budget * 7 // 20)
        if self.read_saved is not None:  # how cut runs ended, read off the event loop
            blocks = [b for m in older for b in m.get_content_blocks("tool_result")]
            texts = [_result_text(b.get("output")) for b in blocks]
            await asyncio.to_thread(judge_ahead, texts, self.read_saved)
        carry, carry_state = carried(
            older,
            previous_carry,
            max(carry_chars, 400),
            read_saved=self.read_saved,
            internal=self.internal,
            hints={m.id for m, marks in self.memory.content if HINT_MARK in marks},
            dialog=self.memory.dialog_days or "dialog/",
        )
        index, entries = "", list[IndexEntry]()
        if self.config.recall.enabled:  # what is gone, to search for (changes only here)
            index_chars = min(self.config.recall.eviction_index_max_chars, self._index_chars())
            index, entries = eviction_index(older, previous_index, index_chars)
        # No-grow rule: what leaves (the older messages shown, the summary shown now) against
        # what would come instead (a summary message, at least its guide and the index).
        hidden = self.memory.hidden
        freed = sum(self.accountant.ledger.counts[m.id] for m in older if m.id not in hidden)
        if everything and least is not None:
            freed += await self.accountant.summary_tokens()  # as shown: the fit cut it
        else:
            freed += await self._summary_tokens(self.memory.shown_summary())
        cap = least if everything else None
        least_summary = with_index(with_carry("-", carry), index)
        grown = await self._no_grow(tokens_before, least_summary, cap, freed, older, made=False)
        if grown is not None:
            return grown
        await self.notify(
            f"[agentscope_ctx] compacting {len(older)} messages "
            f"({tokens_before} tokens, threshold {threshold})...",
        )
        prefix = self.prompts.prefix(msgs, len(leaving), older)
        more = {} if prefix is None else {"prefix": prefix}
        result = await self.compactor.compact(
            previous, older, extra_instruction=extra_instruction, **more
        )
        del prefix, more
        summary, kept = compose(result.summary, carry, carry_state, index, entries)
        kept = await self._capped(summary, kept)
        shown = kept.shown_summary(summary)
        grown = await self._no_grow(tokens_before, shown, cap, freed, older, made=True)
        if grown is not None:
            return grown
        try:
            await self.dialog.append(leaving)  # write-ahead: durable before removal
        except PersistenceError as exc:
            # Nothing is removed; the older messages are only not shown, the new summary
            # standing for them, until they can be saved (`save_hidden`, at each run).
            self.failures.failed("dialog", f"messages kept in memory, not saved: {exc}")
            self.memory.hide([m.id for m in older], summary)
            self._pending = (summary, kept)
            await self.notify(
                f"[agentscope_ctx] could not save to {self.dialog.dialog_dir} ({exc}); "
                f"{len(older)} older messages are kept in memory but not shown",
            )
            return CompactionOutcome(note=f"dialog not saved, nothing removed: {exc}")
        self.failures.recovered("dialog")
        self.prompts.drop()  # it shows what leaves now: no request can start with it
        await self.memory.delete([m.id for m in older])
        await self.memory.update_compressed_summary(summary, kept=kept)
        # Whether it helped is judged on the messages it had: what arrived meanwhile (the
        # outputs of parallel tool calls, added while the compactor ran) is not its doing.
        arrived = await self._arrived_tokens({m.id for m in msgs})
        tokens_after = await self.accountant.calibrated() - arrived
        self._stalled_at = tokens_after if tokens_after >= start else None
        if self.on_compacted is not None:
            await self.on_compacted(older)
        return CompactionOutcome(len(older), result.source, result.reason)

    async def save_hidden(self) -> int:
        """The messages a compaction hid because the dialog store failed (`memory.hidden`,
        `pending_summary` standing for them): saved now, with the messages before them (the
        dialog keeps the conversation's order, as a compaction writes it), then removed, the
        pending summary becoming the summary. The number removed; 0 while the store still
        fails (one attempt per run, the failure logged once) or when none is hidden. The
        prompt does not grow: the model is shown the same summary, without the hidden ones."""
        memory = self.memory
        hidden = memory.hidden
        if not hidden:
            return 0
        msgs = memory.messages()
        last = max((i for i, m in enumerate(msgs) if m.id in hidden), default=-1)
        try:
            await self.dialog.append(msgs[: last + 1])
        except PersistenceError as exc:
            self.failures.failed("dialog", f"messages kept in memory, not saved: {exc}")
            return 0
        self.failures.recovered("dialog")
        older = [m for m in msgs if m.id in hidden]
        pending, self._pending = self._pending, None
        if pending is None or pending[0] != memory.pending_summary:
            pending = (memory.pending_summary or "", None)  # (not this compaction's: none)
        summary, kept = pending
        self.prompts.drop()
        await memory.delete([m.id for m in older])
        await memory.update_compressed_summary(summary, kept=kept)
        await self.notify(
            f"[agentscope_ctx] {len(older)} messages kept in memory while "
            f"{self.dialog.dialog_dir} could not be written are saved there now"
        )
        if self.on_compacted is not None:
            await self.on_compacted(older)
        return len(older)

    def _index_chars(self) -> int:
        """The most characters the eviction index may take: like the carried block, a tenth
        of the budget (at ~3.5 characters a token), or, where the summary is held to a share
        of it (`ContextConfig.summary_share`: small windows), a quarter of that share. At
        4,000 tokens the block and the index took more than the share before the writer's
        text, which was shown as a notice alone; the block (the user's words, the files) is
        what DESIGN.md §13 keeps, the index only says what `search_history` can find."""
        budget = self.accountant.calibration.budget
        share = self.config.summary_share(budget)
        return max(int(budget * 0.35 if share is None else budget * share * 3.5 / 4), 200)

    async def _capped(self, summary: str, kept: Kept) -> Kept:
        """`kept` with the writer's text cut to the summary's share of the budget, where one
        applies (`ContextConfig.summary_share`; `_summary_fit.cap_writer`)."""
        calibration = self.accountant.calibration
        share = self.config.summary_share(calibration.budget)
        if share is None or self.cutter is None:
            return kept
        cap = int(share * calibration.budget)
        counter = self.accountant.counter
        return await cap_writer(
            self.memory, counter, self.cutter, summary, kept, cap, calibration.scale
        )

    async def _headroom_keep(self, threshold: int) -> int:
        """The most of the newest messages (raw estimate) that a compaction may keep so that
        the prompt after it leaves room under `threshold` for `compact_headroom` fresh
        outputs, the summary counted at its share (`summary_max_share`, or as shown now,
        when not held). Small windows only: elsewhere `keep_recent_ratio` is the smaller."""
        calibration = self.accountant.calibration
        room = self.config.headroom(calibration.budget)
        share = self.config.tool_result.recent_max_share
        if room is None or share is None:
            return calibration.budget  # (more than any keep)
        cap = self.config.summary_share(calibration.budget)
        if cap is None:
            summary = math.ceil(await self.accountant.summary_tokens() * calibration.scale)
        else:
            summary = int(cap * calibration.budget)
        fixed = math.ceil(await self.accountant.fixed_tokens() * calibration.scale)
        after = threshold - room * share * calibration.budget - fixed - summary
        return max(int(after / calibration.scale), 0)

    async def _arrived_tokens(self, known: set[str]) -> int:
        """Calibrated tokens of the shown messages that are not in `known`."""
        t = await self.accountant.sync()
        hidden = self.memory.hidden
        raw = sum(t.counts[i] for i in t.msgs if i not in known and i not in hidden)
        return math.ceil(raw * self.accountant.calibration.scale)

    async def _summary_tokens(self, summary: str) -> int:
        msg = self.memory.summary_message_for(summary)
        return 0 if msg is None else await self.accountant.counter.count_msg(msg)

    async def _no_grow(
        self,
        tokens_before: int,
        summary: str,
        least: int | None,
        freed: int,
        older: Sequence[Msg],
        *,
        made: bool,
    ) -> CompactionOutcome | None:
        """The no-grow rule, before the model call (`summary`: the least one) and after it
        (`made`: the new one): `None` when the summary message, as shown (at most `least`,
        what the fit leaves of it), takes fewer tokens than `freed`; else it is not made."""
        tokens = await self._summary_tokens(summary)
        if least is not None:
            tokens = min(tokens, least)
        if tokens < freed:
            return None
        why = (
            f"the new summary takes {tokens} tokens, {_older(older)} and the summary it "
            f"would replace {freed}"
            if made
            else f"{_older(older)} and the summary take {freed} tokens, a summary at least {tokens}"
        )
        return await self._not_made(tokens_before, why)

    async def _not_made(self, tokens_before: int, why: str) -> CompactionOutcome:
        """Skip a compaction that would not shrink the prompt; say so, and wait for growth
        before trying again (the loop guard)."""
        self._stalled_at = tokens_before
        note = f"not made: it would not make the prompt smaller ({why})"
        await self.notify(f"[agentscope_ctx] compaction {note}")
        return CompactionOutcome(note=note)


def _older(older: Sequence[Msg]) -> str:
    n = len(older)
    return f"the {n} older message{'' if n == 1 else 's'}"


def _why_nothing(messages: int, leaving: int, pinned: int, ratio: float) -> str:
    """Why a compaction found nothing to move: `messages` in memory, `leaving` older than
    the part kept verbatim, `pinned` of those pinned (the others are the current turn)."""
    if not messages:
        return "nothing to compact: the context holds no messages"
    if not leaving:
        return (
            f"nothing to compact: all {messages} message(s) are one unit kept verbatim "
            f"(keep_recent_ratio {ratio:g} of the budget)"
        )
    turn = leaving - pinned
    parts = []
    if turn:
        parts.append(f"{turn} belong to the current user turn, which never leaves the prompt")
    if pinned:
        parts.append(f"{pinned} are pinned")
    return f"nothing to compact: of the {leaving} older message(s), {' and '.join(parts)}"
