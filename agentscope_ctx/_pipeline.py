"""The pre-reasoning pipeline (DESIGN.md §3), run before every model call of an agent.

1. second truncation of tool results older than the newest `recent_n` (and a first
   truncation of any tool result that entered the context without one);
2. token check of system prompt + tool schemas + summary + messages;
3. over `compact_trigger_ratio`: split off the older messages, keeping the newest
   `keep_recent_ratio` of the budget (a tool_use never apart from its tool_result);
4. summarise them, append them to `dialog/` durably, and only then remove them from memory.

It works incrementally: per-message token counts are cached, and while the memory only
grows by appends, a step looks only at the new messages.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentscope.message import Msg

from ._calibration import Calibration, PromptUsage
from ._config import ContextConfig
from ._cuts import Cut, Cutter
from ._dialog import DialogStore
from ._errors import PersistenceError
from ._eviction import eviction_index, split_summary, with_index
from ._failures import FailureLog
from ._ladder import MASKED, OLD, CutPlan
from ._memory import ContextMemory
from ._tokens import TokenCounter
from ._tool_results import ToolResultPolicy, ToolResultStore

__all__ = ["CompactorLike", "ContextPipeline", "PipelineReport", "PromptParts", "split_point"]

logger = logging.getLogger("agentscope_ctx")


class _Compaction(Protocol):
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
    ) -> _Compaction: ...


@dataclass
class PipelineReport:
    """What one run of the pipeline did."""

    tokens_before: int = 0
    tokens_after: int = 0
    threshold: int = 0
    compacted: int = 0
    """Messages moved from memory to `dialog/`."""
    summary_source: str | None = None
    """"model", "model_retry" or "extractive" when a summary was written."""
    truncated: int = 0
    """Messages whose tool output (or, as a last resort, text) was cut in this run."""
    scale: float = 1.0
    """Calibration applied to the estimates (`tokens_*` are already multiplied by it)."""
    note: str | None = None
    freed: dict[str, int] = field(default_factory=dict)
    """Tokens freed by each rung of the ladder that ran ("second truncation", "masking",
    ...; compaction is `tokens_before` - `tokens_after` minus these)."""


@dataclass
class _Tracked:
    revision: int = -1
    seen: int = 0
    last_id: str | None = None
    tokens: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    msgs: dict[str, Msg] = field(default_factory=dict)
    tool_msgs: list[str] = field(default_factory=list)
    """Ids of the messages holding tool calls or results, oldest first."""
    results: set[str] = field(default_factory=set)
    """The ids in `tool_msgs` of messages holding tool results."""
    old_upto: int = 0
    """`tool_msgs[:old_upto]` have been planned for the second truncation."""
    mask_upto: int = 0
    """`tool_msgs[:mask_upto]` have been planned for masking."""
    recent_upto: int = 0
    """`tool_msgs[:recent_upto]` have had the first-truncation check."""
    calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)


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


@dataclass(frozen=True)
class PromptParts:
    """The parts of the prompt that are not in memory, as plain data."""

    system_prompt: str = ""
    tool_schemas: Sequence[Mapping[str, Any]] = ()


class ContextPipeline:
    """The pipeline for one agent's `ContextMemory`. Safe to run twice: idempotent."""

    def __init__(
        self,
        config: ContextConfig,
        memory: ContextMemory,
        *,
        counter: TokenCounter,
        store: ToolResultStore,
        policy: ToolResultPolicy,
        dialog: DialogStore,
        compactor: CompactorLike,
        on_compacted: Callable[[list[Msg]], Awaitable[None]] | None = None,
        calibration_key: str = "default",
        failures: FailureLog | None = None,
        prompt_parts: Callable[[], PromptParts] = lambda: PromptParts(),
        notify: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        """Args (besides the parts of the core it composes):
        prompt_parts: what of the prompt is not in memory (the adapter reads it off the
            agent at each call: the system prompt and tool schemas may change).
        notify: how the adapter tells the user what happened (compactions, failures);
            the pipeline itself writes no user output.
        """
        self.prompt_parts = prompt_parts
        self.notify = notify
        self.config = config
        self.memory = memory
        self.counter = counter
        self.store = store
        self.policy = policy
        self.dialog = dialog
        self.compactor = compactor
        self.on_compacted = on_compacted
        self.calibration_key = calibration_key
        self.calibration = Calibration(memory, calibration_key, config.max_input_tokens)
        self.failures = failures or FailureLog()
        self.cutter = Cutter(
            store,
            policy,
            self.failures,
            counter=counter,
            token_cap=(
                None
                if config.tool_result.recent_max_share is None
                else int(config.tool_result.recent_max_share * config.max_input_tokens)
            ),
        )
        self.plan = CutPlan(self.cutter, counter, self._store_cut)
        self.last_estimate = 0
        """Raw estimate of the prompt at the end of the last run (what the model gets next)."""
        self._lock = asyncio.Lock()
        self._tracked = _Tracked()
        self._fixed_cache: dict[int, int] = {}
        self._stalled_at: int | None = None

    # -- public ------------------------------------------------------------------------

    async def run(
        self,
        *,
        force: bool = False,
        extra_instruction: str | None = None,
        keep_ratio: float | None = None,
        target: int | None = None,
    ) -> PipelineReport:
        """Run the pipeline once. `force` compacts whatever the threshold (manual and
        emergency compaction); `keep_ratio` overrides `config.keep_recent_ratio` for it;
        `target` (after a provider rejected a prompt of about that size) is a budget below
        `max_input_tokens` that the prompt is then fitted to, the newest output included."""
        async with self._lock:
            report = PipelineReport(threshold=self.threshold, scale=self.scale)
            await self._sync()
            report.truncated = await self._first_cuts()
            self._mark_due()
            report.tokens_before = report.tokens_after = await self._calibrated_tokens()
            await self._relieve(report)
            over = report.tokens_after > report.threshold
            if force or (over and not self._stalled(report.tokens_after)):
                await self._compact(report, extra_instruction, keep_ratio)
            budget = self.calibration.budget
            budget = budget if target is None else min(budget, target)
            if report.tokens_after > budget:
                report.truncated += await self._fit(budget)
                report.tokens_after = await self._calibrated_tokens()
            if report.compacted:
                how = str(report.summary_source) + (f" ({report.note})" if report.note else "")
                await self._notify(
                    f"[agentscope_ctx] compacted {report.compacted} messages: "
                    f"{report.tokens_before} -> {report.tokens_after} tokens; summary by {how}; "
                    f"raw messages saved in {self.dialog.dialog_dir}",
                )
            self.last_estimate = await self.prompt_tokens()
            return report

    # -- calibration (issue: trust the provider) -------------------------------------------

    @property
    def scale(self) -> float:
        """Factor from our estimate to the provider's count, with a safety margin."""
        return self.calibration.scale

    def observe_usage(self, usage: PromptUsage) -> float | None:
        """Fold the provider's count of the last prompt into the calibration."""
        return self.calibration.observe(usage.tokens, self.last_estimate, complete=usage.complete)

    async def _calibrated_tokens(self) -> int:
        return math.ceil(await self.prompt_tokens() * self.scale)

    @property
    def threshold(self) -> int:
        return int(self.config.compact_trigger_ratio * self.calibration.budget)

    async def prompt_tokens(self) -> int:
        """Estimated tokens of the prompt the agent would send now."""
        await self._sync()
        return await self.fixed_tokens() + await self._summary_tokens() + self._tracked.tokens

    async def fixed_tokens(self) -> int:
        """Tokens of the system prompt plus the tool schemas."""
        fixed = self.prompt_parts()
        return await self._text_tokens(fixed.system_prompt) + await self._schema_tokens(fixed)

    async def breakdown(self) -> dict[str, int]:
        """Where the prompt's tokens go (raw estimate): ``system_prompt``, ``tool_schemas``,
        ``summary``, ``messages`` (the shown live messages) and ``tool_results`` (the part of
        ``messages`` in tool-result messages). The same accounting as `prompt_tokens`: the
        parts other than ``tool_results`` add up to it."""
        await self._sync()
        fixed = self.prompt_parts()
        t = self._tracked
        shown = [m.id for m in self.memory.messages() if m.id not in self.memory.hidden]
        return {
            "system_prompt": await self._text_tokens(fixed.system_prompt),
            "tool_schemas": await self._schema_tokens(fixed),
            "summary": await self._summary_tokens(),
            "messages": t.tokens,
            "tool_results": sum(t.counts[i] for i in shown if i in t.results),
        }

    async def _schema_tokens(self, fixed: PromptParts) -> int:
        if not fixed.tool_schemas:
            return 0
        return await self._text_tokens(json.dumps(list(fixed.tool_schemas), ensure_ascii=False))

    async def _text_tokens(self, text: str) -> int:
        """Tokens of a fixed part of the prompt (cached by its text: it rarely changes)."""
        key = hash(text)
        if key not in self._fixed_cache:
            if len(self._fixed_cache) > 64:
                self._fixed_cache.clear()
            self._fixed_cache[key] = await self.counter.count_text(text) + 4
        return self._fixed_cache[key]

    def message_counts(self) -> dict[str, int]:
        """Token count of each live message, by id (as of the last run)."""
        return dict(self._tracked.counts)

    # -- tracking ----------------------------------------------------------------------

    async def _sync(self) -> None:
        """Bring the tracked totals up to date with the memory, incrementally if possible."""
        content = self.memory.content
        t = self._tracked
        appended_only = (
            t.revision == self.memory.revision
            and len(content) >= t.seen
            and (t.seen == 0 or content[t.seen - 1][0].id == t.last_id)
        )
        if not appended_only:
            self._tracked = t = _Tracked(revision=self.memory.revision)
            self.plan.retain(msg.id for msg, _ in content)
        for msg, _ in content[t.seen :]:
            count = await self.counter.count_msg(self.memory.shown(msg))
            t.counts[msg.id] = count
            if msg.id not in self.memory.hidden:
                t.tokens += count
            t.msgs[msg.id] = msg
            kinds = set()
            for block in msg.get_content_blocks():
                kinds.add(block.get("type"))
                if block.get("type") == "tool_use":
                    tool_input = block.get("input")
                    t.calls[str(block.get("id"))] = (
                        str(block.get("name", "")),
                        dict(tool_input) if isinstance(tool_input, dict) else {},
                    )
            if kinds & {"tool_use", "tool_result"}:
                t.tool_msgs.append(msg.id)
            if "tool_result" in kinds:
                t.results.add(msg.id)
        t.seen = len(content)
        t.last_id = content[-1][0].id if content else None

    async def _recount(self, msg: Msg) -> None:
        t = self._tracked
        count = await self.counter.count_msg(self.memory.shown(msg))
        if msg.id not in self.memory.hidden:
            t.tokens += count - t.counts.get(msg.id, 0)
        t.counts[msg.id] = count

    # -- the cheap rungs: cuts of tool output -----------------------------------------------

    async def _first_cuts(self) -> int:
        """Each new tool message within its recent limits (a fresh output also within its
        share of the budget). Idempotent."""
        t = self._tracked
        changed = 0
        for k in range(t.recent_upto, len(t.tool_msgs)):
            changed += await self._cut(t.msgs[t.tool_msgs[k]], old=False)
        t.recent_upto = len(t.tool_msgs)
        return changed

    def _mark_due(self) -> None:
        """Plan the second truncation beyond the newest `recent_n` tool-result messages, and
        masking beyond `mask_after` (looking only at what moved since the last run)."""
        t = self._tracked
        upto = self._boundary(self.config.tool_result.recent_n, t.old_upto)
        for k in range(t.old_upto, upto):
            self.plan.mark(t.tool_msgs[k], OLD)
        t.old_upto = upto
        mask_after = self.config.tool_result.mask_after
        if mask_after is None:
            return
        upto = self._boundary(max(mask_after, self.config.tool_result.recent_n), t.mask_upto)
        for k in range(t.mask_upto, upto):
            self.plan.mark(t.tool_msgs[k], MASKED)
        t.mask_upto = upto

    def _boundary(self, n: int, floor: int) -> int:
        """Index in `tool_msgs` of the oldest message among the newest `n` tool-result
        messages and the tool calls after the oldest of them (never below `floor`)."""
        t = self._tracked
        results = 0
        for k in range(len(t.tool_msgs) - 1, floor - 1, -1):
            if t.tool_msgs[k] in t.results:
                results += 1
                if results > n:
                    return k + 1
        return floor

    async def _relieve(self, report: PipelineReport) -> None:
        """Rungs (a) and (b) of the ladder, without a model call.

        Under the trigger, due cuts wait (`clear_at_least`). Over it, every due cut is applied
        in one batch: the second truncation, then masking by age (a batch breaks the cached
        prefix once, whatever it holds, and the more it frees the longer until the next);
        then, only if the prompt is still over, masking of all but the newest tool result."""
        t = self._tracked
        if report.tokens_after <= report.threshold:
            clear_at_least = self.config.clear_at_least
            if (
                clear_at_least is not None
                and self.plan.due
                and await self.plan.freed(t.msgs, t.counts, t.calls) >= clear_at_least
            ):
                await self._rung(report, "batched cuts", 0)
            return
        await self._rung(report, "second truncation", OLD)
        if self.config.tool_result.mask_after is not None:
            await self._rung(report, "masking", MASKED)
            if report.tokens_after > report.threshold:
                for k in range(self._boundary(1, 0)):
                    self.plan.mark(t.tool_msgs[k], MASKED)
                await self._rung(report, "masking under pressure", MASKED)
        if report.freed:
            rungs = ", ".join(f"{name} -{tokens}" for name, tokens in report.freed.items())
            await self._notify(
                f"[agentscope_ctx] relieved {report.tokens_before} -> {report.tokens_after} "
                f"tokens without a model call ({rungs}; threshold {report.threshold}); the cut "
                "outputs stay readable through their notices"
            )

    async def _rung(self, report: PipelineReport, name: str, level: int) -> None:
        t = self._tracked
        changed = await self.plan.apply(t.msgs, t.counts, t.calls, level)
        if not changed:
            return
        before = report.tokens_after
        report.truncated += changed
        report.tokens_after = await self._calibrated_tokens()
        report.freed[name] = report.freed.get(name, 0) + before - report.tokens_after

    async def _cut(self, msg: Msg, *, old: bool, everything: bool = False) -> int:
        """Cut `msg` (see `Cutter.cut`) and store the result."""
        cut = await self.cutter.cut(msg, self._tracked.calls, old=old, everything=everything)
        await self._store_cut(msg, cut)
        return int(cut.changed)

    async def _store_cut(self, msg: Msg, cut: Cut) -> None:
        """Store the harder cut and/or show the model a cut of what could not be saved."""
        if cut.content is not None:
            self.memory.replace_content(msg.id, cut.content)
        if cut.view is not None:
            self.memory.show(msg, cut.view)
        if cut.changed:
            await self._recount(msg)

    # -- compaction --------------------------------------------------------------------

    def _stalled(self, tokens: int) -> bool:
        """Loop guard: after a compaction that did not help, wait for real growth."""
        if self._stalled_at is None:
            return False
        grown = tokens - self._stalled_at
        return grown < 0.05 * self.calibration.budget

    async def _compact(
        self,
        report: PipelineReport,
        extra_instruction: str | None,
        keep_ratio: float | None,
    ) -> None:
        msgs = self.memory.messages()
        counts = [self._tracked.counts[m.id] for m in msgs]
        ratio = self.config.keep_recent_ratio if keep_ratio is None else keep_ratio
        keep = int(ratio * self.calibration.budget / self.scale)  # in raw estimate units
        cut = split_point(msgs, counts, keep)
        older = msgs[:cut]
        if not older:
            report.note = "nothing to compact: the newest messages form one unit"
            return
        await self._notify(
            f"[agentscope_ctx] compacting {len(older)} messages "
            f"({report.tokens_before} tokens, threshold {report.threshold})...",
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
            report.note = f"dialog not saved, nothing removed: {exc}"
            report.tokens_after = await self._calibrated_tokens()
            await self._notify(
                f"[agentscope_ctx] could not save to {self.dialog.dialog_dir} ({exc}); "
                f"{len(older)} older messages are kept in memory but not shown",
            )
            return
        self.failures.recovered("dialog")
        await self.memory.delete([m.id for m in older])
        await self.memory.update_compressed_summary(summary)
        report.compacted = len(older)
        report.summary_source = result.source
        report.tokens_after = await self._calibrated_tokens()
        report.note = result.reason
        self._stalled_at = (
            report.tokens_after if report.tokens_after >= report.tokens_before else None
        )
        if self.on_compacted is not None:
            await self.on_compacted(older)

    async def _fit(self, target: int) -> int:
        """Last resort when the prompt is still over `target`: the old (smaller) limits for
        every tool output and call, newest included, then, largest message first, the text
        and media of the remaining messages, until the prompt fits."""
        shown = [m for m in self.memory.messages() if m.id not in self.memory.hidden]
        changed = 0
        for msg in shown:
            changed += await self._cut(msg, old=True)
        for msg in sorted(shown, key=lambda m: -self._tracked.counts[m.id]):
            if await self._calibrated_tokens() <= target:
                break
            changed += await self._cut(msg, old=True, everything=True)
        return changed

    async def _notify(self, text: str) -> None:
        logger.info("%s", text)
        if self.notify is not None:
            await self.notify(text)

    async def _summary_tokens(self) -> int:
        summary = self.memory.summary_message()
        return 0 if summary is None else await self.counter.count_msg(summary)
