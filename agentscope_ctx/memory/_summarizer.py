"""`Summarizer`: an agent that keeps long-term notes when the context is compacted.

It reads the messages leaving the context and records, in today's ``memory/YYYY-MM-DD.md``,
personal facts and preferences of the user and try-error lessons (what failed, how it was
fixed), skipping what the file already holds. Its file tools (`MemoryFiles`) allow exactly
that job: they read the memory files (absolute paths elsewhere, ``..``, symlinks and hidden
files such as the consolidation's lock and state are refused) and append lines to today's
notes. Nothing else can be written: not MEMORY.md, which every agent is shown (the messages
it reads may carry a prompt injection from a tool's output), not an older note, and no line
of today's note is changed or removed. Started in the background; it logs its errors and
never raises them. Each of its model calls has a time limit (a hanging provider
must not keep it, or `ContextManager.close`, waiting forever).

It runs through `_runner.run_agent` (a `ReActAgent` on AgentScope 1.x, an `Agent` on 2.x, its
file tools allowed without asking); the tools answer with a text (`tool_text`).

What it costs is bounded: its model sees the messages as `bounded_transcript` renders them
(tool output reduced to a few lines, the whole under `max_input_tokens`), and a memory file it
reads is shown up to its last `_MAX_READ_CHARS` characters (every prompt of its ReAct loop
carries what it read). `SummarizerQueue` decides when it runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._entry import Msg
from ..core._errors import PersistenceError
from ..core._host import host
from ..core._runner import AgentTool, run_agent, tool_text
from ..core.tokens._tokens import TokenCounter
from ..stores._memory_files import LocalMemoryDocs
from ..stores.memory_seam import MemorySeam
from ._long_term import append_unique_lines, off_the_loop
from ._summarizer_input import bounded_transcript

if TYPE_CHECKING:
    from agentscope.formatter import FormatterBase
    from agentscope.model import ChatModelBase

__all__ = ["SILENT", "MemoryFiles", "Summarizer"]

logger = logging.getLogger("agentscope_ctx")

SILENT = "[SILENT]"
"""The Summarizer's whole answer when nothing was worth keeping."""
_MAX_READ_CHARS = 8_000
"""Longest part of a memory file `read_memory_file` returns: its end (the newest notes), from
a line start. About 2,000 tokens, re-sent with every later step of the run."""
_SYSTEM = """You keep the long-term memory of an AI agent's user. You are given the part of \
the agent's conversation that is leaving its context window. Record in the daily notes file \
`{today}.md` only what will still matter in future sessions:
- facts about the user and their preferences (name, role, environment, tools, style, recurring \
instructions, likes and dislikes);
- try-error lessons: what failed, why, and how it was fixed, with the exact commands, error \
messages and file paths.
Not the task's ordinary progress, not what is already recorded.

Procedure:
1. Call `read_memory_file` with file_path="{today}.md" (and "MEMORY.md" to see what is known).
2. Append each new item as one bullet line starting with "- Fact:", "- Preference:" or \
"- Lesson:" with `write_memory_file` (file_path="{today}.md"; it only appends, and only to \
that file); where the conversation contradicts a recorded item, append the correction as a \
new item. Never repeat an item the files already hold, even reworded.
3. Then answer with one short sentence saying what you recorded, or with exactly {silent} \
when nothing was worth keeping."""


class MemoryFiles:
    """The Summarizer's tools: read the documents of one memory, append to one of them.

    Each answers with a text (`tool_text`: a 1.x `ToolResponse` on AgentScope 1.x, a `str` on
    2.x); a refused path or a failed write is an answer starting with "Error:", not an
    exception.
    """

    def __init__(self, root: Path | MemorySeam, today: date | None = None) -> None:
        """Initialize the tools.

        Args:
            root: The memory the tools are confined to: a local directory, or a store.
            today: The date of the only file that can be written, ``{today}.md`` (appended
                to); today's local date by default.
        """
        self.store: MemorySeam = LocalMemoryDocs(root) if isinstance(root, Path) else root
        self.note = f"{(today or date.today()).isoformat()}.md"

    def agent_tools(self) -> list[AgentTool]:
        """The two tools for `run_agent`: on a store that is not files, run off the event
        loop (`off_the_loop`)."""
        read, write = self.read_memory_file, self.write_memory_file
        if not isinstance(self.store, LocalMemoryDocs):
            read, write = off_the_loop(read), off_the_loop(write)  # type: ignore[assignment]
        return [AgentTool(read, read_only=True), AgentTool(write)]

    @tool_text
    def read_memory_file(self, file_path: str) -> str:
        """Read a memory file (a long one: its end, where the newest notes are).

        Args:
            file_path: The file name inside the memory directory, e.g. "2025-01-31.md".
        """
        try:
            name = self.store.name_of(file_path)
            if not self.store.exists(name):
                return f"{file_path} does not exist yet (write_memory_file creates it)."
            text = self.store.read(name)
        except (OSError, ValueError, PersistenceError) as exc:
            return f"Error: {exc}"
        if len(text) > _MAX_READ_CHARS:
            start = len(text) - _MAX_READ_CHARS
            if text[start - 1] != "\n":  # begin at a line start, if one is in reach
                start = text.find("\n", start, len(text) - 1) + 1 or start
            text = f"[... the first {start} of {len(text)} characters left out]\n{text[start:]}"
        return text or f"{file_path} is empty."

    @tool_text
    def write_memory_file(self, file_path: str, content: str) -> str:
        """Append lines to today's notes file; lines it already holds are skipped.

        Only today's notes file can be written, and only at its end: MEMORY.md and older
        notes are read-only.

        Args:
            file_path: Today's notes file, e.g. "2025-01-31.md".
            content: The text: one "- " bullet line per item.
        """
        try:
            name = self.store.name_of(file_path)
            if name != self.note:
                raise ValueError(
                    f"file_path {file_path!r} is read-only: only today's notes file "
                    f"{self.note!r} can be written (appended to)"
                )
            header = f"# {name.removesuffix('.md')}\n\n"
            added, skipped = append_unique_lines(self.store, name, content, header=header)
        except (OSError, ValueError, PersistenceError) as exc:
            return f"Error: {exc}"
        if not added:
            return f"Nothing appended: {file_path} already holds every line."
        dupes = f"; skipped {skipped} line(s) it already held" if skipped else ""
        return f"Appended {added} line(s) to {file_path}{dupes}."


class Summarizer:
    """Writes long-term notes from the messages that leave the context."""

    def __init__(
        self,
        *,
        model: ChatModelBase,
        formatter: FormatterBase | None,
        memory_dir: Path | MemorySeam,
        counter: TokenCounter | None = None,
        max_iters: int = 8,
        max_input_tokens: int = 8_000,
        timeout_seconds: float = 120.0,
        cache: Any = None,
    ) -> None:
        """Initialize the summarizer.

        Args:
            model: The model of the Summarizer agent.
            formatter: The formatter of `model`: required on AgentScope 1.x; on 2.x ignored
                (the model owns its formatter), `None` is fine.
            memory_dir: The `memory/` directory its tools are confined to, or the store of
                the memory (the fleet store's memory of one agent).
            counter: Counts the transcript's tokens; tiktoken's default encoding when `None`.
            max_iters: Reasoning-acting iterations of one run.
            max_input_tokens: Cap on the tokens of the transcript message given to the model
                (see `bounded_transcript`); its instructions and tools come on top.
            timeout_seconds: Longest wait for one model call (a streamed answer: for all of
                it); a call that takes longer ends the run, its notes written so far kept.
            cache: The prompt-cache marks of its calls (`run_agent`'s; the service gives
                them where the provider caches only to a mark: each call of a run reads
                the one before it).

        Raises:
            ValueError: `formatter` is `None` on AgentScope 1.x.
        """
        if host().needs_formatter and formatter is None:
            raise ValueError("Summarizer: an AgentScope 1.x model needs its formatter")
        self._model = model
        self._formatter = formatter
        self.memory_dir = memory_dir
        self.counter = counter or TokenCounter()
        self.max_iters = max_iters
        self.max_input_tokens = max_input_tokens
        self.timeout_seconds = timeout_seconds
        self.cache = cache

    async def run(self, messages: Sequence[Msg], *, today: date | None = None) -> str:
        """Record what is worth keeping from `messages`. Never raises, except on cancellation.

        Args:
            messages: The messages leaving the context, oldest first.
            today: The notes' date; today's local date by default.

        Returns:
            The agent's final text (`SILENT` when nothing was kept), or "" after an error.
        """
        try:
            day = (today or date.today()).isoformat()
            files = MemoryFiles(self.memory_dir, date.fromisoformat(day))
            answer = await run_agent(
                self._model,
                self._formatter,
                name="summarizer",
                sys_prompt=_SYSTEM.format(today=day, silent=SILENT),
                prompt=await self.prompt(messages, day),
                tools=files.agent_tools(),
                max_iters=self.max_iters,
                call_timeout=self.timeout_seconds,
                cache=self.cache,
            )
            answer = answer.strip()
            logger.info("Summarizer: %s", answer[:200])
            return answer
        except TimeoutError:
            logger.warning(
                "Summarizer: a model call took over %g s; the run was abandoned (notes written "
                "before it are kept).",
                self.timeout_seconds,
            )
            return ""
        except Exception:
            logger.exception("Summarizer failed; no long-term notes were written this time.")
            return ""

    async def prompt(self, messages: Sequence[Msg], day: str) -> str:
        """The user message of a run: the date and the transcript, within `max_input_tokens`."""
        header = f"Today is {day}. The conversation:\n\n"
        room = self.max_input_tokens - await self.counter.count_text(header) - 1
        return header + await bounded_transcript(messages, self.counter, room)
