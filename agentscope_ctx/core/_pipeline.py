"""The pre-reasoning pipeline (DESIGN.md §3 and §8), run before every model call of an agent.

A pressure ladder of small stages, each a unit with one job, in order:

0. `Compaction.save_hidden`: what an earlier compaction kept in memory because the dialog
   store failed, saved (and removed) once it works again;
1. `Ladder.first_cuts`: each new tool message within its recent limits (and the outputs kept
   whole because the store failed, saved and cut once it works again);
2. the `Accountant` counts system prompt + tool schemas + summary + messages;
3. `Ladder.relieve`, no model call: under `compact_trigger_ratio`, due cuts of older
   outputs wait for a batch worth `clear_at_least`, or for a cold cache (no model call for
   longer than the provider's cache lives: it writes the whole prompt again anyway); over it,
   the second truncation, then masking (old outputs reduced to their notice, on down to
   `mask_to_ratio`), then masking of all but the newest;
4. `Compaction`, only if the prompt is still over the trigger: a model summary of the older
   messages, saved to `dialog/` durably before they leave memory;
5. `Ladder.fit`, the last resort when the prompt is over the budget; still over it, a
   compaction of all but the current user turn and the pins, the fit again, and the summary
   message out of view if that alone makes the prompt fit;
6. `ensure_fits`: still over it because the parts that never leave the prompt (system
   prompt, tool schemas, the current user turn; pins) are, a `PromptTooLargeError`; not
   while a tool call of the turn waits for its result (no prompt is sent before it comes:
   1.x runs the pipeline after each tool of a step; the run before the model call judges).

Whatever the store does, the budget holds: a part that cannot be saved stays whole in memory
and the model is shown it cut (`Cut.view`), messages that cannot be saved stay in memory,
hidden (`Compaction`), and a run that fails anyway is followed by `hold`: the last-resort fit
on what memory holds, then `ensure_fits` (issue 46 item 15).

The core takes plain inputs (`PromptParts`, messages in `ContextMemory`) and writes no user
output: the adapter gives `prompt_parts` and `notify`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..telemetry import grouped, note_model_usage
from ._entry import Msg
from ._failures import FailureLog
from .compaction._compaction import Compaction, CompactorLike
from .config._config import ContextConfig
from .context._memory import ContextMemory
from .context._turns import split_point, waiting
from .ladder._accountant import Accountant, PromptParts
from .ladder._cuts import Cutter, Describe
from .ladder._fits import ensure_fits, floor_fits
from .ladder._ladder import Ladder
from .tokens._calibration import CacheStats, Calibration, PromptUsage
from .tokens._tokens import TokenCounter

if TYPE_CHECKING:  # annotations only: the caller passes the store in
    from ._seams import DialogSeam, OutputSeam
    from .ladder._tool_policy import ToolResultPolicy

__all__ = ["CompactorLike", "ContextPipeline", "PipelineReport", "PromptParts", "split_point"]

logger = logging.getLogger("agentscope_ctx")


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
    """Tokens freed by each cheap rung that ran ("second truncation", "masking", ...)."""
    budget: int = 0
    """The input budget the prompt was fitted to (calibrated; lower after an overflow)."""
    outputs_saved: int = 0
    """Tool outputs (and other parts) this run saved whole before cutting them."""
    saved_bytes: int = 0
    """Their size, in UTF-8 bytes."""

    def figures(self) -> dict[str, int | float | str | None]:
        """The run's figures by name, as plain values (the span's attributes, the 2.x
        notice event's value; `freed` is kept apart, a mapping of rungs)."""
        return {
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "threshold": self.threshold,
            "budget": self.budget,
            "truncated": self.truncated,
            "outputs_saved": self.outputs_saved,
            "saved_bytes": self.saved_bytes,
            "compacted": self.compacted,
            "summary_source": self.summary_source,
            "scale": self.scale,
            "note": self.note,
        }


class ContextPipeline:
    """The pipeline for one agent's `ContextMemory`. Safe to run twice: idempotent."""

    def __init__(
        self,
        config: ContextConfig,
        memory: ContextMemory,
        *,
        counter: TokenCounter,
        store: OutputSeam,
        policy: ToolResultPolicy,
        dialog: DialogSeam,
        compactor: CompactorLike,
        on_compacted: Callable[[list[Msg]], Awaitable[None]] | None = None,
        calibration_key: str = "default",
        failures: FailureLog | None = None,
        prompt_parts: Callable[[], PromptParts] = lambda: PromptParts(),
        notify: Callable[[str], Awaitable[None]] | None = None,
        describe: Describe | None = None,
    ) -> None:
        """Args (besides the parts of the core it composes):
        prompt_parts: what of the prompt is not in memory (the adapter reads it off the
            agent at each call: the system prompt and tool schemas may change).
        notify: how the adapter tells the user what happened (compactions, failures);
            the pipeline itself writes no user output.
        describe: names the tool on outputs the ladder saves (the recall's index).
        """
        self.config = config
        self.memory = memory
        self.counter = counter
        self.dialog = dialog
        self.notify = notify
        self.failures = failures or FailureLog()
        self.calibration = Calibration(memory, calibration_key, config.max_input_tokens)
        share = config.tool_result.recent_max_share
        self.cutter = cutter = Cutter(
            store,
            policy,
            self.failures,
            counter=counter,
            token_cap=None if share is None else int(share * config.max_input_tokens),
            describe=describe,
        )
        self.accountant = Accountant(
            memory, counter, self.calibration, prompt_parts, on_reset=self._reset
        )
        self.ladder = Ladder(
            config.tool_result,
            config.clear_at_least,
            self.accountant,
            cutter,
            self._notify,
            pin_max_share=config.pin_max_share,
            mask_to_ratio=config.mask_to_ratio,
        )
        self.cache = CacheStats()
        """The provider's prompt-cache reads over the session (where it reports them)."""
        self.compaction = Compaction(
            config,
            self.accountant,
            dialog=dialog,
            compactor=compactor,
            failures=self.failures,
            notify=self._notify,
            on_compacted=on_compacted,
            read_saved=store.read_saved,
            internal=store.owns,
            cache=self.cache,
            cutter=cutter,
        )
        self.last_estimate = 0
        self.span_group: Mapping[str, str] = {}
        """What the spans of this agent's runs and model calls carry to be grouped by session
        and end user (`telemetry.group_attributes`; set by the services: `traced_run`)."""
        self._stable: str | None = None
        """The stable call of the last model call's cache marks (`cache_marks`)."""
        """Raw estimate of the prompt at the end of the last run (what the model gets next)."""
        self._lock = asyncio.Lock()
        self.clock: Callable[[], float] = time.time
        """The time in seconds, for the prompt cache's TTL (`cold`): the wall clock, which
        the session's workers share; a benchmark or a test sets a virtual one."""
        self.cache_life: float | None = None
        """Seconds after which the provider's idle prompt cache is gone (`cold`), set by the
        adapter from the agent's model and `cache` (`models.cache_life`); `None`: not
        known (a server without a documented cache), never counted gone."""

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
        `max_input_tokens` that the prompt is then fitted to, the newest output included.

        Raises:
            PromptTooLargeError: what never leaves the prompt is over the budget alone (see
                `ensure_fits`), and no tool call waits; no model call should be made with it."""
        async with self._lock:
            accountant = self.accountant
            report = PipelineReport(threshold=self.threshold, scale=self.scale)
            refs, size = self.cutter.saved_refs, self.cutter.saved_bytes
            # what a compaction kept in memory while the dialog store failed, saved now
            saved = report.compacted = await self.compaction.save_hidden()
            await accountant.sync()
            report.truncated = await self.ladder.first_cuts()
            report.tokens_before = await accountant.calibrated()
            relief = await self.ladder.relieve(
                report.tokens_before, report.threshold, cold=self.cold
            )
            report.tokens_after, report.freed = relief.tokens_after, relief.freed
            report.truncated += relief.changed
            budget = self.calibration.budget
            budget = report.budget = budget if target is None else min(budget, target)
            over = report.tokens_after > report.threshold
            # The loop guard spares model calls between the trigger and the budget; over the
            # budget a compaction is still tried before the last resort cuts the newest.
            stalled = self.compaction.stalled(report.tokens_after)
            if force or (over and (not stalled or report.tokens_after > budget)):
                outcome = await self.compaction.run(
                    report.tokens_before,
                    report.threshold,
                    extra_instruction=extra_instruction,
                    keep_ratio=keep_ratio,
                )
                report.compacted += outcome.compacted
                report.summary_source, report.note = outcome.source, outcome.note
                # tool outputs that arrived while the compactor ran (parallel tool calls)
                report.truncated += await self.ladder.first_cuts()
                report.tokens_after = await accountant.calibrated()
            if report.tokens_after > budget:
                report.truncated += await self.ladder.fit(budget)
                report.tokens_after = await accountant.calibrated()
            if report.tokens_after > budget and await floor_fits(accountant, budget):
                # The newest messages, cut to their least, are still over (small budgets,
                # issue 19): all but the current user turn and the pins are compacted, the
                # newest tool calls and results too, and the fit runs again; last, the
                # summary message leaves the view if that alone makes the prompt fit (so
                # the no-grow rule weighs the older messages against no summary: the run
                # ends with a prompt within the budget, smaller than before).
                outcome = await self.compaction.run(
                    report.tokens_after, report.threshold, everything=True, least=0
                )
                if outcome.compacted:
                    report.compacted += outcome.compacted
                    report.summary_source, report.note = outcome.source, outcome.note
                    report.truncated += await self.ladder.first_cuts()
                    report.truncated += await self.ladder.fit(budget)
                report.truncated += await self.ladder.drop_summary(budget)
                report.tokens_after = await accountant.calibrated()
            self.compaction.settle(report.tokens_after)
            report.outputs_saved = self.cutter.saved_refs - refs
            report.saved_bytes = self.cutter.saved_bytes - size
            if report.tokens_after > self.calibration.budget and not waiting(
                self.memory.content
            ):  # with a tool call waiting no prompt is sent: the run after its result judges
                await ensure_fits(accountant, self.calibration.budget)  # raises: not sent
            if report.compacted > saved:
                how = str(report.summary_source) + (f" ({report.note})" if report.note else "")
                await self._notify(
                    f"[agentscope_ctx] compacted {report.compacted - saved} messages: "
                    f"{report.tokens_before} -> {report.tokens_after} tokens; summary by {how}; "
                    f"raw messages saved in {self.dialog.dialog_dir}",
                )
            self.last_estimate = await accountant.prompt_tokens()
            return report

    async def hold(self) -> None:
        """After a run that raised (a bug, or a failure no stage expected): the prompt within
        the budget all the same, or no model call. The last-resort fit on what the memory
        holds (a part that cannot be saved is shown cut, kept whole), the summary out of view
        if only that makes the prompt fit, then `ensure_fits`, as a run ends.

        Raises:
            PromptTooLargeError: the prompt is still over the budget, and no tool call waits:
                no model call should be made with it.
            Exception: what the fit raises (the caller must not send the prompt either)."""
        async with self._lock:
            accountant = self.accountant
            budget = self.calibration.budget
            await accountant.sync()
            if await accountant.calibrated() > budget:
                await self.ladder.fit(budget)
            if await accountant.calibrated() > budget:
                await self.ladder.drop_summary(budget)
            self.last_estimate = await accountant.prompt_tokens()
            if await accountant.calibrated() > budget and not waiting(self.memory.content):
                await ensure_fits(accountant, budget)

    async def prepare(self) -> int:
        """The cheap part of a run, without a model call: the first truncation of outputs
        that have not been cut yet (a state loaded from storage may hold them whole) and the
        cheap rungs, as the next run would apply them; no compaction, no fit. So that the
        context's usage reports the prompt the next model call would get, not the uncut
        sizes. Idempotent; returns the messages changed."""
        async with self._lock:
            await self.accountant.sync()
            changed = await self.ladder.first_cuts()
            tokens = await self.accountant.calibrated()
            relief = await self.ladder.relieve(tokens, self.threshold, cold=self.cold)
            return changed + relief.changed

    # -- the budget, as the accountant and the calibration see it --------------------------

    @property
    def scale(self) -> float:
        """Factor from our estimate to the provider's count, with a safety margin."""
        return self.calibration.scale

    @property
    def threshold(self) -> int:
        budget = self.calibration.budget
        return int(self.config.trigger_ratio(budget) * budget)

    @property
    def cold(self) -> bool:
        """Whether the provider's prompt cache has expired: no model call's usage came for
        longer than its life (`cache_life`, renewed by each call). Then the next call writes
        the whole prompt anyway, and the cuts due are applied at once (`Ladder.relieve`).
        Measured from the usage's arrival, after the answer: the idle time is undercounted
        by the answer's length, so a cache counted cold is cold. The time of that arrival
        is saved with the session (`Calibration.called`), so a turn on another worker
        tells too; a session with no call noted (or a provider that reports no usage)
        counts as warm."""
        called, life = self.calibration.called, self.cache_life
        if called is None or life is None:
            return False
        return self.clock() - called > life

    def observe_usage(self, usage: PromptUsage) -> float | None:
        """Fold the provider's count of the last prompt into the calibration (and its cache
        reads and writes into `cache`, and into a span when tracing: `note_model_usage`)."""
        self.calibration.note_call(self.clock())
        self.cache.observe(usage)
        with grouped(self.span_group):
            note_model_usage(self.calibration.key, usage.prompt, usage.cached, usage.created)
        return self.calibration.observe(usage.tokens, self.last_estimate, complete=usage.complete)

    async def prompt_tokens(self) -> int:
        """Estimated tokens of the prompt the agent would send now."""
        return await self.accountant.prompt_tokens()

    async def breakdown(self) -> dict[str, int]:
        """Where the prompt's tokens go (see `Accountant.breakdown`)."""
        return await self.accountant.breakdown()

    def cache_marks(self) -> tuple[bool, tuple[str, ...]]:
        """What the prompt-cache breakpoints of the next model call need (`models._cache`):
        whether a summary message follows the system prompt, and the calls whose results
        end what the ladder leaves as it is (`Ladder.stable_call`): the one of the call
        before, where this call reads after a batch of cuts (unless a compaction took its
        result away), then this call's. Asked once per model call."""
        stable = self.ladder.stable_call()
        previous = self._stable
        if previous is not None and stable is None:
            previous = None  # (settled results leave only by a compaction: it took this one)
        calls = tuple(dict.fromkeys(c for c in (previous, stable) if c is not None))
        self._stable = stable
        return self.memory.summary_message() is not None, calls

    def message_counts(self) -> dict[str, int]:
        """Token count of each live message, by id (as of the last run)."""
        return dict(self.accountant.ledger.counts)

    def _reset(self, live: Iterable[str]) -> None:
        self.ladder.plan.retain(live)

    async def _notify(self, text: str) -> None:
        logger.info("%s", text)
        if self.notify is not None:
            await self.notify(text)
