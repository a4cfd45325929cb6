"""Long-term memory files: the main agent's memory tools (the daily consolidation:
`_consolidation`, its schedule: `_schedule`).

Layout under ``{working_dir}/memory/``:

- ``MEMORY.md``: durable facts, preferences and lessons, one ``- `` bullet each, under the title
  ``# Long-term memory``, followed by a ``## Change log`` section that consolidation keeps
  (``- YYYY-MM-DD: merged N notes from ...``);
- ``YYYY-MM-DD.md``: the daily notes (the agent's `log_today`, the Summarizer), local dates;
- ``.consolidate.lock`` (``flock``-ed while a consolidation runs) and ``.consolidate.json``
  (the SHA-256 of each daily note already merged, so that a rerun adds nothing, and short
  hashes of its lines, so that a note that grows is merged for its new lines only);
- ``.lock``: ``flock``-ed for each read-modify-write of a memory file (`remember`, `log_today`,
  the Summarizer's appends, the consolidation's write), so that processes sharing the
  directory lose nothing; held for a moment, never across a model call.

Every file is private to its owner (``0600`` in a ``0700`` directory, `_private`); MEMORY.md
is replaced atomically, through a temporary file of a unique name.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from ..core._private import FILE_MODE, file_lock, private_dir, tighten_fd, write_atomic
from ..core._runner import tool_text
from ..core._tokens import TokenCounter

if TYPE_CHECKING:
    pass

if sys.platform != "win32":
    pass

__all__ = ["LongTermMemory", "append_unique_lines"]

logger = logging.getLogger("agentscope_ctx")

_TITLE = "# Long-term memory"
_WRITE_LOCK = ".lock"
_CHANGELOG = "## Change log"
_MARKER = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _key(line: str) -> str:
    """A line's identity for deduplication: list marker dropped, spaces collapsed, casefolded."""
    return " ".join(_MARKER.sub("", line).split()).casefold()


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def append_unique_lines(path: Path, text: str, *, header: str = "") -> tuple[int, int]:
    """Append the non-blank lines of `text` that `path` does not hold yet.

    Lines compare without list markers, extra spaces or case. Creates the file (starting with
    `header`) and its directory when missing (private to the owner). Holds the directory's
    write lock from the read to the write, so concurrent appends (threads, processes) neither
    lose nor duplicate a line.

    Returns:
        How many lines were appended, and how many were skipped as duplicates.
    """
    private_dir(path.parent)
    with file_lock(path.parent / _WRITE_LOCK):
        existing = _read(path)
        seen = {_key(line) for line in (existing or header).splitlines() if line.strip()}
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        new: list[str] = []
        for line in lines:
            if _key(line) not in seen:
                seen.add(_key(line))
                new.append(line)
        if new:
            glue = header if not existing else "" if existing.endswith("\n") else "\n"
            _append(path, glue + "\n".join(new) + "\n")
    return len(new), len(lines) - len(new)


def _append(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, FILE_MODE)
    try:
        tighten_fd(fd, path)
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def _split(text: str) -> tuple[str, list[str]]:
    """MEMORY.md as (body, change-log lines)."""
    at = re.search(rf"^{re.escape(_CHANGELOG)}\s*$", text, re.M)
    if at is None:
        return text.strip(), []
    log = [line for line in text[at.end() :].splitlines() if line.strip()]
    return text[: at.start()].strip(), log


def _join(body: str, log: list[str]) -> str:
    body = body.strip() or _TITLE
    return body + "\n" + (f"\n{_CHANGELOG}\n" + "\n".join(log) + "\n" if log else "")


class LongTermMemory:
    """The main agent's memory tools; register `remember` and `log_today` on its toolkit.

    Both answer with a text (`tool_text`): a 1.x `ToolResponse` on AgentScope 1.x (register
    them with `Toolkit.register_tool_function`), a `str` on 2.x (add them with
    `agentscope_ctx.agentscope2._tools.function_tool(..., read_only=False)`).
    """

    def __init__(self, working_dir: Path) -> None:
        """Initialize the memory.

        Args:
            working_dir: The package's working directory; files live in its `memory/`.
        """
        self.memory_dir = Path(working_dir).expanduser() / "memory"
        self.memory_path = self.memory_dir / "MEMORY.md"

    def daily_path(self, day: date | None = None) -> Path:
        """The daily notes file of `day` (today, local date, by default)."""
        return self.memory_dir / f"{(day or date.today()).isoformat()}.md"

    @tool_text
    def remember(self, fact: str) -> str:
        """Save a durable fact, user preference or lesson to MEMORY.md, for future sessions
        (not task progress).

        Args:
            fact: One self-contained statement, e.g. "The user prefers pytest".
        """
        bullet = " ".join(_MARKER.sub("", fact).split())
        if not bullet:
            return "Error: `fact` is empty; nothing was saved."
        try:
            private_dir(self.memory_dir)
            with file_lock(self.memory_dir / _WRITE_LOCK):  # other processes remember too
                body, log = _split(_read(self.memory_path))
                if any(_key(line) == _key(bullet) for line in body.splitlines()):
                    return "Already in MEMORY.md; nothing was added."
                write_atomic(self.memory_path, _join(f"{body or _TITLE}\n- {bullet}", log))
        except (OSError, UnicodeDecodeError) as exc:
            return f"Error: cannot save to {self.memory_path}: {exc}"
        return f"Saved to {self.memory_path}."

    @tool_text
    def log_today(self, note: str) -> str:
        """Append a note to today's memory log (memory/YYYY-MM-DD.md): what was done, what
        failed and how it was fixed.

        Args:
            note: One line or a few.
        """
        lines = [" ".join(_MARKER.sub("", ln).split()) for ln in note.splitlines()]
        text = "\n".join(f"- {line}" for line in lines if line)
        if not text:
            return "Error: `note` is empty; nothing was logged."
        path = self.daily_path()
        try:
            added, _ = append_unique_lines(path, text, header=f"# {path.stem}\n\n")
        except (OSError, UnicodeDecodeError) as exc:
            return f"Error: cannot log to {path}: {exc}"
        return f"Logged to {path}." if added else "Already logged today; nothing added."

    async def memory_prompt(self, counter: TokenCounter, max_tokens: int) -> str | None:
        """MEMORY.md without its change log, cut at a line end to `max_tokens` (head kept).

        Returns:
            The text (ending with a note when it was cut), or `None` when there is nothing to
            offer or not even the note fits.
        """
        if max_tokens <= 0 or not self.memory_path.exists():
            return None
        body, _ = _split(await asyncio.to_thread(self.memory_path.read_text, encoding="utf-8"))
        if not body or body == _TITLE:
            return None
        if await counter.count_text(body) <= max_tokens:
            return body
        lines = body.splitlines()
        low, high, best = 1, len(lines) - 1, None
        while low <= high:  # the most head lines that fit with the note
            keep = (low + high) // 2
            note = (
                f"[... MEMORY.md was cut to fit: {keep} of {len(lines)} lines shown; "
                f"read {self.memory_path} for the rest]"
            )
            text = "\n".join([*lines[:keep], note])
            if await counter.count_text(text) <= max_tokens:
                best, low = text, keep + 1
            else:
                high = keep - 1
        return best
