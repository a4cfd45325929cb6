"""Text handling of the search index: line chunks, CJK tokens, FTS5 queries and snippets.

Pure functions on `str`; no I/O, no SQLite. `_search.py` stores what `chunk_lines` and
`record_parts` make and runs what `Query.fts` writes; `_recall.py` shows what `pick_lines`
picks.

Tokens are those of SQLite's ``unicode61`` tokenizer (letters and digits; everything else
separates, case and diacritics ignored). Chinese, Japanese and Korean text has no spaces, so
each CJK character is made a token of its own by a zero-width space put between two of them,
in the index and in the query alike: a CJK word then matches as the phrase of its characters.

A lone surrogate (half of an emoji a model or a tool cut in two; SQLite cannot store it) is
replaced by U+FFFD wherever text reaches the index or a query (`storable`): the dialog record
keeps it exactly (``\\uXXXX``, see `_dialog_record`), only the index sees the replacement.

A query is bounded whatever its size: only its first `MAX_QUERY_CHARS` characters are read,
and at most `MAX_TERMS` words or phrases holding `MAX_QUERY_TOKENS` tokens in all are searched
(a longer phrase is cut to its first tokens); `Query.cut` says so.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..truncation._truncation import parse_notice

__all__ = [
    "CHUNK_CHARS",
    "CHUNK_LINES",
    "DEFAULT_HITS",
    "MAX_HITS",
    "SEARCH_TOOL",
    "Chunk",
    "Query",
    "RecordParts",
    "chunk_lines",
    "clip",
    "folded",
    "index_text",
    "key_args",
    "parse_query",
    "pick_lines",
    "record_parts",
    "shown_text",
    "storable",
]

DEFAULT_HITS = 5
"""Hits per search when no number is asked for (`recall.max_hits` by default: the config
names both, so they live in the core)."""
MAX_HITS = 20
"""Most hits one `search_history` call returns."""

SEARCH_TOOL = "search_history"
"""Its own calls and results are not indexed: a search would otherwise find earlier searches."""
CHUNK_LINES = 16
"""Lines per chunk: a hit names the chunk's first line, so a smaller chunk is a closer pointer."""
CHUNK_CHARS = 2_048
"""Characters per chunk; a longer line is indexed in pieces, each with its `line_offset`."""
MAX_TERMS = 16
"""Words and phrases of a query beyond this many are ignored."""
MAX_QUERY_CHARS = 2_000
"""Characters of a query read; the rest is ignored (parsing stays linear and small)."""
MAX_QUERY_TOKENS = 32
"""Tokens (a word, or one CJK character) searched in all; a phrase past it is cut. FTS5 reads
the match list of each token of a phrase: this bounds the work of one query."""

_CJK = (
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0002fa1f]"
)
_ZWSP = "\u200b"
_CJK_GAP = re.compile(f"({_CJK})(?={_CJK})")
_CJK_ZWSP = re.compile(f"(?<={_CJK}){_ZWSP}(?={_CJK})")
_TOKEN = re.compile(rf"{_CJK}|[^\W_]+")
_QUOTED = re.compile(r'"([^"]*)"?')
_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD: what SQLite can store (it takes
    UTF-8 only)."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def index_text(text: str) -> str:
    """`text` as indexed: a zero-width space between two CJK characters (and `storable`)."""
    return text if text.isascii() else _CJK_GAP.sub("\\1" + _ZWSP, storable(text))


def shown_text(text: str) -> str:
    """The inverse of `index_text`."""
    return text if _ZWSP not in text else _CJK_ZWSP.sub("", text)


def _fold(text: str) -> str:
    """Lower case without diacritics, as the tokenizer compares."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    marks = {ord(c): None for c in set(decomposed) if unicodedata.combining(c)}
    return decomposed.translate(marks) if marks else decomposed


def folded(text: str) -> str:
    """`text` as a search engine's tokenizer is given it: lower case, without diacritics
    (and `storable`); split into runs of letters and digits, each CJK character apart, it
    holds `tokens`."""
    return _fold(text if text.isascii() else storable(text))


def tokens(text: str) -> list[str]:
    """The tokens of `text`, folded."""
    return _TOKEN.findall(_fold(text))


# -- chunks ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """Consecutive lines (or one piece of a long line) indexed as one row."""

    start_line: int
    """Line of the first character, from 1."""
    line_offset: int
    """Characters into that line (non-zero only for the later pieces of a long line)."""
    text: str
    """The lines, joined by ``\\n`` (without their line ends)."""


def chunk_lines(lines: Iterable[str], first_line: int = 1) -> Iterator[Chunk]:
    """Group `lines` (without their ``\\n``) into chunks of at most `CHUNK_LINES` lines and
    `CHUNK_CHARS` characters. A longer line goes alone, in pieces cut at a space where one is
    near the limit. Blank lines count but make no chunk of their own."""
    group: list[str] = []
    start = size = 0
    for number, line in enumerate(lines, start=first_line):
        if len(line) > CHUNK_CHARS:
            if group:
                yield Chunk(start, 0, "\n".join(group))
                group, size = [], 0
            yield from _pieces(line, number)
            continue
        if group and (len(group) >= CHUNK_LINES or size + len(line) > CHUNK_CHARS):
            yield Chunk(start, 0, "\n".join(group))
            group, size = [], 0
        if not group:
            if not line.strip():
                continue
            start = number
        group.append(line)
        size += len(line) + 1
    if group:
        yield Chunk(start, 0, "\n".join(group))


def _pieces(line: str, number: int) -> Iterator[Chunk]:
    at = 0
    while at < len(line):
        end = at + CHUNK_CHARS
        if end < len(line):
            space = line.rfind(" ", at + CHUNK_CHARS // 2, end)
            end = space + 1 if space > 0 else end
        yield Chunk(number, at, line[at:end])
        at = end


# -- dialog records ----------------------------------------------------------------------


@dataclass
class RecordParts:
    """What the index keeps of one dialog record."""

    role: str
    """The message's role; ``"tool"`` when it carries tool results."""
    texts: list[str] = field(default_factory=list)
    """Its text blocks, thinking, tool calls (``name {json input}``) and tool outputs (the
    excerpt only: the notice is boilerplate and the full output is indexed from its file)."""
    tools: list[str] = field(default_factory=list)
    """Names of the tools it calls or answers."""
    calls: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Tool-use id -> (tool name, key arguments) of the calls it makes."""
    outputs: list[tuple[str, str, str]] = field(default_factory=list)
    """(saved file path, tool name, tool-use id) of each truncated output it carries."""


def record_parts(msg: dict[str, Any]) -> RecordParts:
    """The searchable parts of a dialog record's ``msg``."""
    parts = RecordParts(role=str(msg.get("role") or ""))
    content = msg.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("text", "thinking") and isinstance(block.get(kind), str):
            parts.texts.append(block[kind])
            continue
        name = str(block.get("name") or "")
        if kind not in ("tool_use", "tool_result") or name == SEARCH_TOOL:
            continue
        if name not in parts.tools:
            parts.tools.append(name)
        if kind == "tool_use":
            tool_input = block.get("input")
            tool_input = tool_input if isinstance(tool_input, dict) else {}
            parts.calls[str(block.get("id"))] = (name, key_args(tool_input))
            parts.texts.append(f"{name} {json.dumps(tool_input, ensure_ascii=False)}")
            continue
        parts.role = "tool"
        output = block.get("output")
        items = [output] if isinstance(output, str) else output
        for item in items if isinstance(items, list) else []:
            text = item if isinstance(item, str) else None
            if isinstance(item, dict) and item.get("type") == "text":
                text = str(item.get("text", ""))
            if text is None:
                continue
            parsed = parse_notice(text)
            if parsed is not None:
                text = parsed[0]
                parts.outputs.append((parsed[1].file_path, name, str(block.get("id"))))
            parts.texts.append(text)
    return parts


def key_args(tool_input: dict[str, Any], max_chars: int = 80) -> str:
    """The first two arguments of a call, short: ``command="pytest -x", n=3``."""
    shown: list[str] = []
    for name, value in list(tool_input.items())[:2]:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text = " ".join(text.split())
        limit = max(max_chars // 2 - len(name), 8)
        text = text if len(text) <= limit else text[: limit - 1] + "…"
        shown.append(
            f"{name}={json.dumps(text, ensure_ascii=False) if isinstance(value, str) else text}"
        )
    return ", ".join(shown)


# -- queries -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """A user's query as FTS5 terms: each word or quoted phrase is matched as a phrase of its
    tokens, so no input is FTS5 syntax (``AND``, ``NEAR``, ``*``, ``(`` are words or nothing).
    A word ending in ``*`` matches as a prefix."""

    terms: tuple[tuple[str, bool], ...]
    """(text, is prefix) of each word or phrase that has a token."""
    cut: bool = False
    """Whether the query was longer than what is searched (`MAX_QUERY_CHARS`, `MAX_TERMS`,
    `MAX_QUERY_TOKENS`) and only its beginning was kept."""

    def fts(self, *, every: bool = True) -> str:
        """The FTS5 MATCH expression: all terms (`every`), or any of them."""
        quoted = [
            '"' + index_text(text).replace('"', '""') + '"' + (" *" if prefix else "")
            for text, prefix in self.terms
        ]
        return (" AND " if every else " OR ").join(quoted)

    def needles(self) -> list[list[str]]:
        """The folded tokens of each term, to find the lines a hit matched."""
        return [tokens(text) for text, _ in self.terms]


def parse_query(text: str) -> Query:
    """Split a query into words and ``"quoted phrases"`` (an unclosed quote runs to the end).
    Terms without a letter or digit are dropped. Only the first `MAX_QUERY_CHARS` characters
    are read, and at most `MAX_TERMS` terms of `MAX_QUERY_TOKENS` tokens in all are kept (a
    phrase that does not fit is cut to the tokens left); `Query.cut` tells."""
    cut = len(text) > MAX_QUERY_CHARS
    text = storable(text[:MAX_QUERY_CHARS]).replace("\x00", " ")  # FTS5 ends a string at NUL
    terms: list[tuple[str, bool]] = []
    at = 0
    for match in _QUOTED.finditer(text):
        terms.extend(_words(text[at : match.start()]))
        terms.append((match.group(1), False))
        at = match.end()
    terms.extend(_words(text[at:]))
    kept: list[tuple[str, bool]] = []
    left = MAX_QUERY_TOKENS
    for term, prefix in dict.fromkeys(terms):
        count = len(tokens(term))
        if not count:
            continue
        if len(kept) == MAX_TERMS or not left:
            cut = True
            break
        if count > left:
            term, prefix, cut = _first_tokens(term, left), False, True
            count = len(tokens(term))
            if not 0 < count <= left:
                break
        kept.append((term, prefix))
        left -= count
    return Query(tuple(kept), cut)


def _first_tokens(text: str, count: int) -> str:
    """`text` up to the end of its `count`-th token."""
    end = 0
    for number, match in enumerate(_TOKEN.finditer(text), start=1):
        end = match.end()
        if number == count:
            break
    return text[:end]


def _words(text: str) -> list[tuple[str, bool]]:
    return [(word.rstrip("*"), word.endswith("*")) for word in text.split()]


# -- snippets ----------------------------------------------------------------------------


def _matched(line: str, needles: list[list[str]]) -> int:
    """How many of the terms `line` visibly holds."""
    folded = _fold(line)
    return sum(bool(needle) and all(token in folded for token in needle) for needle in needles)


def pick_lines(
    lines: list[str], needles: list[list[str]], max_lines: int = 5
) -> tuple[list[int], int]:
    """The lines to show of a chunk: those holding the most terms (up to three) with a line of
    context before and after, at most `max_lines`; the first lines when none matches visibly.
    Returns their indexes and the index of the first matching line."""
    counts = [_matched(line, needles) for line in lines]
    best = max(counts, default=0)
    if not best:
        return list(range(min(len(lines), 3))), 0
    hits = [i for i, count in enumerate(counts) if count == best][:3]
    shown = sorted({i for hit in hits for i in (hit - 1, hit, hit + 1) if 0 <= i < len(lines)})
    return shown[:max_lines], hits[0]


def clip(line: str, needles: list[list[str]], width: int) -> tuple[str, int]:
    """At most `width` characters of `line`, around its first match. Returns the text (with
    ``…`` where cut) and the offset in `line` where it starts."""
    if len(line) <= width:
        return line, 0
    folded = _fold(line)
    found = [folded.find(t) for needle in needles for t in needle[:1] if t in folded]
    start = 0
    if found and len(folded) == len(line):  # offsets agree: no character changed size
        start = max(0, min(min(found) - width // 3, len(line) - width))
    text = line[start : start + width]
    return ("…" if start else "") + text + ("…" if start + width < len(line) else ""), start
