"""`PromptStats`: what the prompts a demo's model received show, whichever model answers.

Every prompt is counted (our count: the installed token counter over the formatted request,
tool schemas included). From the prompts alone it also sees the package at work: each
truncation notice the first time it appears (a first truncation), an output that came back
cut harder (a second truncation: a tool call's result shown shorter than before, with a
notice), the `read_file` calls that follow a notice's hint (continuation reads, each checked
against the saved file: its answer must be the file's next bytes), and what each
`search_history` call found.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.tokens._tokens import TokenCounter
from ..core.truncation._truncation import Notice, Position, parse_notice, utf8_len
from ..testing._summary import content_text

__all__ = [
    "ContinuationRead",
    "FirstCut",
    "PromptStats",
    "SearchCall",
    "content_text",
    "tool_results",
]

SEARCH_TOOL = "search_history"
READ_FILE = "read_file"


@dataclass
class FirstCut:
    """A truncation notice seen for the first time."""

    step: int
    """The step whose prompt first held it: the output entered the context after step - 1."""
    tool: str
    """The tool whose output it ends ("" when the prompt does not say)."""
    notice: Notice


@dataclass
class ContinuationRead:
    """A `read_file` call that follows a notice's hint."""

    step: int
    file_path: str
    start: Position
    returned: str | None = None
    """The text it returned (without its own notice); `None` until seen."""
    returned_bytes: int | None = None
    """UTF-8 size of `returned`."""
    follows: bool | None = None
    """Whether that text is the saved file's next bytes from `start` (`None`: not seen)."""


@dataclass
class SearchCall:
    """A `search_history` call and what it found."""

    step: int
    query: str
    hits: int | None = None
    """Hits in its answer (`None` until seen)."""
    first_path: str | None = None
    """Where the best hit is (the file its `read on` pointer names)."""
    first_line: int | None = None


_CALL_ID_KEYS = ("tool_call_id", "tool_use_id")
_HITS = re.compile(r"^(\d+) hits? for ", re.M)
_READ_ON = re.compile(r"read on: read_file file_path=(.+?) start_line=(\d+)")


def tool_results(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The tool results in a formatted prompt (OpenAI or Anthropic style), in order, as
    (tool name, text); the name is "" when the prompt does not link the result to a call."""
    return [(name, text) for _, name, text in _linked_results(messages)]


def _linked_results(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """`tool_results` with the id of each result's call first ("" when it has none)."""
    names: dict[str, str] = {}
    results: list[tuple[str, str, str]] = []
    for message in messages:
        for call in message.get("tool_calls") or []:  # OpenAI
            if isinstance(call, Mapping):
                function = call.get("function") or {}
                names[str(call.get("id"))] = str(function.get("name", ""))
        if message.get("role") == "tool":
            call_id = str(message.get("tool_call_id") or "")
            results.append((call_id, names.get(call_id, ""), content_text(message.get("content"))))
            continue
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:  # Anthropic
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "tool_use":
                names[str(part.get("id"))] = str(part.get("name", ""))
            elif part.get("type") == "tool_result":
                call_id = str(part.get("tool_use_id") or "")
                results.append((call_id, names.get(call_id, ""), content_text(part.get("content"))))
    return results


def _next_bytes(path: Path, start: Position, excerpt: str) -> bool:
    """Whether `excerpt` is what the file at `path` holds from `start` on."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, ValueError):
        return False
    lines = text.splitlines(keepends=True)
    rest = "".join(lines[start.line - 1 :])[start.offset :]
    return bool(excerpt) and rest.startswith(excerpt)


class PromptStats:
    """What the prompts a model received show: their token counts, the truncation notices
    seen for the first time and those that came back cut harder (second truncation), the
    `read_file` calls that follow a notice's hint (continuation reads) and the
    `search_history` calls. With a real model, also what the provider counted and which
    prompts it rejected."""

    def __init__(self, counter: TokenCounter, root: Path | None = None) -> None:
        """Args:
        counter: counts the prompts.
        root: where a relative `file_path` of a continuation read is (the working dir).
        """
        self.counter = counter
        self.root = root
        self.prompt_tokens: list[int] = []
        """Our count of each prompt sent, in order (step n is index n - 1)."""
        self.provider_tokens: list[int | None] = []
        """The prompt tokens the provider reported for each step (`None`: no usage)."""
        self.provider_cached: list[int | None] = []
        """The part of them it read from its prompt cache (`None`: not reported)."""
        self.rejected: dict[int, str] = {}
        """Steps the provider refused, with its reason (one line)."""
        self.retries: list[int] = []
        """Steps that retried a prompt the provider had refused as too long."""
        self.first_truncations = 0
        self.second_truncations = 0
        self.continuation_reads = 0
        self.first_cuts: list[FirstCut] = []
        self.reads: list[ContinuationRead] = []
        self.searches: list[SearchCall] = []
        self.compactor_calls: list[tuple[int, int]] = []
        """(prompt tokens, summary tokens) of each call of the scripted compactor model."""
        self._seen: dict[str | tuple[str, int, int], int] = {}
        """UTF-8 size last shown of each output: by its call's id, else (without an id) by
        where its notice's excerpt starts."""
        self._harder: set[str | tuple[str, int, int]] = set()
        self._hints: set[tuple[str, int, int]] = set()
        self._pending: list[ContinuationRead | SearchCall] = []

    @property
    def counter_name(self) -> str:
        """How we count: the token counter's backend (``tiktoken:<encoding>``, ...)."""
        return self.counter.backend

    async def observe(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None
    ) -> tuple[int, list[str]]:
        """Count a prompt and watch its notices; returns its tokens and its tool-result texts."""
        tokens = await self.counter.count(messages, tools=tools)
        self.prompt_tokens.append(tokens)
        self.provider_tokens.append(None)
        self.provider_cached.append(None)
        step = len(self.prompt_tokens)
        linked = _linked_results(messages)
        results = [(name, text) for _, name, text in linked]
        await self._answers(results)
        for call_id, name, text in linked:
            parsed = parse_notice(text)
            if parsed is None:
                if call_id:  # shown whole: a later cut of it is a second truncation
                    self._seen.setdefault(call_id, utf8_len(text))
                continue
            notice = parsed[1]
            self._hints.add((notice.file_path, notice.next.line, notice.next.offset))
            # An output is known by its call: a harder cut of a `read_file` output of a
            # workspace file is saved as a snapshot first, so its notice names a new file.
            key = call_id or (notice.file_path, notice.start.line, notice.start.offset)
            before = self._seen.get(key)
            if before is None:
                self.first_truncations += 1
                self._seen[key] = notice.n_bytes
                self.first_cuts.append(FirstCut(step, name, notice))
            elif notice.n_bytes < before and key not in self._harder:
                self._harder.add(key)
                self.second_truncations += 1
        return tokens, [text for _, text in results]

    def note_call(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Record a tool call of the model (at the newest step); True when it is a
        continuation read."""
        step = len(self.prompt_tokens)
        if tool == SEARCH_TOOL:
            search = SearchCall(step, str(arguments.get("query", "")))
            self.searches.append(search)
            self._pending.append(search)
            return False
        if tool != READ_FILE:
            return False
        try:
            key = (
                str(arguments.get("file_path", "")),
                int(arguments.get("start_line", 1)),
                int(arguments.get("line_offset", 0)),
            )
        except (TypeError, ValueError):
            return False
        if key not in self._hints:
            return False
        self.continuation_reads += 1
        read = ContinuationRead(step, key[0], Position(key[1], key[2]))
        self.reads.append(read)
        self._pending.append(read)
        return True

    async def _answers(self, results: list[tuple[str, str]]) -> None:
        """Match the calls of the last step with their answers: the newest result of their
        tool in this prompt (one call per tool and step, as the demos make them)."""
        pending, self._pending = self._pending, []
        for call in pending:
            tool = SEARCH_TOOL if isinstance(call, SearchCall) else READ_FILE
            texts = [text for name, text in results if name == tool]
            if not texts and results and not any(name for name, _ in results):
                texts = [results[-1][1]]  # a prompt that does not name its results
            if not texts:
                continue
            if isinstance(call, SearchCall):
                _found(call, texts[-1])
                continue
            parsed = parse_notice(texts[-1])
            excerpt = texts[-1] if parsed is None else parsed[0]
            call.returned, call.returned_bytes = excerpt, utf8_len(excerpt)
            path = Path(call.file_path)
            if not path.is_absolute() and self.root is not None:
                path = self.root / path
            call.follows = await asyncio.to_thread(_next_bytes, path, call.start, excerpt)


def _found(call: SearchCall, text: str) -> None:
    count = _HITS.search(text)
    call.hits = int(count[1]) if count else 0
    first = _READ_ON.search(text)
    if first is not None and call.hits:
        call.first_path, call.first_line = first[1].strip(), int(first[2])
