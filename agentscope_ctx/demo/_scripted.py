"""`Script`: the offline "LLM" of the demos, which replays a plan of tool calls.

The demos must run without a network or an API key, so the "LLM" is a script, played by a
chat model of the installed AgentScope line (1.x: `demo._line1.ScriptedModel`; 2.x:
`agentscope_ctx._v2._demo.ScriptedChatModel`). It is not a canned transcript, though: each
step of the plan is a function of what the agent just saw (the last tool result in the prompt
it received), so it can follow a truncation notice with `read_file` at the hinted
`start_line`, or pick a line number out of a `grep` result.

What a real model would have received is measured by `PromptStats` (in `_stats`): the token
count of every prompt, the notices seen and cut harder, the continuation reads and searches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.truncation._truncation import Notice, parse_notice
from ..models._guard import is_context_overflow
from ._stats import PromptStats

__all__ = [
    "Move",
    "Observation",
    "Prompt",
    "PromptStats",
    "Schemas",
    "Script",
    "Step",
    "describe",
    "describe_rejection",
    "rejection_reason",
    "say",
]

Prompt = list[dict[str, Any]]
"""A formatted prompt, as a provider receives it (OpenAI-style messages)."""

Schemas = list[dict[str, Any]] | None
"""The tool schemas sent with a prompt (`None`: no tools)."""


@dataclass
class Observation:
    """What the scripted model looks at before choosing its next move."""

    step: int
    """Model calls so far, this one included (1-based)."""
    last_tool_text: str
    """Text of the newest tool result in the prompt ("" when there is none)."""

    @property
    def notice(self) -> Notice | None:
        """The truncation notice ending the last tool result, if any."""
        parsed = parse_notice(self.last_tool_text)
        return None if parsed is None else parsed[1]

    def find(self, pattern: str, default: str = "") -> str:
        """First group (or whole match) of `pattern` in the last tool result."""
        match = re.search(pattern, self.last_tool_text, re.M)
        if match is None:
            return default
        return match.group(1) if match.groups() else match.group(0)


@dataclass
class Move:
    """One answer of the model: a tool call, or a final text."""

    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    """The final answer; with a tool call, what the model says before it (its reasoning)."""
    continuation: bool = False
    """Set by the model: this call follows a truncation notice's hint."""


Step = Callable[[Observation], Move]
"""A step of a plan: looks at the observation, returns the next move."""


def call(tool: str, **arguments: Any) -> Move:
    """A move that calls `tool`."""
    return Move(tool=tool, arguments=arguments)


def answer(text: str) -> Move:
    """A move that ends the reply with `text`."""
    return Move(text=text)


def say(text: str, move: Move) -> Move:
    """`move` (a tool call), with `text` said before it, as models explain their next call."""
    move.text = text
    return move


def follow(obs: Observation, fallback: Move) -> Move:
    """`read_file` at the continuation the last notice hints at; `fallback` without one."""
    notice = obs.notice
    if notice is None:
        return fallback
    args: dict[str, Any] = {"file_path": notice.file_path, "start_line": notice.next.line}
    if notice.next.offset:
        args["line_offset"] = notice.next.offset
    return Move(tool="read_file", arguments=args)


class Script:
    """Plays `turns`: one list of steps per user turn; each step gives one model answer.

    Args:
        turns: the plan. A turn's last step should `answer`; when a turn's steps run out,
            the model answers "Done." so that the reply ends.
        stats: counts each prompt received and watches its notices.
        on_step: called with a one-line description of each move (progress output).
    """

    def __init__(
        self,
        turns: Sequence[Sequence[Step]],
        *,
        stats: PromptStats,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        self.turns = [list(turn) for turn in turns]
        self.stats = stats
        self.on_step = on_step
        self._turn = 0
        self._index = 0

    def next_turn(self) -> None:
        """Move on to the next turn of the plan (call before each user message)."""
        if self._index:
            self._turn += 1
        self._index = 0

    async def play(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None
    ) -> tuple[int, int, Move]:
        """Count a formatted prompt (OpenAI style) and choose the next move.

        Returns:
            The step (model calls so far, from 1), the prompt's tokens, and the move.
        """
        tokens, texts = await self.stats.observe(messages, tools)
        step = len(self.stats.prompt_tokens)
        obs = Observation(step=step, last_tool_text=texts[-1] if texts else "")
        turn = self.turns[self._turn] if self._turn < len(self.turns) else []
        if self._index < len(turn):
            move = turn[self._index](obs)
            self._index += 1
        else:
            move = answer("Done.")
        if move.tool is not None:
            move.continuation = self.stats.note_call(move.tool, move.arguments)
        if self.on_step is not None:
            self.on_step(describe(step, tokens, move))
        return step, tokens, move


def describe(
    step: int, tokens: int, move: Move, *, provider: int | None = None, retry: bool = False
) -> str:
    """One progress line for a model answer; `provider` is the provider's count of the
    prompt, `retry` marks the retry of a prompt the provider refused."""
    head = f"  step {step:2d} | prompt {tokens:6,d} tok"
    if provider is not None:
        head += f" (provider {provider:,})"
    tag = "  (retry after an emergency compaction)" if retry else ""
    if move.tool is None:
        first = move.text.strip().splitlines()[0] if move.text.strip() else ""
        return f"{head} | answer: {first[:70]}{tag}"
    args = ", ".join(f"{k}={v!r}" for k, v in move.arguments.items())
    tag = ("  (continuation)" if move.continuation else "") + tag
    line = f"{head} | {move.tool}({args})"
    if len(line) > 110:
        line = line[:107] + "..."
    return line + tag


_REASON_CHARS = 160


def rejection_reason(exc: BaseException) -> str:
    """One line saying why the provider refused a prompt."""
    kind = "prompt too long" if is_context_overflow(exc) else type(exc).__name__
    text = " ".join(str(exc).split()) or repr(exc)
    if len(text) > _REASON_CHARS:
        text = text[: _REASON_CHARS - 3] + "..."
    return f"{kind}: {text}"


def describe_rejection(step: int, tokens: int, reason: str, *, sent: bool = True) -> str:
    """The progress line of a prompt the provider refused (`sent`), or that never reached it
    (the server could not be reached: `reason` names its URL)."""
    what = "REJECTED by the provider" if sent else "NOT SENT"
    return f"  step {step:2d} | prompt {tokens:6,d} tok | {what}: {reason}"
