"""`Accountant`: the one place where the prompt's tokens are counted, for the pipeline's
stages and for `ContextManager.context_usage` alike.

The prompt is the system prompt and tool schemas (`PromptParts`, plain data the adapter
reads off its agent), the summary message, and the live messages as the model is shown them.
Counting is incremental: per-message counts are kept in a `Ledger`, and while the memory only
grows by appends, a sync looks only at the new messages.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._entry import Msg
from ..context._memory import ContextMemory
from ..context._pins import is_pinned
from ..tokens._calibration import Calibration
from ..tokens._tokens import TokenCounter

__all__ = ["Accountant", "Ledger", "PromptParts"]


@dataclass(frozen=True)
class PromptParts:
    """The parts of the prompt that are not in memory, as plain data."""

    system_prompt: str = ""
    tool_schemas: Sequence[Mapping[str, Any]] = ()


@dataclass
class Ledger:
    """Per-message counts of the live messages, and what the stages have looked at. Made
    anew when the memory changes other than by appends."""

    revision: int = -1
    seen: int = 0
    last_id: str | None = None
    tokens: int = 0
    """Tokens of the shown messages (hidden ones, compacted but not saved, excluded)."""
    counts: dict[str, int] = field(default_factory=dict)
    msgs: dict[str, Msg] = field(default_factory=dict)
    tool_msgs: list[str] = field(default_factory=list)
    """Ids of the messages holding tool calls or results, oldest first."""
    results: set[str] = field(default_factory=set)
    """The ids in `tool_msgs` of messages holding tool results."""
    calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Tool calls by id: (tool name, arguments)."""
    pinned: set[str] = field(default_factory=set)
    """The ids of the messages carrying the pin mark (kept by `sync` and the pin calls), so
    that a run without pins does not look at every message for one."""
    recent_upto: int = 0
    """`tool_msgs[:recent_upto]` have had the first-truncation check."""
    old_upto: int = 0
    """`tool_msgs[:old_upto]` have been planned for the second truncation."""
    mask_upto: int = 0
    """`tool_msgs[:mask_upto]` have been planned for masking."""


class Accountant:
    """Counts the prompt one agent would send now.

    Args:
        memory: the agent's memory.
        counter: the token counter.
        calibration: the provider's view of our counts (`scale`) and the budget.
        prompt_parts: the fixed parts of the prompt, read at each count.
        on_reset: called with the live ids when the ledger is made anew.
    """

    def __init__(
        self,
        memory: ContextMemory,
        counter: TokenCounter,
        calibration: Calibration,
        prompt_parts: Callable[[], PromptParts],
        on_reset: Callable[[Iterable[str]], None] | None = None,
    ) -> None:
        self.memory = memory
        self.counter = counter
        self.calibration = calibration
        self.prompt_parts = prompt_parts
        self.on_reset = on_reset
        self.ledger = Ledger()
        self._fixed_cache: dict[int, int] = {}

    async def sync(self) -> Ledger:
        """Bring the ledger up to date with the memory, incrementally if possible."""
        content = self.memory.content
        t = self.ledger
        appended_only = (
            t.revision == self.memory.revision
            and len(content) >= t.seen
            and (t.seen == 0 or content[t.seen - 1][0].id == t.last_id)
        )
        if not appended_only:
            self.ledger = t = Ledger(revision=self.memory.revision)
            if self.on_reset is not None:
                self.on_reset(msg.id for msg, _ in content)
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
            if is_pinned(msg):
                t.pinned.add(msg.id)
            if kinds & {"tool_use", "tool_result"}:
                t.tool_msgs.append(msg.id)
            if "tool_result" in kinds:
                t.results.add(msg.id)
        t.seen = len(content)
        t.last_id = content[-1][0].id if content else None
        return t

    async def recount(self, msg: Msg) -> None:
        """Count `msg` again after a stage changed it (or what the model is shown of it)."""
        t = self.ledger
        count = await self.counter.count_msg(self.memory.shown(msg))
        if msg.id not in self.memory.hidden:
            t.tokens += count - t.counts.get(msg.id, 0)
        t.counts[msg.id] = count

    async def prompt_tokens(self) -> int:
        """Our estimate of the prompt the agent would send now."""
        await self.sync()
        return await self.fixed_tokens() + await self.summary_tokens() + self.ledger.tokens

    async def calibrated(self) -> int:
        """`prompt_tokens` as the provider would count it (with a safety margin)."""
        return math.ceil(await self.prompt_tokens() * self.calibration.scale)

    async def fixed_tokens(self) -> int:
        """Tokens of the system prompt plus the tool schemas."""
        fixed = self.prompt_parts()
        return await self._text_tokens(fixed.system_prompt) + await self._schema_tokens(fixed)

    async def summary_tokens(self) -> int:
        summary = self.memory.summary_message()
        return 0 if summary is None else await self.counter.count_msg(summary)

    async def breakdown(self) -> dict[str, int]:
        """Where the prompt's tokens go (raw estimate): ``system_prompt``, ``tool_schemas``,
        ``summary``, ``messages`` (the shown live messages) and ``tool_results`` (the part of
        ``messages`` in tool-result messages). The parts other than ``tool_results`` add up
        to `prompt_tokens`."""
        t = await self.sync()
        fixed = self.prompt_parts()
        shown = [m.id for m in self.memory.messages() if m.id not in self.memory.hidden]
        return {
            "system_prompt": await self._text_tokens(fixed.system_prompt),
            "tool_schemas": await self._schema_tokens(fixed),
            "summary": await self.summary_tokens(),
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
