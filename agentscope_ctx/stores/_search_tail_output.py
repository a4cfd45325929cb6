"""The saved outputs of a search's tail, read once per process (issue 46 item 11).

A search reads into its tail (`_search_tail`) the saved outputs the index lacks while their
rests fit in its budget (2 MB): a small output just saved, or the last megabytes of a big one
the background indexes in pieces. Each search of each handle read and chunked those bytes
again, and tokenized their chunks, until the background committed them: at 100k messages
with ten handles writing, that was the largest part of a slow search left. An output is
written once, atomically, so its bytes past a point are the same for every later search:
`tail_output` keeps, per output (its inode, size and mtime) and starting point, the pieces
read as `index_piece` cuts them, with their chunks' tokens, at most `MEMO_BYTES` of them;
each search puts them into its tail's database with the owner that database holds now.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..core.search import _index_pieces as pieces
from ..core.search._index_pieces import cut_piece, piece_lines
from ..core.search._search_text import Chunk, chunk_lines, storable
from ._search_db import add_doc, write
from ._search_files import PIECE_READ, file_stamp
from ._search_tantivy import query_tokens

__all__ = ["MEMO_BYTES", "tail_output"]

MEMO_BYTES = 8 << 20
"""Bytes of saved outputs whose tail pieces the process keeps (the least recently read
are dropped past it): four searches' worth."""


@dataclass(frozen=True)
class _Piece:
    """A piece of an output as `index_piece` cuts it: where it starts, its chunks (texts
    `storable`) with their tokens."""

    offset: int
    chunks: list[tuple[Chunk, list[str]]]


@dataclass(frozen=True)
class _Read:
    """An output's pieces from a starting point (byte, lines before it) to its end."""

    identity: tuple[int, int, int, int, int]
    """inode, size, mtime (ns), and the starting point."""
    pieces: list[_Piece]
    size: int


class _Memo:
    """The outputs' pieces the searches read, the last read of each output kept."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reads: OrderedDict[tuple[str, str], _Read] = OrderedDict()

    def pieces(
        self, root: Path, rel: str, file: BinaryIO, stat: os.stat_result, start: tuple[int, int]
    ) -> list[_Piece]:
        """The pieces of the output `rel` of `root` (open as `file`) from `start`."""
        key = (str(root), rel)
        identity = (stat.st_ino, stat.st_size, stat.st_mtime_ns, *start)
        with self.lock:
            kept = self.reads.get(key)
        if kept is None or kept.identity != identity:  # read outside the lock: some 0.1 s/MB
            kept = _Read(identity, _read(file, stat.st_size, start), stat.st_size - start[0])
        with self.lock:
            self.reads.pop(key, None)
            self.reads[key] = kept
            total = sum(read.size for read in self.reads.values())
            while total > MEMO_BYTES and len(self.reads) > 1:
                total -= self.reads.popitem(last=False)[1].size
            return kept.pieces


def _read(file: BinaryIO, size: int, start: tuple[int, int]) -> list[_Piece]:
    """The pieces of the output open as `file` (`size` bytes) from `start`, cut and chunked
    as `_search_files.index_piece` does."""
    done, line = start
    out: list[_Piece] = []
    while done < size:
        file.seek(done)
        data = cut_piece(iter(lambda: file.read(PIECE_READ), b""), pieces.PIECE_BYTES)
        if not data:
            break
        chunks = []
        for c in chunk_lines(piece_lines(data), line + 1):
            text = storable(c.text)
            tokens = [sys.intern(t) for t in query_tokens(text)]
            chunks.append((Chunk(c.start_line, c.line_offset, text), tokens))
        out.append(_Piece(done, chunks))
        done, line = done + len(data), line + data.count(b"\n")
    return out


_MEMO = _Memo()


def _fresh_memo_in_child() -> None:
    """A forked child gets a memo of its own: a parent's search holding the memo's lock at
    the fork would leave it held forever in the child, whose first search would hang (as
    `_search_turns._searches_lock` did)."""
    global _MEMO
    _MEMO = _Memo()


os.register_at_fork(after_in_child=_fresh_memo_in_child)


def tail_output(
    mem: sqlite3.Connection, root: Path, rel: str, tokens: dict[int, list[str]]
) -> None:
    """Put into the tail's database `mem` the rest of the saved output `rel` past what its
    ``sources`` row says is indexed (all of it when the file was replaced since), as
    `index_piece` would, owned as `mem`'s ``owners`` row says; `tokens` gets each chunk's
    tokens by its rowid."""
    with open(root / rel, "rb") as file:
        stat = os.fstat(file.fileno())
        state = mem.execute(
            "SELECT inode, size, lines FROM sources WHERE path = ?", (rel,)
        ).fetchone()
        start = (0, 0)
        if state is not None and state[0] == stat.st_ino:
            start = (int(state[1]), int(state[2]))
        read = _MEMO.pieces(root, rel, file, stat, start)
    owner = mem.execute(
        "SELECT agent, session, tool, args, ts FROM owners WHERE name = ?", (rel,)
    ).fetchone() or (None, None, None, None, None)
    ts = owner[4] or file_stamp(stat.st_mtime)
    with write(mem):
        for piece in read:
            values = (rel, "tool_result", 1, piece.offset, *owner[:2], "tool", *owner[2:4], ts)
            base = add_doc(mem, values, [chunk for chunk, _ in piece.chunks])
            for k, (_, words) in enumerate(piece.chunks):
                tokens[base + k] = words
