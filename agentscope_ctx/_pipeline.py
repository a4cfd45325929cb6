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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentscope.message import Msg

from ._config import ContextConfig
from ._dialog import DialogStore
from ._errors import OffloadError, PersistenceError
from ._failures import FailureLog
from ._memory import ContextMemory
from ._middleware import block_budget, clean_text, offload_text
from ._tokens import TokenCounter
from ._tool_results import Limits, ToolResultPolicy, ToolResultStore
from ._truncation import head, parse_notice, retruncate, utf8_len

__all__ = ["CompactorLike", "ContextPipeline", "PipelineReport", "say", "split_point"]

logger = logging.getLogger("agentscope_ctx")

CALIBRATION_MARGIN = 0.03
"""Safety margin on top of the calibrated estimate."""
CALIBRATION_SMOOTHING = 0.5
"""Weight of the newest provider report in the smoothed factor."""
CALIBRATION_BOUNDS = (0.5, 4.0)
"""The factor never leaves this range, whatever a provider reports."""


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


@dataclass
class _Tracked:
    revision: int = -1
    seen: int = 0
    last_id: str | None = None
    tokens: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    msgs: dict[str, Msg] = field(default_factory=dict)
    tool_msgs: list[str] = field(default_factory=list)
    """Ids of the messages holding tool results, oldest first."""
    old_upto: int = 0
    """`tool_msgs[:old_upto]` have had the second truncation."""
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
    ) -> None:
        self.config = config
        self.memory = memory
        self.counter = counter
        self.store = store
        self.policy = policy
        self.dialog = dialog
        self.compactor = compactor
        self.on_compacted = on_compacted
        self.calibration_key = calibration_key
        self.failures = failures or FailureLog()
        self.last_estimate = 0
        """Raw estimate of the prompt at the end of the last run (what the model gets next)."""
        self._lock = asyncio.Lock()
        self._tracked = _Tracked()
        self._fixed_cache: dict[int, int] = {}
        self._stalled_at: int | None = None

    # -- public ------------------------------------------------------------------------

    async def run(
        self,
        agent: Any,
        *,
        force: bool = False,
        extra_instruction: str | None = None,
        keep_ratio: float | None = None,
    ) -> PipelineReport:
        """Run the pipeline once. `force` compacts whatever the threshold (manual and
        emergency compaction); `keep_ratio` overrides `config.keep_recent_ratio` for it."""
        async with self._lock:
            report = PipelineReport(threshold=self.threshold, scale=self.scale)
            await self._sync()
            report.truncated = await self._limit_tool_results()
            report.tokens_before = report.tokens_after = await self._calibrated_tokens(agent)
            over = report.tokens_before > report.threshold
            if force or (over and not self._stalled(report.tokens_before)):
                await self._compact(agent, report, extra_instruction, keep_ratio)
            if report.tokens_after > self.config.max_input_tokens:
                report.truncated += await self._fit(agent)
                report.tokens_after = await self._calibrated_tokens(agent)
            self.last_estimate = await self.prompt_tokens(agent)
            return report

    # -- calibration (issue: trust the provider) -------------------------------------------

    @property
    def scale(self) -> float:
        """Factor from our estimate to the provider's count, with a safety margin; 1.0 until
        the provider has reported usage."""
        factor = self.memory.calibration.get(self.calibration_key)
        return 1.0 if factor is None else factor * (1 + CALIBRATION_MARGIN)

    def observe_usage(self, reported_input_tokens: int) -> float | None:
        """Fold the provider's reported prompt size into the calibration factor (a smoothed,
        bounded ratio to our own estimate of the same prompt). Returns the new factor."""
        if self.last_estimate <= 0 or reported_input_tokens <= 0:
            return None
        ratio = reported_input_tokens / self.last_estimate
        old = self.memory.calibration.get(self.calibration_key)
        factor = (
            ratio
            if old is None
            else (1 - CALIBRATION_SMOOTHING) * old + (CALIBRATION_SMOOTHING * ratio)
        )
        factor = min(max(factor, CALIBRATION_BOUNDS[0]), CALIBRATION_BOUNDS[1])
        self.memory.calibration[self.calibration_key] = factor
        return factor

    async def _calibrated_tokens(self, agent: Any) -> int:
        return math.ceil(await self.prompt_tokens(agent) * self.scale)

    @property
    def threshold(self) -> int:
        return int(self.config.compact_trigger_ratio * self.config.max_input_tokens)

    async def prompt_tokens(self, agent: Any) -> int:
        """Estimated tokens of the prompt the agent would send now."""
        await self._sync()
        return await self.fixed_tokens(agent) + await self._summary_tokens() + self._tracked.tokens

    async def fixed_tokens(self, agent: Any) -> int:
        """Tokens of the system prompt plus the tool schemas (cached by their text)."""
        parts = [str(getattr(agent, "sys_prompt", "") or "")]
        toolkit = getattr(agent, "toolkit", None)
        if toolkit is not None:
            parts.append(json.dumps(toolkit.get_json_schemas(), ensure_ascii=False))
        total = 0
        for text in parts:
            key = hash(text)
            if key not in self._fixed_cache:
                if len(self._fixed_cache) > 64:
                    self._fixed_cache.clear()
                self._fixed_cache[key] = await self.counter.count_text(text) + 4
            total += self._fixed_cache[key]
        return total

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
        for msg, _ in content[t.seen :]:
            count = await self.counter.count_msg(self.memory.shown(msg))
            t.counts[msg.id] = count
            if msg.id not in self.memory.hidden:
                t.tokens += count
            t.msgs[msg.id] = msg
            has_result = False
            for block in msg.get_content_blocks():
                if block.get("type") == "tool_use":
                    tool_input = block.get("input")
                    t.calls[str(block.get("id"))] = (
                        str(block.get("name", "")),
                        dict(tool_input) if isinstance(tool_input, dict) else {},
                    )
                elif block.get("type") == "tool_result":
                    has_result = True
            if has_result:
                t.tool_msgs.append(msg.id)
        t.seen = len(content)
        t.last_id = content[-1][0].id if content else None

    async def _recount(self, msg: Msg) -> None:
        t = self._tracked
        count = await self.counter.count_msg(self.memory.shown(msg))
        if msg.id not in self.memory.hidden:
            t.tokens += count - t.counts.get(msg.id, 0)
        t.counts[msg.id] = count

    # -- stage 1: tool results -----------------------------------------------------------

    async def _limit_tool_results(self) -> int:
        """First/second truncation so that each tool result is within its stage's limit.

        Each message is looked at when it arrives and once more when it slides out of the
        newest `recent_n`; both are idempotent."""
        t = self._tracked
        first_recent = max(len(t.tool_msgs) - self.config.tool_result.recent_n, 0)
        changed = 0
        for k in range(t.old_upto, first_recent):
            changed += await self._limit_msg(t.msgs[t.tool_msgs[k]], old=True)
        t.old_upto = max(t.old_upto, first_recent)
        for k in range(max(t.recent_upto, first_recent), len(t.tool_msgs)):
            changed += await self._limit_msg(t.msgs[t.tool_msgs[k]], old=False)
        t.recent_upto = len(t.tool_msgs)
        return changed

    async def _limit_msg(self, msg: Msg, *, old: bool) -> int:
        if not isinstance(msg.content, (list, tuple)):  # a string, or None (no blocks)
            return 0
        changed = unsaved = 0
        content, shown = list(msg.content), list(msg.content)
        for i, block in enumerate(content):
            if block.get("type") != "tool_result":
                continue
            name, tool_input = self._tracked.calls.get(
                str(block.get("id")), (str(block.get("name", "")), {})
            )
            limits = self.policy.limits(name, tool_input)
            kept, view, n, n_unsaved = await self._limit_output(block.get("output"), limits, old)
            content[i] = {**block, "output": kept}  # type: ignore[typeddict-item]
            shown[i] = {**block, "output": view}  # type: ignore[typeddict-item]
            changed += n
            unsaved += n_unsaved
        return await self._update(msg, content if changed else None, shown if unsaved else None)

    async def _update(self, msg: Msg, content: list[Any] | None, shown: list[Any] | None) -> int:
        """Store a harder cut of `msg` and/or show the model a cut of what could not be saved."""
        if content is not None:
            self.memory.replace_content(msg.id, content)
        if shown is not None:
            self.memory.show(msg, shown)
        if content is not None or shown is not None:
            await self._recount(msg)
            return 1
        return 0

    async def _limit_output(
        self, output: Any, limits: Limits, old: bool
    ) -> tuple[Any, Any, int, int]:
        """(output to keep, output to show, blocks cut and saved, blocks cut unsaved)."""
        limit = limits.old if old else limits.recent
        if isinstance(output, str):
            kept, view = await self._limit_text(output, limit)
            return kept, view, int(kept != output), int(view != kept)
        if not isinstance(output, list):
            return output, output, 0, 0
        texts = [i for i, b in enumerate(output) if isinstance(b, dict) and b.get("type") == "text"]
        per_block = block_budget(limit, len(texts))
        blocks, views, changed, unsaved = list(output), list(output), 0, 0
        for i in texts:
            text = blocks[i].get("text", "")
            kept, view = await self._limit_text(text, per_block)
            blocks[i], views[i] = {**blocks[i], "text": kept}, {**blocks[i], "text": view}
            changed += kept != text
            unsaved += view != kept
        return blocks, views, changed, unsaved

    async def _limit_text(self, raw: object, limit: int) -> tuple[str, str]:
        """(text to keep, text to show): the kept text is cut only once the full text is
        saved; when saving fails it stays whole and the model is shown a marked cut."""
        text = clean_text(raw)
        if parse_notice(text) is not None:
            text = retruncate(text, max_bytes=limit)
            return text, text
        try:
            text = await offload_text(text, limit, self.store)
        except OffloadError as exc:
            self.failures.failed("tool_result", f"keeping tool output whole: {exc}")
            return text, unsaved_excerpt(text, limit)
        self.failures.recovered("tool_result")
        return text, text

    # -- compaction --------------------------------------------------------------------

    def _stalled(self, tokens: int) -> bool:
        """Loop guard: after a compaction that did not help, wait for real growth."""
        if self._stalled_at is None:
            return False
        grown = tokens - self._stalled_at
        return grown < 0.05 * self.config.max_input_tokens

    async def _compact(
        self,
        agent: Any,
        report: PipelineReport,
        extra_instruction: str | None,
        keep_ratio: float | None,
    ) -> None:
        msgs = self.memory.messages()
        counts = [self._tracked.counts[m.id] for m in msgs]
        ratio = self.config.keep_recent_ratio if keep_ratio is None else keep_ratio
        keep = int(ratio * self.config.max_input_tokens / self.scale)  # in raw estimate units
        cut = split_point(msgs, counts, keep)
        older = msgs[:cut]
        if not older:
            report.note = "nothing to compact: the newest messages form one unit"
            return
        await say(
            agent,
            f"[agentscope_ctx] compacting {len(older)} messages "
            f"({report.tokens_before} tokens, threshold {report.threshold})...",
        )
        result = await self.compactor.compact(
            self.memory.compact_summary, older, extra_instruction=extra_instruction
        )
        try:
            await self.dialog.append(older)  # write-ahead: durable before removal
        except PersistenceError as exc:
            # Nothing is removed; the older messages are only not shown, the new summary
            # standing for them, until a later compaction can save them.
            self.failures.failed("dialog", f"messages kept in memory, not saved: {exc}")
            self.memory.hide([m.id for m in older], result.summary)
            report.note = f"dialog not saved, nothing removed: {exc}"
            report.tokens_after = await self._calibrated_tokens(agent)
            await say(
                agent,
                f"[agentscope_ctx] could not save to {self.dialog.dialog_dir} ({exc}); "
                f"{len(older)} older messages are kept in memory but not shown",
            )
            return
        self.failures.recovered("dialog")
        await self.memory.delete([m.id for m in older])
        await self.memory.update_compressed_summary(result.summary)
        report.compacted = len(older)
        report.summary_source = result.source
        report.tokens_after = await self._calibrated_tokens(agent)
        self._stalled_at = (
            report.tokens_after if report.tokens_after >= report.tokens_before else None
        )
        how = result.source + (f" ({result.reason})" if result.reason else "")
        await say(
            agent,
            f"[agentscope_ctx] compacted {len(older)} messages: {report.tokens_before} -> "
            f"{report.tokens_after} tokens; summary by {how}; raw messages saved in "
            f"{self.dialog.dialog_dir}",
        )
        if self.on_compacted is not None:
            await self.on_compacted(older)

    async def _fit(self, agent: Any) -> int:
        """Last resort when the prompt is still over budget: the old (smaller) limits for
        every tool result, then offload the largest text blocks of the remaining messages."""
        shown = [m for m in self.memory.messages() if m.id not in self.memory.hidden]
        changed = 0
        for msg in shown:
            changed += await self._limit_msg(msg, old=True)
        limit = self.config.tool_result.old_max_bytes
        for msg in sorted(shown, key=lambda m: -self._tracked.counts[m.id]):
            if await self._calibrated_tokens(agent) <= self.config.max_input_tokens:
                break
            blocks: list[Any] = (
                [{"type": "text", "text": msg.content}]
                if isinstance(msg.content, str)
                else list(msg.content or [])
            )
            content, view = list(blocks), list(blocks)
            cut = unsaved = False
            for i, block in enumerate(blocks):
                if block.get("type") == "text":
                    kept, seen = await self._limit_text(block.get("text", ""), limit)
                    content[i], view[i] = {**block, "text": kept}, {**block, "text": seen}
                    cut = cut or kept != block.get("text")
                    unsaved = unsaved or seen != kept
            changed += await self._update(msg, content if cut else None, view if unsaved else None)
        return changed

    async def _summary_tokens(self) -> int:
        summary = self.memory.summary_message()
        return 0 if summary is None else await self.counter.count_msg(summary)


def unsaved_excerpt(text: str, max_bytes: int) -> str:
    """What the model is shown of an output that could not be saved: its head, and a note
    that the rest is kept in memory (not a notice: there is no file to read on from)."""
    note = (
        f"\n[agentscope_ctx: the rest of this output ({utf8_len(text)} bytes in all) is not "
        "shown: it could not be saved to disk. It is kept in memory, and saved and readable "
        "with read_file once the disk works again.]"
    )
    return head(text, max(max_bytes - utf8_len(note), 4)) + note


async def say(agent: Any, text: str) -> None:
    """Tell the user through `agent.print` (never fails the pipeline)."""
    logger.info("%s", text)
    printer = getattr(agent, "print", None)
    if printer is None:
        return
    try:
        await printer(Msg("agentscope_ctx", text, "assistant"), True)
    except Exception:  # printing is best effort
        logger.debug("agentscope_ctx: agent.print failed", exc_info=True)
