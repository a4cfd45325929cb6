"""Checks of the cost benchmark: nothing lost, and every byte reachable through the notices.

The notice is read from its public wording (DESIGN.md §4): its last line names the file and
the position to continue from, its fourth line where the excerpt starts. A chain is followed
with the manager's `read_file` until an excerpt comes without a notice; the concatenated
excerpts must equal the tool's original output from the excerpt's start on.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentscope_ctx import TRUNCATION_NOTICE_MARKER
from agentscope_ctx.core._entry import Msg
from benchmarks.cost.session import Step, user_task

Reader = Callable[[str, int, int], Awaitable[Any]]
"""The manager's `read_file`: a `ToolResponse` of 1.x (dict blocks) or 2.x (pydantic)."""

_HINT_RE = re.compile(
    r"call `read_file` with file_path=(?P<path>[^\n]+) start_line=(?P<line>\d+)"
    r"(?: line_offset=(?P<offset>\d+))? to read more\.\Z"
)
_START_RE = re.compile(
    r"This excerpt starts at line (?P<line>\d+)(?:, character (?P<offset>\d+),)?"
)
_MAX_READS = 100_000


@dataclass(frozen=True)
class Cut:
    """A truncated output: its excerpt and what its notice says."""

    excerpt: str
    start: tuple[int, int]
    file_path: str
    next: tuple[int, int]


def parse_cut(text: str) -> Cut | None:
    """The excerpt and notice of `text`, or `None` when it does not end with a notice."""
    at = text.rfind(TRUNCATION_NOTICE_MARKER + "\n")
    if at < 0 or (at > 0 and text[at - 1] != "\n"):
        return None
    notice = text[at:]
    hint, start = _HINT_RE.search(notice), _START_RE.search(notice)
    if hint is None or start is None:
        return None
    return Cut(
        excerpt=text[: max(at - 1, 0)],
        start=(int(start["line"]), int(start["offset"] or 0)),
        file_path=hint["path"],
        next=(int(hint["line"]), int(hint["offset"] or 0)),
    )


def output_text(block: dict[str, Any]) -> str:
    """The text of a tool_result block."""
    output = block.get("output")
    if isinstance(output, str):
        return output
    return "".join(b.get("text", "") for b in output or [] if isinstance(b, dict))


def suffix_from(text: str, line: int, offset: int) -> str:
    """`text` from 1-based `line`, `offset` characters in."""
    at = 0
    for _ in range(line - 1):
        at = text.index("\n", at) + 1
    return text[at + offset :]


async def follow(text: str, read: Reader) -> tuple[str | None, tuple[int, int], str | None]:
    """Follow the notices from `text`: (the text they give back, where it starts, problem)."""
    cut = parse_cut(text)
    if cut is None:
        return text, (1, 0), None
    if not Path(cut.file_path).is_file():
        return None, cut.start, f"the notice points to a missing file {cut.file_path}"
    parts, position = [cut.excerpt], cut.next
    for _ in range(_MAX_READS):
        response = await read(cut.file_path, *position)
        chunk = response_text(response)
        if chunk.startswith("Error:"):
            return None, cut.start, chunk[:200]
        more = parse_cut(chunk)
        if more is None:
            parts.append(chunk)
            return "".join(parts), cut.start, None
        parts.append(more.excerpt)
        position = more.next
    return None, cut.start, "the chain does not end"


def response_text(response: Any) -> str:
    """The text of a tool's response, on either line."""
    parts = []
    for block in response.content:
        if isinstance(block, dict):
            parts.append(str(block.get("text", "")) if block.get("type") == "text" else "")
        else:
            parts.append(str(getattr(block, "text", "") or ""))
    return "".join(parts)


def tool_results(msgs: Sequence[Msg]) -> list[dict[str, Any]]:
    """Every tool_result block of `msgs`, in order."""
    return [dict(block) for msg in msgs for block in msg.get_content_blocks("tool_result")]


def check_messages(
    msgs: Sequence[Msg],
    plan: Sequence[Sequence[Step]],
    issued: set[str] | None = None,
    answers: int | None = None,
) -> dict[str, Any]:
    """Nothing lost: `msgs` (dialog + memory) hold every message of the session exactly once.

    When the provider rejected calls, fewer messages were made: `issued` are the call ids the
    model did make, `answers` the turns it ended with an answer (default: all of the plan).
    """
    ids = Counter(msg.id for msg in msgs)
    planned = {step.call_id for steps in plan for step in steps}
    planned = planned if issued is None else planned & issued
    expected = len(plan) + 2 * len(planned) + (len(plan) if answers is None else answers)
    results = Counter(str(block.get("id")) for block in tool_results(msgs))
    uses = Counter(str(b.get("id")) for m in msgs for b in m.get_content_blocks("tool_use"))
    texts = {m.get_text_content() for m in msgs if m.role == "user"}
    tasks = [user_task(turn, steps) for turn, steps in enumerate(plan)]
    problems = {
        "duplicates": sum(n - 1 for n in ids.values()),
        "missing_messages": max(expected - len(ids), 0),
        "extra_messages": max(len(ids) - expected, 0),
        "missing_tool_results": len(planned - set(results)),
        "missing_tool_calls": len(planned - set(uses)),
        "repeated_tool_results": sum(n - 1 for n in results.values()),
        "missing_user_turns": sum(task not in texts for task in tasks),
    }
    return {
        "messages": len(ids),
        "expected": expected,
        **problems,
        "ok": not any(problems.values()),
    }


async def check_reachable(
    msgs: Sequence[Msg], originals: dict[str, str], read: Reader | None
) -> dict[str, Any]:
    """Every byte of every tool output in `msgs` is there whole or reachable through its
    notices (followed with `read`; without a reader a notice counts as unreachable)."""
    notices = missing_files = broken = reachable = 0
    problems: list[str] = []
    for block in tool_results(msgs):
        call_id = str(block.get("id"))
        original = originals.get(call_id)
        if original is None:
            continue
        text = output_text(block)
        cut = parse_cut(text)
        notices += cut is not None
        if read is None:
            full, start, problem = (text, (1, 0), None) if cut is None else (None, (1, 0), "no")
        else:
            full, start, problem = await follow(text, read)
        if problem is not None and "missing file" in problem:
            missing_files += 1
        if full is not None and full == suffix_from(original, *start):
            reachable += len(original.encode("utf-8"))
            continue
        broken += 1
        problems.append(f"{call_id}: {problem or 'the chain gives back other text'}")
    total = sum(len(t.encode("utf-8")) for t in originals.values())
    return {
        "notices": notices,
        "missing_files": missing_files,
        "broken_chains": broken,
        "reachable_bytes": reachable,
        "output_bytes": total,
        "reachable_share": round(reachable / total, 4) if total else 1.0,
        "problems": problems[:5],
        "ok": reachable == total and not missing_files and not broken,
    }
