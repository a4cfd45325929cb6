"""Long-term memory: the main agent's memory tools (the daily consolidation: `_consolidation`,
its schedule: `_schedule`), over a memory store (`stores.memory_seam.MemorySeam`).

Documents (locally under ``{working_dir}/memory/``, see `stores._memory_files`; on the fleet
store, rows of one agent, see `stores.postgres._memory`):

- ``MEMORY.md``: durable facts, preferences and lessons, one ``- `` bullet each, under the title
  ``# Long-term memory``, followed by a ``## Change log`` section that consolidation keeps
  (``- YYYY-MM-DD: merged N notes from ...``);
- ``YYYY-MM-DD.md``: the daily notes (the agent's `log_today`, the Summarizer), local dates;
- ``.consolidate.json``: the SHA-256 of each daily note already merged, so that a rerun adds
  nothing, and short hashes of its lines, so that a note that grows is merged for its new
  lines only.

Every read-modify-write of a document (`remember`, `log_today`, the Summarizer's appends, the
consolidation's write) is one atomic `update` or `append` of the store, so that processes and
workers sharing the memory lose nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import date
from pathlib import Path
from typing import Any

from ..core._errors import PersistenceError
from ..core._runner import tool_text
from ..core.tokens._tokens import TokenCounter
from ..stores._memory_files import LocalMemoryDocs
from ..stores.memory_seam import MEMORY_DOC, MemorySeam

__all__ = ["LongTermMemory", "append_unique_lines", "off_the_loop"]

logger = logging.getLogger("agentscope_ctx")

_TITLE = "# Long-term memory"
_CHANGELOG = "## Change log"
_MARKER = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")


def _key(line: str) -> str:
    """A line's identity for deduplication: list marker dropped, spaces collapsed, casefolded."""
    return " ".join(_MARKER.sub("", line).split()).casefold()


def append_unique_lines(
    store: MemorySeam, name: str, text: str, *, header: str = ""
) -> tuple[int, int]:
    """Append the non-blank lines of `text` that document `name` does not hold yet.

    Lines compare without list markers, extra spaces or case. Creates the document (starting
    with `header`) when missing. One atomic `append` of the store from the read to the
    write, so concurrent appends (threads, processes, workers) neither lose nor duplicate a
    line.

    Returns:
        How many lines were appended, and how many were skipped as duplicates.
    """
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    new: list[str] = []

    def change(existing: str) -> str:
        seen = {_key(line) for line in (existing or header).splitlines() if line.strip()}
        new.clear()
        for line in lines:
            if _key(line) not in seen:
                seen.add(_key(line))
                new.append(line)
        if not new:
            return ""
        glue = header if not existing else "" if existing.endswith("\n") else "\n"
        return glue + "\n".join(new) + "\n"

    store.append(name, change)
    return len(new), len(lines) - len(new)


def off_the_loop(func: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """`func` as an async tool function that runs it in a thread (name, docstring and
    signature kept: both lines' toolkits build the same schema and await it), so that a
    database round trip, or a wait for another worker's row lock, does not hold the event
    loop."""

    @functools.wraps(func)
    async def tool(*args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(func, *args, **kwargs)

    return tool


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

    def __init__(self, working_dir: Path | None = None, *, store: MemorySeam | None = None) -> None:
        """Initialize the memory.

        Args:
            working_dir: The package's working directory; files live in its `memory/`.
            store: Where the documents live instead (the fleet store's memory of one agent).

        Raises:
            ValueError: neither `working_dir` nor `store` was given.
        """
        if store is None:
            if working_dir is None:
                raise ValueError("LongTermMemory needs a working_dir or a store")
            store = LocalMemoryDocs(Path(working_dir).expanduser() / "memory")
        self.store: MemorySeam = store
        root = getattr(store, "root", None)
        self.memory_dir: Path | None = root if isinstance(root, Path) else None
        """The local memory directory (`None` for a store that is not files)."""
        self.memory_path: Path | str = (
            store.ref(MEMORY_DOC) if self.memory_dir is None else self.memory_dir / MEMORY_DOC
        )
        """How MEMORY.md is named (locally: its path)."""
        self._rest_hint = (
            f"read {self.memory_path}"
            if self.memory_dir is not None
            else "search_history (role memory) finds"
        )

    def tool_functions(self) -> list[Callable[..., Any]]:
        """`remember` and `log_today` as the agent's tools: the methods themselves on local
        files; on a store that is not files, async functions running them off the event loop
        (`off_the_loop`)."""
        tools = [self.remember, self.log_today]
        return list(tools) if self.memory_dir is not None else [off_the_loop(t) for t in tools]

    def daily_name(self, day: date | None = None) -> str:
        """The name of the daily notes of `day` (today, local date, by default)."""
        return f"{(day or date.today()).isoformat()}.md"

    def daily_path(self, day: date | None = None) -> Path | str:
        """The daily notes of `day` (today by default): locally its file, else its ref."""
        name = self.daily_name(day)
        return self.memory_dir / name if self.memory_dir is not None else self.store.ref(name)

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

        def change(current: str) -> str | None:
            body, log = _split(current)
            if any(_key(line) == _key(bullet) for line in body.splitlines()):
                return None
            return _join(f"{body or _TITLE}\n- {bullet}", log)

        try:  # other processes and workers remember too: one atomic update
            written = self.store.update(MEMORY_DOC, change)
        except (OSError, ValueError, PersistenceError) as exc:
            return f"Error: cannot save to {self.memory_path}: {exc}"
        if not written:
            return "Already in MEMORY.md; nothing was added."
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
        name = self.daily_name()
        path = self.daily_path()
        try:
            added, _ = append_unique_lines(
                self.store, name, text, header=f"# {name.removesuffix('.md')}\n\n"
            )
        except (OSError, ValueError, PersistenceError) as exc:
            return f"Error: cannot log to {path}: {exc}"
        return f"Logged to {path}." if added else "Already logged today; nothing added."

    async def memory_prompt(self, counter: TokenCounter, max_tokens: int) -> str | None:
        """MEMORY.md without its change log, cut at a line end to `max_tokens` (head kept).

        Returns:
            The text (ending with a note when it was cut), or `None` when there is nothing to
            offer or not even the note fits.
        """
        if max_tokens <= 0:
            return None
        body, _ = _split(await asyncio.to_thread(self.store.read, MEMORY_DOC))
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
                f"{self._rest_hint} for the rest]"
            )
            text = "\n".join([*lines[:keep], note])
            if await counter.count_text(text) <= max_tokens:
                best, low = text, keep + 1
            else:
                high = keep - 1
        return best
