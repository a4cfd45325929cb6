"""A dialog record as the local search index keeps it (`parse_record`: its ``docs`` row, its
chunks, the calls it makes and the saved outputs it names), and the records of a search's
tail (`tail_records`), parsed once per process.

Each search reads what the dialog files hold past the committed index into its tail
(`_search_tail`). With ten handles writing, the background indexing lags some hundreds of
records behind, and each search parsed them all again (JSON, time stamps, chunks, tokens):
at 100k messages that was most of a slow search (issue 46 item 11). A dialog file only
grows, so a record read at a byte offset of a file (its inode) is the same for every later
search: `_Memo` keeps the records read past the committed index, per file, parsed with their
chunks' tokens, reads only what was appended since, and drops what the index committed.
What a record teaches the handle (the calls it makes, the owners of the outputs it names)
is learnt again by each search (`learn`): that is per handle, and cheap.
"""

from __future__ import annotations

import bisect
import json
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import BinaryIO

from ..core._stamps import local_stamp
from ..core.search._search_text import Chunk, chunk_lines, record_parts, storable
from ._search_tail_match import TailChunk
from ._search_tantivy import DOC_SHIFT, query_tokens

__all__ = ["Record", "parse_record", "tail_records"]

MEMO_FILES = 64
"""Dialog files whose tail records the process keeps (the least recently read are dropped)."""
MARK_BYTES = 64


@dataclass(frozen=True)
class Record:
    """One dialog record as the index keeps it."""

    values: tuple[object, ...]
    """Its ``docs`` row after ``id``: path, kind, line, byte_offset, agent, session, role,
    tool, args, ts (strings `storable`)."""
    chunks: list[Chunk]
    """Its chunks (texts `storable`), at most ``1 << DOC_SHIFT``."""
    calls: dict[str, tuple[str, str]]
    """Tool-use id -> (tool, key arguments) of the calls it makes."""
    outputs: list[tuple[str, str, str]]
    """(saved file path, tool, tool-use id) of the truncated outputs it carries."""
    agent: str | None
    session: str | None
    ts: str | None


def parse_record(rel: str, line: int, offset: int, raw: bytes) -> Record | None:
    """The record on line `line` (at byte `offset`) of the dialog file `rel`; `None` for a
    torn or foreign line (the dialog reader reports it)."""
    try:  # an invalid byte costs its character, not the record
        record = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None
    msg = record.get("msg") if isinstance(record, dict) and record.get("v") == 1 else None
    if not isinstance(msg, dict):
        return None
    agent, session, ts = record.get("agent"), record.get("session"), msg.get("timestamp")
    agent = agent if isinstance(agent, str) else None
    session = session if isinstance(session, str) else None
    ts = local_stamp(ts) or (ts if isinstance(ts, str) else None)  # 2.x: ISO stamps
    parts = record_parts(msg)
    args = next(iter(parts.calls.values()))[1] if len(parts.calls) == 1 else None
    tools = ",".join(parts.tools) or None
    values = (rel, "dialog", line, offset, agent, session, parts.role, tools, args, ts)
    # the text may hold lone surrogates (the record keeps them as \uXXXX escapes): the
    # index stores them as U+FFFD
    chunks = [
        Chunk(c.start_line, c.line_offset, storable(c.text))
        for c in islice(
            (c for text in parts.texts for c in chunk_lines(text.split("\n"))), 1 << DOC_SHIFT
        )
    ]
    agent, session, ts = (storable(v) if v is not None else None for v in (agent, session, ts))
    stored = tuple(storable(v) if isinstance(v, str) else v for v in values)
    return Record(stored, chunks, parts.calls, parts.outputs, agent, session, ts)


@dataclass
class _Read:
    """A line of a dialog file read past the committed index: its number, its record
    (`None`: not one) and the record's tail chunks."""

    line: int
    record: Record | None
    chunks: list[TailChunk]


def _read(rel: str, line: int, offset: int, raw: bytes) -> _Read:
    record = parse_record(rel, line, offset, raw)
    if record is None:
        return _Read(line, None, [])
    v = record.values
    row = (v[0], v[1], v[2], v[3], v[4], v[6], v[7], v[8], v[9])  # as `_search_tail._chunks`
    chunks = [
        TailChunk((c.text, c.start_line, c.line_offset, *row), record.session, query_tokens(c.text))
        for c in record.chunks
    ]
    return _Read(line, record, chunks)


@dataclass
class _File:
    """Consecutive lines of one dialog file (`inode`) up to byte `end` (`lines` before it),
    with the byte offset of each."""

    inode: int
    end: int
    lines: int
    reads: list[_Read] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    mark: bytes = b""
    """The bytes before `end` (`MARK_BYTES` at most): a file of the same name and inode
    that does not hold them there is another one (a dialog day written again by a forget,
    its inode given again)."""

    def holds(self, file: BinaryIO, inode: int) -> bool:
        """Whether `file` (of `inode`) is the file these lines were read from."""
        at = self.end - len(self.mark)
        return self.inode == inode and os.pread(file.fileno(), len(self.mark), at) == self.mark

    def at(self, offset: int, line: int) -> int | None:
        """The index of the line starting at byte `offset` after `line` lines (`len(reads)`
        at the end); `None` when none does."""
        if (offset, line) == (self.end, self.lines):
            return len(self.reads)
        k = bisect.bisect_left(self.offsets, offset)
        if k < len(self.offsets) and self.offsets[k] == offset and self.reads[k].line == line + 1:
            return k
        return None


class _Memo:
    """The dialog lines searches read past the committed index, per file (see the module
    docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.files: OrderedDict[tuple[str, str], _File] = OrderedDict()

    def lines(
        self, root: Path, rel: str, file: BinaryIO, inode: int, offset: int, line: int
    ) -> list[_Read]:
        """The lines of `file` (the dialog file `rel` of `root`, open) from byte `offset`
        (`line` lines before it) to its last whole line."""
        key = (str(root), rel)
        with self.lock:
            kept = self.files.pop(key, None)
            k = None if kept is None or not kept.holds(file, inode) else kept.at(offset, line)
            if kept is None or k is None:
                kept, k = _File(inode, offset, line), 0
            del kept.reads[:k], kept.offsets[:k]  # committed: no later search reads them
            file.seek(kept.end)
            data = file.read()
            for raw in data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]:
                kept.lines += 1
                kept.reads.append(_read(rel, kept.lines, kept.end, raw))
                kept.offsets.append(kept.end)
                kept.end += len(raw) + 1
            if kept.end > offset:
                file.seek(max(kept.end - MARK_BYTES, 0))
                kept.mark = file.read(kept.end - file.tell())
            self.files[key] = kept
            while len(self.files) > MEMO_FILES:
                self.files.popitem(last=False)
            return list(kept.reads)


_MEMO = _Memo()


def _fresh_memo_in_child() -> None:
    """A forked child gets a memo of its own: a parent's search holding the memo's lock at
    the fork would leave it held forever in the child, whose first search would hang (as
    `_search_turns._searches_lock` did)."""
    global _MEMO
    _MEMO = _Memo()


os.register_at_fork(after_in_child=_fresh_memo_in_child)


def tail_records(
    mem: sqlite3.Connection,
    root: Path,
    rel: str,
    learn: Callable[[sqlite3.Connection, Record], None],
) -> list[TailChunk]:
    """The chunks of the records the dialog file `rel` holds past what the tail's database
    `mem` says is indexed (its ``sources`` row: all of it when the file was replaced or
    shrank since), each record `learn`t on `mem` in order (the calls it makes, the owners of
    the outputs it names: `CatchUp._learn`)."""
    state = mem.execute("SELECT inode, size, lines FROM sources WHERE path = ?", (rel,)).fetchone()
    with open(root / rel, "rb") as file:
        stat = os.fstat(file.fileno())
        offset, line = 0, 0
        if state is not None and state[0] == stat.st_ino and state[1] <= stat.st_size:
            offset, line = int(state[1]), int(state[2])
        reads = _MEMO.lines(root, rel, file, stat.st_ino, offset, line)
    chunks: list[TailChunk] = []
    for read in reads:
        if read.record is not None:
            learn(mem, read.record)
            chunks.extend(read.chunks)
    return chunks
