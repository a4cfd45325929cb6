"""`Compaction`: rung (c) of the pressure ladder, the model summary (DESIGN.md §3).

The older messages are split off (the newest `keep_recent_ratio` of the budget stays, a
tool_use never apart from its tool_result), summarised by the compactor, appended to
`dialog/` durably, and only then removed from memory; the summary takes their place, with
the eviction index of what left (issue 13) after it.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ._accountant import Accountant
from ._config import ContextConfig
from ._dialog import DialogStore
from ._entry import Msg
from ._errors import PersistenceError
from ._eviction import eviction_index, split_summary, with_index
from ._failures import FailureLog

__all__ = ["Compaction", "CompactionOutcome", "CompactorLike", "split_point"]

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
    ) -> _Summary: ...


@dataclass
class CompactionOutcome:
    """What one compaction did."""

    compacted: int = 0
    """Messages moved from memory to `dialog/`."""
    source: str | None = None
    """Who wrote the summary: "model", "model_retry" or "extractive"."""
    note: str | None = None


def split_point(msgs: Sequence[Msg], counts: Sequence[int], keep_tokens: int) -> int:
    """Index that splits `msgs` into older (`[:i]`) and kept (`[i:]`) parts.

    The kept part is the longest suffix worth at most `keep_tokens` that never holds a
    tool_result whose tool_use is in the older part; at least the last such unit is kept.
    Returns 0 when no valid split exists (everything is one unit).
    """
    pending: set[str] = set()  # tool results in the kept part whose tool_use is not yet seen
    kept = 0
    best = 0
    for i in range(len(msgs) - 1, -1, -1):
        for block in msgs[i].get_content_blocks():
            if block.get("type") == "tool_result":
                pending.add(str(block.get("id")))
            elif block.get("type") == "tool_use":
                pending.discard(str(block.get("id")))
        kept += counts[i]
        if pending or i == 0:
            continue
        if kept > keep_tokens and best:
            break
        best = i
    return best


class Compaction:
    """The compaction stage of one agent's pipeline."""

    def __init__(
        self,
        config: ContextConfig,
        accountant: Accountant,
        *,
        dialog: DialogStore,
        compactor: CompactorLike,
        failures: FailureLog,
        notify: Notify,
        on_compacted: Callable[[list[Msg]], Awaitable[None]] | None = None,
    ) -> None:
        self.config = config
        self.accountant = accountant
        self.memory = accountant.memory
        self.dialog = dialog
        self.compactor = compactor
        self.failures = failures
        self.notify = notify
        self.on_compacted = on_compacted
        self._stalled_at: int | None = None

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
    ) -> CompactionOutcome:
        """Compact all but the newest `keep_ratio` (default `keep_recent_ratio`) of the
        budget. `tokens_before` and `threshold` are for the messages and the loop guard."""
        start = await self.accountant.calibrated()
        msgs = self.memory.messages()
        counts = [self.accountant.ledger.counts[m.id] for m in msgs]
        calibration = self.accountant.calibration
        ratio = self.config.keep_recent_ratio if keep_ratio is None else keep_ratio
        keep = int(ratio * calibration.budget / calibration.scale)  # in raw estimate units
        older = msgs[: split_point(msgs, counts, keep)]
        if not older:
            return CompactionOutcome(note="nothing to compact: the newest messages form one unit")
        await self.notify(
            f"[agentscope_ctx] compacting {len(older)} messages "
            f"({tokens_before} tokens, threshold {threshold})...",
        )
        previous, previous_index = split_summary(self.memory.compact_summary)
        result = await self.compactor.compact(previous, older, extra_instruction=extra_instruction)
        summary = result.summary
        if self.config.recall.enabled:  # what is gone, to search for (changes only here)
            index = eviction_index(
                older, previous_index, self.config.recall.eviction_index_max_chars
            )
            summary = with_index(summary, index)
        try:
            await self.dialog.append(older)  # write-ahead: durable before removal
        except PersistenceError as exc:
            # Nothing is removed; the older messages are only not shown, the new summary
            # standing for them, until a later compaction can save them.
            self.failures.failed("dialog", f"messages kept in memory, not saved: {exc}")
            self.memory.hide([m.id for m in older], summary)
            await self.notify(
                f"[agentscope_ctx] could not save to {self.dialog.dialog_dir} ({exc}); "
                f"{len(older)} older messages are kept in memory but not shown",
            )
            return CompactionOutcome(note=f"dialog not saved, nothing removed: {exc}")
        self.failures.recovered("dialog")
        await self.memory.delete([m.id for m in older])
        await self.memory.update_compressed_summary(summary)
        # Whether it helped is judged on the messages it had: what arrived meanwhile (the
        # outputs of parallel tool calls, added while the compactor ran) is not its doing.
        arrived = await self._arrived_tokens({m.id for m in msgs})
        tokens_after = await self.accountant.calibrated() - arrived
        self._stalled_at = tokens_after if tokens_after >= start else None
        if self.on_compacted is not None:
            await self.on_compacted(older)
        return CompactionOutcome(len(older), result.source, result.reason)

    async def _arrived_tokens(self, known: set[str]) -> int:
        """Calibrated tokens of the shown messages that are not in `known`."""
        t = await self.accountant.sync()
        hidden = self.memory.hidden
        raw = sum(t.counts[i] for i in t.msgs if i not in known and i not in hidden)
        return math.ceil(raw * self.accountant.calibration.scale)
