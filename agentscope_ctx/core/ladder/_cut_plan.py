"""`CutPlan`: the due cuts of old tool messages, planned once and applied in batches (the
ladder's second truncation and masking, DESIGN.md §8; see `_ladder`).

A due cut is planned once (computed, its full text saved, the tokens it would free counted)
and applied later together with the other due cuts: rewriting an older message breaks a
provider's cached prompt prefix from that message on, so it is done rarely and all at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from copy import copy
from dataclasses import dataclass

from .._entry import Msg
from ..tokens._tokens import TokenCounter
from ._cuts import Calls, Cut, Cutter

__all__ = ["MASKED", "OLD", "CutPlan", "StoreCut"]

OLD = 1
"""Level of the second truncation (`old_max_bytes`)."""
MASKED = 2
"""Level of masking: the notice alone."""

StoreCut = Callable[[Msg, Cut], Awaitable[None]]


@dataclass
class _Plan:
    level: int
    source: int
    """`id()` of the content the plan was computed from: a plan of content changed since
    is stale."""
    cut: Cut
    freed: int


class CutPlan:
    """Due cuts of old tool messages, by message id, and their batched application."""

    def __init__(self, cutter: Cutter, counter: TokenCounter, store_cut: StoreCut) -> None:
        self.cutter = cutter
        self.counter = counter
        self.store_cut = store_cut
        self.due: dict[str, int] = {}
        """Level due, by message id, of cuts not applied yet."""
        self.applied: dict[str, int] = {}
        self._plans: dict[str, _Plan] = {}

    def mark(self, msg_id: str, level: int) -> None:
        """A cut of `level` is due for `msg_id` (no-op when it, or a harder one, is applied)."""
        if self.applied.get(msg_id, 0) < level and self.due.get(msg_id, 0) < level:
            self.due[msg_id] = level

    async def mark_freeing(
        self, msgs: Mapping[str, Msg], counts: Mapping[str, int], calls: Calls, msg_id: str
    ) -> int:
        """`mark` `msg_id` for masking; the tokens its cut frees (0: masked already, or
        nothing to cut), planning it."""
        if self.applied.get(msg_id, 0) >= MASKED:
            return 0
        self.mark(msg_id, MASKED)
        return (await self._plan(msgs[msg_id], self.due[msg_id], counts[msg_id], calls)).freed

    def settled(self, msg_id: str, level: int) -> None:
        """A cut of `level` was made outside the plan (by the fit): nothing lighter is due."""
        if self.applied.get(msg_id, 0) < level:
            self.applied[msg_id] = level
        if self.due.get(msg_id, 0) <= level:
            self.due.pop(msg_id, None)
            self._plans.pop(msg_id, None)

    def retain(self, live: Iterable[str]) -> None:
        """Forget messages that left the memory."""
        keep = set(live)
        for table in (self.due, self.applied, self._plans):
            for msg_id in [k for k in table if k not in keep]:
                del table[msg_id]

    async def freed(
        self, msgs: Mapping[str, Msg], counts: Mapping[str, int], calls: Calls, level: int = 0
    ) -> int:
        """Tokens the due cuts of `level` (0: of any level) would free, planning them."""
        total = 0
        for msg_id, due in list(self.due.items()):
            if level in (0, due):
                total += (await self._plan(msgs[msg_id], due, counts[msg_id], calls)).freed
        return total

    async def apply(
        self, msgs: Mapping[str, Msg], counts: Mapping[str, int], calls: Calls, level: int = 0
    ) -> int:
        """Apply the due cuts of `level` (0: of any level), in the order they became due;
        returns how many messages changed."""
        changed = 0
        for msg_id, due in list(self.due.items()):
            if level not in (0, due):
                continue
            plan = await self._plan(msgs[msg_id], due, counts[msg_id], calls)
            if plan.cut.changed:
                await self.store_cut(msgs[msg_id], plan.cut)
                changed += 1
            del self.due[msg_id]
            self._plans.pop(msg_id, None)
            self.applied[msg_id] = due
        return changed

    async def _plan(self, msg: Msg, level: int, count: int, calls: Calls) -> _Plan:
        plan = self._plans.get(msg.id)
        if plan is not None and plan.level == level and plan.source == id(msg.content):
            return plan
        cut = await self.cutter.cut(msg, calls, old=True, mask=level >= MASKED)
        freed = 0
        if cut.changed:
            after = copy(msg)
            after.id = f"{msg.id}#planned"  # not to displace the message's own cached count
            shown = cut.view if cut.view is not None else cut.content
            after.content = shown if shown is not None else msg.content
            freed = max(count - await self.counter.count_msg(after), 0)
        plan = _Plan(level, id(msg.content), cut, freed)
        self._plans[msg.id] = plan
        return plan
