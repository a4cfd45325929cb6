"""`ContextBreakdown`: what the prompt an agent would send now is made of, part by part, as
Claude Code's ``/context`` shows it (`ContextManager.context_breakdown`, `agentscope-ctx
inspect`, the session viewer's last panel).

The parts add up to the accountant's count of the prompt (`Accountant.prompt_tokens`, the
figure `context_usage` calibrates), each message counted once, in the first part it fits:

- the system prompt and the tool schemas (what the adapter reads off the agent);
- the summary message, in three: the long-term memory note (the head of MEMORY.md), the
  carried block with the eviction index (rendered by code after the writer's summary:
  `core.summary._kept`), and the rest (the writer's summary and the guide to the dialog);
- the live messages the model is shown: the pinned ones; the outputs masked (the notice
  alone); the outputs cut (an excerpt and a notice: by the first or second truncation, a
  last-resort cut, or a ``read_file`` excerpt); and the recent messages, shown as they are.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core._pipeline import ContextPipeline
from ..core.context._memory import ContextMemory
from ..core.truncation._truncation import TRUNCATION_NOTICE_MARKER, Notice, parse_notice

__all__ = ["PART_LABELS", "ContextBreakdown", "breakdown_of"]

MASK_BYTES = 4
"""The longest excerpt of a masked output (`core.ladder._cuts`): the notice alone, with a
character or so."""

PART_LABELS: Mapping[str, str] = {
    "system_prompt": "system prompt",
    "tool_schemas": "tool schemas",
    "long_term_memory": "long-term memory note",
    "summary": "summary",
    "carried": "carried block and eviction index",
    "pinned": "pinned messages",
    "recent": "recent messages",
    "cut_outputs": "cut outputs",
    "masked_outputs": "masked outputs",
}
"""Each part's name, in the order the prompt holds them (the messages' parts interleave)."""

MESSAGE_PARTS = ("pinned", "recent", "cut_outputs", "masked_outputs")


@dataclass(frozen=True)
class ContextBreakdown:
    """Where the tokens of the prompt an agent would send now go (see the module
    docstring). Parts are the context manager's count; the free figures are measured as the
    trigger and the budget are, on the calibrated total."""

    system_prompt: int
    """The agent's system prompt."""
    tool_schemas: int
    """The JSON schemas of its tools."""
    long_term_memory: int
    """The head of MEMORY.md shown with the summary (0: none, or left out for room)."""
    summary: int
    """The writer's summary of what compactions moved out, and the guide to the dialog."""
    carried: int
    """What compaction carries by code after the summary: the user's words, the artifact
    trail and the eviction index."""
    pinned: int
    """Pinned messages (never masked, cut harder or compacted)."""
    recent: int
    """The other live messages, shown as they are."""
    cut_outputs: int
    """Messages the model is shown cut: an excerpt and a notice naming the saved whole."""
    masked_outputs: int
    """Tool outputs masked: the notice alone."""
    scale: float
    """The calibration: how many tokens the provider counts for each of ours (with a margin)."""
    threshold: int
    """The compaction trigger (`compact_trigger_ratio` of the budget), in calibrated tokens."""
    budget: int
    """The effective input budget, in calibrated tokens."""
    messages: Mapping[str, int] = field(default_factory=dict)
    """How many messages each of ``pinned``, ``recent``, ``cut_outputs`` and
    ``masked_outputs`` holds."""

    @property
    def total(self) -> int:
        """All parts: the context manager's count of the prompt."""
        return sum(getattr(self, name) for name in PART_LABELS)

    @property
    def calibrated_total(self) -> int:
        """`total` as the provider would count it (what the trigger and budget compare)."""
        return math.ceil(self.total * self.scale)

    @property
    def free_below_trigger(self) -> int:
        """Tokens left before the next model call compacts (0 when over the trigger)."""
        return max(0, self.threshold - self.calibrated_total)

    @property
    def free_below_budget(self) -> int:
        """Tokens left in the budget (0 when at or over it)."""
        return max(0, self.budget - self.calibrated_total)

    def parts(self) -> list[tuple[str, str, int]]:
        """Each part as (name, label, tokens), in `PART_LABELS`' order."""
        return [(name, label, getattr(self, name)) for name, label in PART_LABELS.items()]

    def to_dict(self) -> dict[str, Any]:
        """The breakdown as JSON data (the usage record's and the steps record's
        ``context``; `from_dict` reads it back)."""
        return {
            "parts": {name: tokens for name, _, tokens in self.parts()},
            "messages": dict(self.messages),
            "total": self.total,
            "calibrated_total": self.calibrated_total,
            "scale": self.scale,
            "threshold": self.threshold,
            "budget": self.budget,
            "free_below_trigger": self.free_below_trigger,
            "free_below_budget": self.free_below_budget,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContextBreakdown:
        """What `to_dict` wrote (a part missing reads as 0).

        Raises:
            ValueError: `data` is not such a record.
        """
        try:
            parts = data.get("parts") or {}
            counts = data.get("messages") or {}
            part = {name: int(parts.get(name, 0)) for name in PART_LABELS}
            return cls(
                system_prompt=part["system_prompt"],
                tool_schemas=part["tool_schemas"],
                long_term_memory=part["long_term_memory"],
                summary=part["summary"],
                carried=part["carried"],
                pinned=part["pinned"],
                recent=part["recent"],
                cut_outputs=part["cut_outputs"],
                masked_outputs=part["masked_outputs"],
                scale=float(data["scale"]),
                threshold=int(data["threshold"]),
                budget=int(data["budget"]),
                messages={name: int(counts.get(name, 0)) for name in MESSAGE_PARTS},
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a context breakdown: {data!r:.120}") from exc


async def breakdown_of(pipeline: ContextPipeline, memory: ContextMemory) -> ContextBreakdown:
    """The breakdown of the prompt `pipeline`'s agent would send now (as counted last:
    call `ContextPipeline.prepare` first for the cuts the next call would make)."""
    accountant = pipeline.accountant
    ledger = await accountant.sync()
    whole = await accountant.breakdown()
    note, carried = await _summary_parts(memory, accountant.counter.count_text)
    if note + carried > whole["summary"]:  # (counted apart, a piece may count a token more)
        note = min(note, whole["summary"])
        carried = whole["summary"] - note
    tokens = dict.fromkeys(MESSAGE_PARTS, 0)
    counts = dict.fromkeys(MESSAGE_PARTS, 0)
    for msg in memory.messages():
        if msg.id in memory.hidden:
            continue
        part = _part_of(memory, msg, msg.id in ledger.pinned)
        tokens[part] += ledger.counts.get(msg.id, 0)
        counts[part] += 1
    return ContextBreakdown(
        system_prompt=whole["system_prompt"],
        tool_schemas=whole["tool_schemas"],
        long_term_memory=note,
        summary=whole["summary"] - note - carried,
        carried=carried,
        pinned=tokens["pinned"],
        recent=tokens["recent"],
        cut_outputs=tokens["cut_outputs"],
        masked_outputs=tokens["masked_outputs"],
        scale=pipeline.scale,
        threshold=pipeline.threshold,
        budget=pipeline.calibration.budget,
        messages=counts,
    )


async def _summary_parts(
    memory: ContextMemory, count: Callable[[str], Awaitable[int]]
) -> tuple[int, int]:
    """The tokens of the long-term note and of the carried block in the summary message as
    the model is shown it (0 for a part it does not hold whole)."""
    msg = memory.summary_message()
    if msg is None:
        return 0, 0
    text = msg.content if isinstance(msg.content, str) else str(msg.get_text_content() or "")
    note = 0
    if memory.long_term_note:
        block = f"<long_term_memory>\n{memory.long_term_note}\n</long_term_memory>"
        note = await count(block) if block in text else 0
    kept = memory.kept
    carried = 0
    if kept is not None and kept.tail and kept.writer(memory.summary_text()) is not None:
        carried = await count(kept.tail) if kept.tail in text else 0
    return note, carried


def _part_of(memory: ContextMemory, msg: Any, pinned: bool) -> str:
    """The message part `msg` is counted in (`MESSAGE_PARTS`), by what the model is shown of
    it: its notices (a message a cut was planned for but left as it was, a tool call with
    short arguments, stays recent)."""
    if pinned:
        return "pinned"
    if msg.id in memory.views:  # a marked cut of an output the store could not save yet
        return "cut_outputs"
    notices = list(_notices(memory.shown(msg).content))
    if notices and all(n.n_bytes <= MASK_BYTES for n in notices):
        return "masked_outputs"
    return "cut_outputs" if notices else "recent"


def _notices(value: object) -> Iterator[Notice]:
    """Every genuine notice ending a string anywhere in a message's content."""
    if isinstance(value, str):
        parsed = parse_notice(value) if TRUNCATION_NOTICE_MARKER in value else None
        if parsed is not None:
            yield parsed[1]
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _notices(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _notices(item)
