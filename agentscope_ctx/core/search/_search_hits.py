"""A search's query and what it returns: `Filters` in, `Hit`s out, each with a `read_file`
pointer.

A hit of a saved output or a memory file points at the first line it shows (or, inside a very
long line, at the character where the shown part starts). A hit of a dialog record points at
the record's line of its day file, with the ``line_offset`` where the shown text begins inside
the record's JSON, so that one `read_file` from the pointer shows it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from .._stamps import local_stamp
from .._tenant import Tenant
from ..truncation._truncation import utf8_len
from ._saved_summary import is_saved_summary
from ._search_text import DEFAULT_HITS, MAX_HITS, Query, clip, pick_lines, shown_text

__all__ = [
    "DEFAULT_HITS",
    "MAX_HITS",
    "ROLES",
    "Filters",
    "Hit",
    "SearchResult",
    "build_hits",
    "format_result",
    "hit_key",
    "parse_time",
    "read_file_call",
]

ROLES = ("user", "assistant", "system", "tool", "memory")
"""Values of the `role` filter (``tool``: tool outputs; ``memory``: long-term memory files)."""
LINE_CHARS = 240
"""Characters shown of one line of a hit."""


@dataclass(frozen=True)
class Filters:
    """What a search is limited to; `None` is no limit."""

    agent: str | None = None
    """Scope: records of this agent, and those whose owner is unknown (memory files, dialog
    written without an agent, outputs saved before an index rebuild that no dialog record has
    named yet). `None`: every agent's."""
    session: str | None = None
    """Records of this session only."""
    tenant: Tenant | None = None
    """The caller's tenant boundary (`core._tenant`): only the records its scope sees (an
    owner-less record: only ``shared``). `None`: no boundary (the operator's view)."""
    role: str | None = None
    """``user``, ``assistant``, ``system``, ``tool`` (tool outputs: dialog messages carrying
    tool results, and saved outputs) or ``memory`` (long-term memory files)."""
    tool: str | None = None
    """Messages calling or answering this tool, and the outputs it saved."""
    since: str | None = None
    """Local time ``YYYY-MM-DD[ HH:MM[:SS]]``, inclusive."""
    until: str | None = None
    """Local time, inclusive (``2026-12-02`` includes the whole day)."""


@dataclass(frozen=True)
class Hit:
    """One search result."""

    path: Path
    """The file to `read_file`."""
    kind: str
    """``dialog``, ``tool_result`` or ``memory``."""
    start_line: int
    line_offset: int
    """Where `read_file` shows the hit: its first shown line (and character in it)."""
    lines: list[tuple[int | None, str]]
    """The lines shown: (line number in the file, or `None` inside a dialog record; text)."""
    role: str | None
    tool: str | None
    args: str | None
    """Key arguments of the tool call that produced a saved output, when known."""
    agent: str | None
    ts: str | None
    """Local time of the message, or of the save."""
    score: float
    """BM25 (lower is better)."""


@dataclass
class SearchResult:
    """The hits of one search."""

    hits: list[Hit]
    query: Query
    every: bool = True
    """False when no chunk had every term and the hits have some of them."""
    pending: int = 0
    """Files (or dialog rows) not searched, or only in part: the catch-up ran out of time (an
    index being rebuilt), a big output is being indexed in the background (a search indexes
    `_index_pieces.SEARCH_INDEX_BYTES` of outputs at most), or the index was busy."""
    busy: bool = False
    """Another writer (a process, or another agent's search) held the index longer than the
    search could wait: what it had not indexed yet was not searched."""
    searched: bool = True
    """False when the index could not be opened at all (busy): nothing was searched."""
    rebuilt: bool = False
    """The index was found damaged during this search and made again from the files (what
    it could not index again yet is counted in `pending`)."""
    notes: list[str] = field(default_factory=list)


def _file_record(path: Path, byte_offset: int) -> str | None:
    """The dialog record (its JSON line) at `byte_offset` of the day file `path`."""
    try:
        with open(path, "rb") as file:
            file.seek(byte_offset)
            return file.readline().decode("utf-8", "replace")
    except OSError:
        return None


def _record_offset(read: Callable[[], str | None], text: str) -> int:
    """Where `text` starts inside the JSON of the record `read()` returns, in characters; 0 if
    it cannot be found."""
    probe = text[:60].split("\ufffd")[0]  # may stand for a lone surrogate, stored escaped
    if not probe.strip():
        return 0
    line = read()
    if line is None:
        return 0
    for ascii_only in (False, True):
        at = line.find(json.dumps(probe, ensure_ascii=ascii_only)[1:-1])
        if at >= 0:
            return at
    return 0


def _picked(body: object, needles: list[list[str]]) -> tuple[list[str], list[int], str]:
    """The lines of a row's `body`, those a hit shows, and the hit's key: its first matching
    line with its spaces folded (a hit whose key a better one has is left out)."""
    lines = shown_text(str(body)).split("\n")
    picked, first_match = pick_lines(lines, needles)
    return lines, picked, " ".join(lines[first_match].split())


def hit_key(body: object, needles: list[list[str]]) -> str:
    """The key `build_hits` gives the row of text `body` (`needles`: `Query.needles`): of the
    rows with one key, only the best makes a hit."""
    return _picked(body, needles)[2]


def build_hits(
    rows: Iterable[Sequence[Any]],
    root: Path,
    query: Query,
    limit: int,
    *,
    record: Callable[[Path, int], str | None] = _file_record,
) -> list[Hit]:
    """Turn rows of the search query (best first) into at most `limit` hits; a hit whose first
    matching line was already shown by a better one is left out. `record(path, byte_offset)`
    reads a dialog hit's record (default: the line at that offset of the day file)."""
    needles = query.needles()
    hits: list[Hit] = []
    seen: set[str] = set()
    for score, body, start_line, line_offset, rel, kind, line, byte_offset, *meta in rows:
        agent, role, tool, args, ts = meta
        lines, picked, key = _picked(body, needles)
        clipped = [clip(lines[i], needles, LINE_CHARS) for i in picked]
        if key in seen:
            continue
        seen.add(key)
        path = root / rel
        if kind == "dialog":
            first, cut = lines[picked[0]], clipped[0][1]
            offset = _record_offset(partial(record, path, int(byte_offset)), first[cut:])
            shown: list[tuple[int | None, str]] = [(None, text) for text, _ in clipped]
            at_line, at_offset = int(line), offset
        elif int(line_offset) or (len(lines) == 1 and len(lines[0]) > LINE_CHARS):
            shown = [(int(start_line), clipped[0][0])]
            at_line, at_offset = int(start_line), int(line_offset) + clipped[0][1]
        else:
            shown = [
                (int(start_line) + i, text) for i, (text, _) in zip(picked, clipped, strict=True)
            ]
            at_line, at_offset = int(start_line) + picked[0], 0
        hits.append(
            Hit(path, str(kind), at_line, at_offset, shown, role, tool, args, agent, ts, score)
        )
        if len(hits) >= limit:
            break
    return hits


def parse_time(value: str | None, name: str) -> str | None:
    """A ``since``/``until`` filter as the index stores times (local
    ``YYYY-MM-DD[ HH:MM[:SS]]``, see `local_stamp`), or `None`. Accepted: ``2026-12-02``,
    ``2026-12-02 14:30``, with seconds, and ISO forms (``T``, an offset).

    Raises:
        ValueError: not such a date (the message is shown to the agent).
    """
    if value is None or not str(value).strip():
        return None
    stamp = local_stamp(str(value))
    if stamp is None:
        raise ValueError(f"{name} must look like 2026-12-02 or 2026-12-02 14:30; got {value!r}")
    return stamp


def _describe(hit: Hit, shared: bool) -> str:
    if hit.kind == "tool_result" and is_saved_summary(hit.tool):  # (not a tool's output)
        what = "saved text of a summary shown cut"
    elif hit.kind == "tool_result":
        call = f"{hit.tool}({hit.args})" if hit.args else hit.tool
        what = f"saved output of {call}" if call else "saved tool output"
    elif hit.kind == "memory":
        what = f"long-term memory {hit.path.name}"
    elif hit.role == "tool":
        what = f"dialog: output of {hit.tool or 'a tool'}"
    else:
        what = f"dialog: {hit.role} message" + (f" calling {hit.tool}" if hit.tool else "")
    who = f" · agent {hit.agent}" if shared and hit.agent else ""
    return f"{what}{f' · {hit.ts[:19]}' if hit.ts else ''}{who}"


def read_file_call(hit: Hit) -> str:
    """How an agent reads on from `hit`: its `read_file` arguments."""
    offset = f" line_offset={hit.line_offset}" if hit.line_offset else ""
    return f"read_file file_path={hit.path} start_line={hit.start_line}{offset}"


def _render_hit(number: int, hit: Hit, shared: bool, read_on: Callable[[Hit], str]) -> str:
    lines = [f"[{number}] {_describe(hit, shared)}"]
    for line_number, text in hit.lines:
        lines.append(f"  {line_number}: {text}" if line_number is not None else f"  | {text}")
    lines.append(f"  read on: {read_on(hit)}")
    return "\n".join(lines)


LOCAL_SOURCES = "dialog/, tool_result/, memory/"
"""What the local index searches, as a search's answer names it."""


def format_result(
    result: SearchResult,
    query: str,
    *,
    shared: bool,
    max_bytes: int,
    sources: str = LOCAL_SOURCES,
    scope: str | None = None,
    read_on: Callable[[Hit], str] = read_file_call,
) -> str:
    """The answer to a search, within `max_bytes` (UTF-8): a header, then one block per hit
    with its lines and how to read on (`read_on(hit)`, default its `read_file` call); hits
    that do not fit are counted. `sources`: what was searched (the index's `sources`);
    `scope`: whose history (default by `shared`: all agents' or "your")."""
    where = scope or ("all agents' history" if shared else "your history")
    if not result.query.terms:
        return f"Nothing to search for in {query!r}: give words, or a quoted phrase."
    query = query if len(query) <= 200 else query[:200] + "…"  # a long query is cut
    if not result.searched:
        return (
            "The search index is busy (another process is writing or rebuilding it): nothing "
            "was searched. Search again in a moment, or read dialog/ with read_file."
        )
    if not result.hits:
        text = (
            f"No hits for {query!r} in {where} ({sources}). Try other or "
            "fewer words, a prefix like word*, or fewer filters."
        )
    else:
        some = "" if result.every else " (no single place has every word: these have some)"
        count = f"{len(result.hits)} hit{'s' if len(result.hits) > 1 else ''}"
        text = f"{count} for {query!r} in {where}, best first{some}:"
        for number, hit in enumerate(result.hits, start=1):
            block = "\n" + _render_hit(number, hit, shared, read_on)
            left = len(result.hits) - number + 1
            tail = f"\n({left} more hits not shown: narrow the query or add filters)"
            if utf8_len(text + block + tail) > max_bytes:
                text += tail
                break
            text += block
    if result.query.cut:
        words = " ".join(t if not p else t + "*" for t, p in result.query.terms)
        text += f"\n(the query is long: only its beginning was searched: {words[:200]!r})"
    if result.rebuilt:
        text += (
            "\n(the search index was damaged: it was made again from the saved files"
            + (", and is still catching up" if result.pending else "")
            + ")"
        )
    if result.pending:
        why = "busy: another process is writing it" if result.busy else "catching up"
        text += (
            f"\n(the index is {why}: {result.pending} file{'s' if result.pending > 1 else ''} "
            "not searched yet, or only in part (a big output is indexed in the background); "
            "search again in a moment)"
        )
    elif result.busy:
        text += "\n(the index is busy: another process is writing it; search again in a moment)"
    data = text.encode("utf-8")
    return text if len(data) <= max_bytes else data[: max_bytes - 3].decode("utf-8", "ignore") + "…"
