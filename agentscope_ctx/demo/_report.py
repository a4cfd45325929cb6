"""`DemoReport`: what a demo run did, in numbers and as a few aligned lines of text.

Besides the totals, the report lists the *rungs* of the run, in order, each with the step it
happened at (or after) and what it did: the first truncation of an output and the file that
holds it whole, a continuation read and whether it returned the saved file's next bytes, each
relief of the ladder's cheap rungs (second truncation, masking), each compaction (who wrote
the summary, the messages moved and the `dialog/` file they went to), each `search_history`
call and where its best hit was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DemoReport", "Rung", "RungKind"]


class RungKind:
    """The kinds of rung (a `Rung`'s `kind`), as the report and the chart name them."""

    FIRST_TRUNCATION = "first truncation"
    CONTINUATION_READ = "continuation read"
    SECOND_TRUNCATION = "second truncation"
    MASKING = "masking"
    COMPACTION = "model compaction"
    """A compaction whose summary the (compactor) model wrote."""
    EXTRACTIVE_COMPACTION = "extractive compaction"
    """A compaction whose summary the deterministic fallback wrote."""
    SEARCH_HIT = "search_history hit"
    SEARCH_MISS = "search_history miss"
    ALL = (
        FIRST_TRUNCATION,
        CONTINUATION_READ,
        SECOND_TRUNCATION,
        MASKING,
        COMPACTION,
        EXTRACTIVE_COMPACTION,
        SEARCH_HIT,
        SEARCH_MISS,
    )
    """Every kind above."""


@dataclass(frozen=True)
class Rung:
    """One rung of the run: what the package did, when, and to what."""

    kind: str
    """One of `RungKind`'s kinds."""
    step: int
    """The step (model call) it happened at, or after (see `after`)."""
    after: bool
    """True: between `step` and the next one (the context manager's rungs); False: at
    `step` (a tool call of the model)."""
    detail: str
    """One line saying what it did."""
    tokens_before: int | None = None
    tokens_after: int | None = None
    """The prompt before and after, by the context manager's estimate (ladder rungs)."""
    file: str | None = None
    """The file it wrote or read, relative to the working dir."""
    line: int | None = None
    """Where in `file`: the line a continuation read started at, a search's best hit."""
    text: str | None = None
    """What a continuation read returned (its excerpt, without its own notice)."""
    ok: bool = True
    """False when it did not do what it should (a read that did not continue the saved
    output, a search without hits)."""

    @property
    def at(self) -> float:
        """Its place on the step axis (after step n: n + 0.5)."""
        return self.step + 0.5 if self.after else float(self.step)

    def when(self) -> str:
        return f"{'after step' if self.after else 'step'} {self.step}"


@dataclass
class DemoReport:
    """The numbers a demo run ends with. Steps are model calls, numbered from 1; a prompt the
    provider rejected is a step too (it was sent)."""

    name: str
    working_dir: Path
    budget: int
    """`max_input_tokens`."""
    threshold: int
    """Tokens at which compaction triggers."""
    prompt_tokens: list[int] = field(default_factory=list)
    """Our count of each prompt sent to the model, in order (one per model call)."""
    provider_tokens: list[int | None] = field(default_factory=list)
    """The provider's count of each prompt (its reported usage), where it gave one."""
    provider_cached: list[int | None] = field(default_factory=list)
    """The part of each the provider read from its prompt cache, where it said so."""
    rejected: dict[int, str] = field(default_factory=dict)
    """Steps whose prompt the provider refused, with its reason."""
    retries: list[int] = field(default_factory=list)
    """Steps that retried a prompt refused as too long, after an emergency compaction."""
    compaction_steps: list[int] = field(default_factory=list)
    """For each compaction: how many model calls had happened before it."""
    relief_steps: list[int] = field(default_factory=list)
    """For each time the cheap rungs of the ladder (harder cuts, masking) brought the prompt
    back under the trigger without a model call: how many model calls had happened before."""
    continuation_reads: int = 0
    first_truncations: int = 0
    second_truncations: int = 0
    bytes_offloaded: int = 0
    """Total size of `tool_result/`."""
    offloaded_files: int = 0
    files_written: int = 0
    dialog_messages: int = 0
    chart: Path | None = None
    text_file: Path | None = None
    """Where this report is written as text (``report.txt`` beside the chart)."""
    viewer: Path | None = None
    """The session viewer page of the run (`agentscope-ctx view`)."""
    answer: str = ""
    """The agent's last answer."""
    answers: list[str] = field(default_factory=list)
    """Its answer to each user turn, in order."""
    rungs: list[Rung] = field(default_factory=list)
    """What the package did, in order (see the module docstring)."""
    counter: str = ""
    """How we counted the prompts (the token counter's backend, e.g. tiktoken:o200k_base)."""
    first_cuts: list[tuple[int, str, int | None, int]] = field(default_factory=list)
    """Each output cut as it entered the context: (the step whose prompt first held it, its
    tool, its original size in bytes (`None`: unknown), the bytes shown)."""
    context_now: int | None = None
    """The context manager's estimate of the agent's context at the end (what
    `agentscope-ctx inspect` shows), `None` when it left none."""

    def of(self, *kinds: str) -> list[Rung]:
        """The rungs of these kinds, in order."""
        return [rung for rung in self.rungs if rung.kind in kinds]

    @property
    def steps(self) -> int:
        """Model calls."""
        return len(self.prompt_tokens)

    @property
    def peak(self) -> int:
        """The largest prompt sent, in tokens, by our count (rejected prompts included)."""
        return max(self.prompt_tokens, default=0)

    @property
    def provider_peak(self) -> int | None:
        """The largest prompt the provider counted (`None` without usage data)."""
        return max((n for n in self.provider_tokens if n is not None), default=None)

    @property
    def compactions(self) -> int:
        return len(self.compaction_steps)

    @property
    def emergency_compactions(self) -> list[int]:
        """Compactions run right after the provider refused a prompt (their step)."""
        return [at for at in self.compaction_steps if at in self.rejected]

    def render(self) -> str:
        """The report as a few aligned lines."""
        ok = "within" if self.peak <= self.budget else "OVER"
        counted = (
            f"our count ({self.counter}) of the request as sent"
            if self.counter
            else ("our count of what was sent")
        )
        steps = f"{self.steps}"
        if self.rejected:
            steps += f" ({len(self.rejected)} rejected by the provider)"
        rows = [
            ("steps (model calls)", steps),
            (
                "peak prompt",
                f"{self.peak:,} tokens of {self.budget:,} budget "
                f"({self.peak / self.budget:.0%}, {ok} budget; {counted})",
            ),
        ]
        if self.provider_peak is not None:
            reported = sum(n is not None for n in self.provider_tokens)
            rows.append(
                (
                    "provider counted",
                    f"peak {self.provider_peak:,} tokens ({self.provider_peak / self.budget:.0%}"
                    f" of the budget; usage reported for {reported} of {self.steps} steps)",
                )
            )
        cached = [
            (tokens, read)
            for tokens, read in zip(self.provider_tokens, self.provider_cached, strict=False)
            if tokens is not None and read is not None
        ]
        if cached:
            total, read = sum(t for t, _ in cached), sum(r for _, r in cached)
            rows.append(
                (
                    "provider cache",
                    f"{read:,} of {total:,} prompt tokens read from the cache ({read / total:.0%}"
                    f", billed at about a tenth; reported for {len(cached)} steps)",
                )
            )
        for step, reason in sorted(self.rejected.items()):
            then = (
                f"; retried as step {step + 1} after an emergency compaction"
                if step + 1 in self.retries
                else ""
            )
            rows.append(("rejected step", f"step {step}: {reason}{then}"))
        compactions = f"{self.compactions} (after steps {_list(self.compaction_steps)})"
        if self.emergency_compactions:
            compactions += f"; emergency after step {_list(self.emergency_compactions)}"
        rows += [
            (
                "ladder reliefs",
                f"{len(self.relief_steps)} without a model call (after steps "
                f"{_list(self.relief_steps)})",
            ),
            ("compactions", compactions),
            ("messages in dialog/", f"{self.dialog_messages}"),
            (
                "truncations seen",
                f"{self.first_truncations} first, {self.second_truncations} second (harder)",
            ),
            ("continuation reads", f"{self.continuation_reads} (read_file following a notice)"),
            (
                "bytes offloaded",
                f"{self.bytes_offloaded:,} bytes in {self.offloaded_files} tool_result/ files",
            ),
            ("files written", f"{self.files_written} under {self.working_dir}"),
        ]
        if self.context_now is not None:
            rows.append(
                (
                    "context at the end",
                    f"{self.context_now:,} tokens by the context manager's estimate (messages "
                    "before formatting, the final answer included: the figure `agentscope-ctx "
                    "inspect` shows)",
                )
            )
        rows.append(("chart", str(self.chart) if self.chart else "-"))
        rows.append(("this report", str(self.text_file) if self.text_file else "-"))
        if self.viewer is not None:
            rows.append(("viewer page", f"{self.viewer} (open it in a browser)"))
        width = max(len(key) for key, _ in rows)
        lines = [f"=== report: demo {self.name!r} ==="]
        lines += [f"  {key:<{width}}  {value}" for key, value in rows]
        if self.rungs:
            lines.append(
                "  rungs, in order (tokens before -> after: the context manager's estimate):"
            )
            when = max(len(rung.when()) for rung in self.rungs)
            kind = max(len(rung.kind) for rung in self.rungs)
            for rung in self.rungs:
                mark = "" if rung.ok else "  [!]"
                lines.append(f"    {rung.when():<{when}}  {rung.kind:<{kind}}  {rung.detail}{mark}")
        return "\n".join(lines)


def _list(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values) or "-"
