"""`Ladder`: the rungs of the pressure ladder that need no model call (DESIGN.md §8).

A new tool message is cut to its recent limits at once (and a fresh output to its share of
the budget). Then, by `CutPlan` (`_cut_plan`):

As a tool message ages, harder cuts become due: the second truncation once it is beyond the
newest `recent_n` tool-result messages (level `OLD`), masking (the notice alone) once it is
beyond `mask_after` of them, or under pressure (level `MASKED`). A due cut is planned once
(computed, its full text saved, the tokens it would free counted) and applied later, together
with the other due cuts, when the prompt is over the trigger or when the batch frees at least
`clear_at_least` tokens: rewriting an older message breaks a provider's cached prompt prefix
from that message on, so it is done rarely and all at once. Over the trigger, masking goes on
down to a low-water mark (`ContextConfig.mask_to_ratio`), oldest output first, in the same
batch: the rewrite starts at the oldest output it masks however many it masks, and the calls
until the next firing only append. Last, when nothing else brought the prompt within the
budget, `Ladder.fit` cuts whatever it must (rung d).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from .._entry import Msg
from ..config._config import ToolResultConfig
from ..context._pins import protected
from ..context._turns import current_turn
from ._accountant import Accountant
from ._cut_plan import MASKED, OLD, CutPlan
from ._cuts import Cut, Cutter
from ._summary_fit import drop_summary, fit_summary

__all__ = ["MASKED", "OLD", "CutPlan", "Ladder", "Relief"]


@dataclass
class Relief:
    """What the cheap rungs did in one run."""

    tokens_after: int
    changed: int = 0
    """Messages cut."""
    freed: dict[str, int] = field(default_factory=dict)
    """Tokens freed by each rung that ran."""


class Ladder:
    """The cheap rungs of one agent's pipeline: first cuts, due cuts, masking, fit.

    Args:
        config: the tool-result limits and masking age.
        clear_at_least: see `ContextConfig.clear_at_least`.
        accountant: the agent's accountant (its ledger says where each message is).
        cutter: cuts a message's parts, saving them first.
        notify: tells the user (through the adapter) when the rungs relieved the prompt.
        pin_max_share: the share of the budget pinned messages may hold (see `_pins`):
            those are never cut harder or masked.
    """

    def __init__(
        self,
        config: ToolResultConfig,
        clear_at_least: int | None,
        accountant: Accountant,
        cutter: Cutter,
        notify: Callable[[str], Awaitable[None]],
        *,
        pin_max_share: float = 0.25,
        mask_to_ratio: float | None = None,
    ) -> None:
        self.config = config
        self.mask_to_ratio = mask_to_ratio
        self.pin_max_share = pin_max_share
        self.clear_at_least = clear_at_least
        self.accountant = accountant
        self.memory = accountant.memory
        self.cutter = cutter
        self.notify = notify
        self.plan = CutPlan(cutter, accountant.counter, self._store)

    async def first_cuts(self) -> int:
        """Each new tool message within its recent limits (a fresh output also within its
        share of the budget), and the cuts now due planned. Idempotent."""
        t = self.accountant.ledger
        changed = 0
        for k in range(t.recent_upto, len(t.tool_msgs)):
            changed += await self.cut(t.msgs[t.tool_msgs[k]], old=False)
        t.recent_upto = len(t.tool_msgs)
        self._mark_due()
        return changed + await self._retry_unsaved()

    async def _retry_unsaved(self) -> int:
        """Outputs kept whole because the store could not save them (the model is shown a
        marked cut, `memory.views`): saved and cut now, at the level already applied to
        them, oldest first. The first that still cannot be saved ends the try: while the
        store is down, a run makes one attempt more, not one per output."""
        if not self.memory.views:
            return 0  # (nothing kept whole: no pass over the tool messages)
        t = self.accountant.ledger
        changed = 0
        for msg_id in [i for i in t.tool_msgs if i in self.memory.views]:
            msg = t.msgs.get(msg_id)
            if msg is None:
                continue
            level = self.plan.applied.get(msg_id, 0)
            changed += await self.cut(msg, old=level >= OLD, mask=level >= MASKED)
            if msg_id in self.memory.views:
                break
        return changed

    async def relieve(self, tokens: int, threshold: int, *, cold: bool = False) -> Relief:
        """Rungs (a) and (b), from a prompt of `tokens` (calibrated).

        Under the trigger, due cuts wait (`clear_at_least`), unless the provider's cache is
        `cold` (expired: the next call writes the whole prompt anyway, so rewriting older
        messages now breaks nothing, and every call after it sends the smaller prompt).
        Over it, every due cut is applied in one batch: the second truncation, then masking
        by age, going on down to the low-water mark (`_mask_to`; a batch breaks the cached
        prefix once, whatever it holds, and the more it frees the longer until the next);
        then, only if the prompt is still over, masking of all but the newest."""
        relief = Relief(tokens)
        t = self.accountant.ledger
        if tokens <= threshold:
            if self.plan.due and (cold or await self._batch_worth_it()):
                await self._rung(relief, "cold cache cuts" if cold else "batched cuts", 0)
            return relief
        await self._rung(relief, "second truncation", OLD)
        if self._mask_after() is not None:
            await self._rung(relief, "masking", MASKED)
            if self.mask_to_ratio is not None:
                await self._mask_to(
                    relief, int(self.mask_to_ratio * self.accountant.calibration.budget)
                )
            if relief.tokens_after > threshold:
                pinned = self.pinned()
                for k in range(self._boundary(1, 0)):
                    if t.tool_msgs[k] not in pinned:
                        self.plan.mark(t.tool_msgs[k], MASKED)
                await self._rung(relief, "masking under pressure", MASKED)
        if relief.freed:
            rungs = ", ".join(f"{name} -{freed}" for name, freed in relief.freed.items())
            await self.notify(
                f"[agentscope_ctx] relieved {tokens} -> {relief.tokens_after} tokens without "
                f"a model call ({rungs}; threshold {threshold}); the cut outputs stay "
                "readable through their notices"
            )
        return relief

    async def _batch_worth_it(self) -> bool:
        """Whether the cuts due free at least `clear_at_least` tokens (never, without one)."""
        if self.clear_at_least is None:
            return False
        t = self.accountant.ledger
        return await self.plan.freed(t.msgs, t.counts, t.calls) >= self.clear_at_least

    async def fit(self, target: int) -> int:
        """Rung (d), the last resort when the prompt is still over `target`, each step only
        while it is: the old limits for every tool output and call, newest included; masking
        of tool outputs and calls, oldest first; largest message first, the text and media
        of the messages cut to the old limits; the summary message trimmed (`fit_summary`);
        last, largest message first, their text masked. Every cut is lossless (saved first,
        the notice says where). Pinned messages are left as they are; the current user turn
        is cut (a huge paste: its head and a notice) but never masked. What they hold over
        the budget is `PromptTooLargeError`'s to say (`_fits`)."""
        current = current_turn(self.memory.content)
        shown = [
            m for m in self.memory.messages() if m.id not in self.memory.hidden | self.pinned()
        ]
        maskable = [m for m in shown if m.id != current]
        changed = 0
        for msg in shown:
            changed += await self.cut(msg, old=True)
        for msg in maskable:
            if await self.accountant.calibrated() <= target:
                return changed
            changed += await self.cut(msg, old=True, mask=True, short=True)
        counts = self.accountant.ledger.counts
        for mask in (False, True):
            if mask:
                changed += await fit_summary(self.memory, self.accountant, self.cutter, target)
            for msg in sorted(maskable if mask else shown, key=lambda m: -counts[m.id]):
                if await self.accountant.calibrated() <= target:
                    return changed
                changed += await self.cut(msg, old=True, everything=True, mask=mask, short=mask)
        return changed

    async def drop_summary(self, target: int) -> int:
        """The summary message out of view when that alone brings the prompt within `target`
        (`_summary_fit.drop_summary`). Returns 1 if it was dropped."""
        return await drop_summary(self.memory, self.accountant, target)

    async def cut(
        self,
        msg: Msg,
        *,
        old: bool,
        everything: bool = False,
        mask: bool = False,
        short: bool = False,
    ) -> int:
        """Cut `msg` (see `Cutter.cut`) and store the result."""
        calls = self.accountant.ledger.calls
        cut = await self.cutter.cut(
            msg, calls, old=old, mask=mask, everything=everything, short=short
        )
        await self._store(msg, cut)
        if mask:
            self.plan.settled(msg.id, MASKED)
        return int(cut.changed)

    async def _store(self, msg: Msg, cut: Cut) -> None:
        """Store the harder cut and/or show the model a cut of what could not be saved."""
        if cut.content is not None:
            self.memory.replace_content(msg.id, cut.content)
        if cut.view is not None:
            self.memory.show(msg, cut.view)
        if cut.changed:
            await self.accountant.recount(msg)

    async def _rung(self, relief: Relief, name: str, level: int) -> None:
        t = self.accountant.ledger
        changed = await self.plan.apply(t.msgs, t.counts, t.calls, level)
        if not changed:
            return
        before = relief.tokens_after
        relief.changed += changed
        relief.tokens_after = await self.accountant.calibrated()
        relief.freed[name] = relief.freed.get(name, 0) + before - relief.tokens_after

    async def _mask_to(self, relief: Relief, low: int) -> None:
        """Masking over the trigger goes on down to the low-water mark `low` (calibrated,
        `ContextConfig.mask_to_ratio`), oldest output first, all but the newest (no pin), in
        the same batch: the rewrite starts at the oldest output it masks however many it
        masks, so masking more now costs no more cache, and the calls up to the next firing
        only append (weighed at the providers' prices in docs/contributors/providers.md)."""
        t = self.accountant.ledger
        if relief.tokens_after <= low:
            return
        pinned = self.pinned()
        scale = self.accountant.calibration.scale
        need = relief.tokens_after - low
        for msg_id in t.tool_msgs[: self._boundary(1, 0)]:
            if need <= 0:
                break
            if msg_id not in pinned:
                need -= int(scale * await self.plan.mark_freeing(t.msgs, t.counts, t.calls, msg_id))
        await self._rung(relief, "masking", MASKED)

    def _mark_due(self) -> None:
        """Plan the second truncation beyond the newest `recent_n` tool-result messages, and
        masking beyond `mask_after` (looking only at what moved since the last run)."""
        t = self.accountant.ledger
        upto = self._boundary(self.config.recent_n, t.old_upto)
        pinned = self.pinned() if upto > t.old_upto else set()
        for k in range(t.old_upto, upto):
            if t.tool_msgs[k] not in pinned:
                self.plan.mark(t.tool_msgs[k], OLD)
        t.old_upto = upto
        mask_after = self._mask_after()
        if mask_after is None:
            return
        upto = self._boundary(max(mask_after, self.config.recent_n), t.mask_upto)
        pinned = self.pinned() if upto > t.mask_upto else set()
        for k in range(t.mask_upto, upto):
            if t.tool_msgs[k] not in pinned:
                self.plan.mark(t.tool_msgs[k], MASKED)
        t.mask_upto = upto

    def _mask_after(self) -> int | None:
        """`tool_result.mask_after` at the budget in force (`None`: no masking)."""
        return self.config.masks_after(self.accountant.calibration.budget)

    def stable_call(self) -> str | None:
        """Id of the newest tool call whose result stands before every tool message the
        ladder may still rewrite (a due cut; one not yet at its last level, masked, or cut
        to the old limits where nothing is masked): up to that result the prompt stays as it
        is until a compaction, so a provider's cache breakpoint there keeps being read
        (`models._cache`), whatever batch of cuts comes next. `None`: no such result."""
        t = self.accountant.ledger
        last = OLD if self._mask_after() is None else MASKED
        plan = self.plan
        before = next(
            (
                k
                for k, msg_id in enumerate(t.tool_msgs)
                if msg_id in plan.due or plan.applied.get(msg_id, 0) < last
            ),
            len(t.tool_msgs),
        )
        for k in range(before - 1, -1, -1):
            msg = t.msgs.get(t.tool_msgs[k])
            if t.tool_msgs[k] in t.results and msg is not None:
                ids = [b.get("id") for b in msg.get_content_blocks("tool_result")]
                return str(ids[-1]) if ids else None
        return None

    def pinned(self) -> set[str]:
        """Ids of the messages the pins protect now (within `pin_max_share`)."""
        if not self.accountant.ledger.pinned:
            return set()  # (no pins: no pass over every message)
        calibration = self.accountant.calibration
        share = int(self.pin_max_share * calibration.budget / calibration.scale)
        kept, _ = protected(self.memory.messages(), self.accountant.ledger.counts, share)
        return kept

    def _boundary(self, n: int, floor: int) -> int:
        """Index in `tool_msgs` of the oldest message among the newest `n` tool-result
        messages and the tool calls after the oldest of them (never below `floor`)."""
        t = self.accountant.ledger
        results = 0
        for k in range(len(t.tool_msgs) - 1, floor - 1, -1):
            if t.tool_msgs[k] in t.results:
                results += 1
                if results > n:
                    return k + 1
        return floor
