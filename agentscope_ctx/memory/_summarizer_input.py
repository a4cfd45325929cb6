"""What the Summarizer's model is shown of the messages leaving the context.

The Summarizer looks for facts, preferences and try-error lessons, not for logs. So
`bounded_transcript` renders the evicted messages with every tool output reduced to its first
and last few lines (the truncation notice dropped: the full output stays in ``tool_result/``
and ``dialog/``), tool-call arguments and long texts shortened in their middle, and the whole
within a token cap. Messages that do not fit at the gentlest `Level` are rendered at harsher
ones; at the harshest, the oldest are left out (the newest are kept, as the compactor's
summary already holds what came before). `batch_sizes` gives the numbers the batching of
`SummarizerQueue` goes by.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..core._entry import Msg
from ..core.summary._extractive import _blocks, _result_text, msg_text
from ..core.summary._outcome import ERROR_LINE as _ERROR
from ..core.tokens._tokens import TokenCounter
from ..core.truncation._truncation import TRUNCATION_NOTICE_MARKER

__all__ = ["LEVELS", "Level", "batch_sizes", "bounded_transcript", "render_entry"]

_SEP = "\n\n"
_LEFT_OUT = "[... {n} older message(s) left out]"


@dataclass(frozen=True)
class Level:
    """How much of each message the transcript shows."""

    head_lines: int
    """First lines of a tool output shown."""
    tail_lines: int
    """Last lines of a tool output shown (errors and results tend to come last)."""
    error_lines: int
    """Lines between those that report an error (``E   ValueError: ...``, ``error:``...)
    shown too, the first ones."""
    line_chars: int
    """Longest tool output line shown."""
    arg_chars: int
    """Longest string in tool-call arguments (and about half the longest arguments)."""
    text_chars: int
    """Longest text block shown."""
    entry_chars: int
    """Longest message shown, all blocks together."""


LEVELS = (
    # head, tail and error lines, line, argument, text and message characters
    Level(4, 4, 4, 200, 200, 4_000, 6_000),
    Level(2, 2, 1, 160, 120, 1_500, 2_500),
    Level(0, 0, 0, 0, 60, 600, 1_000),  # tool outputs: their size only
)
"""From the gentlest to the harshest."""


def _clip(text: str, limit: int) -> str:
    """`text` with its middle left out when longer than `limit` characters."""
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 2)  # room for the marker
    first, last = keep // 2, keep - keep // 2
    return f"{text[:first]} [... {len(text) - keep} characters left out] {text[-last:]}"


def _shorten(value: object, limit: int) -> object:
    """`value` (tool-call arguments) with every string in it clipped to `limit`."""
    if isinstance(value, str):
        return _clip(value, limit)
    if isinstance(value, dict):
        return {str(k): _shorten(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shorten(v, limit) for v in value]
    return value


def _args(raw: object, limit: int) -> str:
    try:
        text = json.dumps(_shorten(raw, limit), ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = str(raw)
    return _clip(text, 2 * limit)


def _output(name: object, output: object, level: Level) -> str:
    """A tool output: its size, its first and last lines and the error lines between."""
    body = _result_text(output)
    cut = body.find(TRUNCATION_NOTICE_MARKER)
    if cut >= 0:
        body = body[:cut].rstrip("\n")
    lines = body.splitlines()
    n = len(lines)
    where = ", cut: the full output is saved" if cut >= 0 else ""
    head = f"<- result of {name} ({n} lines shown to the agent{where})"
    if level.head_lines + level.tail_lines == 0:
        return head
    head_end = min(level.head_lines, n)
    tail_start = max(n - level.tail_lines, head_end)
    errors = [i for i in range(head_end, tail_start) if _ERROR.match(lines[i].lstrip())]
    shown = [head + ":"]
    last = -1
    for i in [*range(head_end), *errors[: level.error_lines], *range(tail_start, n), n]:
        if i - last == 2:  # one line left out takes no less room than its marker
            shown.append(_clip(lines[i - 1], level.line_chars))
        elif i - last > 2:
            shown.append(f"[... {i - last - 1} lines left out]")
        if i < n:
            shown.append(_clip(lines[i], level.line_chars))
        last = i
    return "\n".join(shown)


def render_entry(msg: Msg, level: Level = LEVELS[0]) -> str:
    """One message of the transcript: role and name, texts, tool calls, shortened outputs."""
    lines = [f"[{msg.role} {msg.name}]"]
    for block in _blocks(msg):
        kind = block.get("type")
        if kind == "text":
            lines.append(_clip(str(block.get("text", "")), level.text_chars))
        elif kind == "tool_use":
            lines.append(
                f"-> call {block.get('name')} {_args(block.get('input', {}), level.arg_chars)}"
            )
        elif kind == "tool_result":
            lines.append(_output(block.get("name"), block.get("output"), level))
        elif kind != "thinking":
            lines.append(f"[{kind}]")
    return _clip("\n".join(lines), level.entry_chars)


async def batch_sizes(messages: Sequence[Msg], counter: TokenCounter) -> tuple[int, int]:
    """Tokens of `messages`' conversation (their text blocks: no tool calls, no tool output),
    and of their transcript at the harshest level (separators included)."""
    conversation = harshest = 0
    for msg in messages:
        words = msg_text(msg)
        conversation += await counter.count_text(words) if words.strip() else 0
        harshest += await counter.count_text(render_entry(msg, LEVELS[-1]) + _SEP)
    return conversation, harshest


async def bounded_transcript(
    messages: Sequence[Msg], counter: TokenCounter, max_tokens: int
) -> str:
    """The transcript of `messages` (oldest first) at the gentlest level that fits
    `max_tokens`; at the harshest, the newest messages that fit and a line saying how many
    older ones were left out. The newest message alone is clipped to fit if need be."""
    entries: list[str] = []
    counts: list[int] = []
    for level in LEVELS:
        entries = [render_entry(msg, level) for msg in messages]
        counts = [await counter.count_text(entry + _SEP) for entry in entries]
        if sum(counts) <= max_tokens:
            text = _SEP.join(entries)
            if await counter.count_text(text) <= max_tokens:
                return text
    # Still over at the harshest level: the newest messages that fit.
    start = len(entries)
    total = await counter.count_text(_LEFT_OUT.format(n=start) + _SEP)
    while start > 0 and total + counts[start - 1] <= max_tokens:
        start -= 1
        total += counts[start]
    start = min(start, len(entries) - 1)  # the newest is always shown, clipped if need be
    while True:
        text = _SEP.join(([_LEFT_OUT.format(n=start)] if start else []) + entries[start:])
        size = await counter.count_text(text)
        if size <= max_tokens or not entries[-1]:
            return text if size <= max_tokens else ""
        if start < len(entries) - 1:
            start += 1
        else:
            newest = entries[-1]
            entries[-1] = newest[: len(newest) * max_tokens // (size + 1)]
