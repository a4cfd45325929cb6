"""`Compaction`: rung (c) of the pressure ladder, the model summary (DESIGN.md §3).

The older messages are split off (the newest `keep_recent_ratio` of the budget stays, a
tool_use never apart from its tool_result), summarised by the compactor, appended to
`dialog/` durably, and only then removed from memory; the summary takes their place, with
what is carried by code whoever wrote it (the user's words and the artifact trail, `_carry`)
and the eviction index of what left (issue 13) after it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ._accountant import Accountant
from ._carry import carried, split_carry, with_carry
from ._config import ContextConfig
from ._dialog import DialogStore
from ._entry import Msg
from ._errors import PersistenceError
from ._eviction import eviction_index, split_summary, with_index
from ._failures import FailureLog
from ._outcome import ReadSaved
from ._pins import protected

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
        read_saved: ReadSaved | None = None,
        internal: Callable[[str], bool] = lambda path: False,
    ) -> None:
        """`read_saved` reads a saved output back (bounded) to judge a run whose output was
        cut or masked; `internal` tells the package's own paths (saved outputs) apart from the
        agent's artifacts (see `_carry`)."""
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
        self._stalled_at: int | None = None

    def stalled(self, tokens: int) -> bool:
        """Loop guard: after a compaction that did not help, wait for real growth."""
        if self._stalled_at is None:
            return False
        return tokens - self._stalled_at < 0.05 * self.accountant.calibration.budget

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
        msgs = self.memory.messages()
        counts = [self.accountant.ledger.counts[m.id] for m in msgs]
        calibration = self.accountant.calibration
        ratio = self.config.keep_recent_ratio if keep_ratio is None else keep_ratio
        keep = int(ratio * calibration.budget / calibration.scale)  # in raw estimate units
        older = msgs[: split_point(msgs, counts, keep)]
        share = int(self.config.pin_max_share * calibration.budget / calibration.scale)
        pinned, unprotected = protected(msgs, self.accountant.ledger.counts, share)
        older = [m for m in older if m.id not in pinned]  # pins stay, in their place
        if unprotected:
            await self.notify(
                f"[agentscope_ctx] {unprotected} pinned message(s) over pin_max_share "
                f"({self.config.pin_max_share:g} of the budget) are compacted like the rest"
            )
        if not older:
            return CompactionOutcome(note="nothing to compact: the newest messages form one unit")
        await self.notify(
            f"[agentscope_ctx] compacting {len(older)} messages "
            f"({tokens_before} tokens, threshold {threshold})...",
        )
        previous, previous_index = split_summary(self.memory.compact_summary)
        previous, previous_carry = split_carry(previous)
        result = await self.compactor.compact(previous, older, extra_instruction=extra_instruction)
        carry_chars = min(self.config.compactor.carry_max_chars, calibration.budget * 7 // 20)
        carry = carried(
            older,
            previous_carry,
            max(carry_chars, 400),
            read_saved=self.read_saved,
            internal=self.internal,
        )
        summary = with_carry(result.summary, carry)
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
        tokens_after = await self.accountant.calibrated()
        self._stalled_at = tokens_after if tokens_after >= tokens_before else None
        if self.on_compacted is not None:
            await self.on_compacted(older)
        return CompactionOutcome(len(older), result.source, result.reason)
