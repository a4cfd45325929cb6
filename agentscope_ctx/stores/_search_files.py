"""The files behind the search index and how each is indexed (`SearchIndex`, `_search`):
which files count, a memory file indexed whole, a saved output in pieces (`index_piece`), a
dialog file by the whole lines appended since the last time. Each step runs in its own write
transaction (waiting at most `wait` seconds for another writer)."""

from __future__ import annotations

import codecs
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

from ..core.search._index_pieces import cut_piece, piece_lines
from ..core.search._search_text import chunk_lines
from ._search_db import (
    add_doc,
    drop_one,
    text_batch,
    write,
)
from ._search_text_batch import locate

__all__ = [
    "ALL_KINDS",
    "PIECE_READ",
    "file_stamp",
    "folder_key",
    "index_dialog",
    "index_file",
    "index_piece",
    "source_files",
    "up_to_date",
]

_BATCH_BYTES = 4 << 20
"""Dialog bytes indexed per write transaction (what another writer may wait for)."""
_READ_BYTES = 4 << 20
PIECE_READ = 256 << 10
"""Bytes a saved output is read by while its piece is cut (`cut_piece`)."""
_FILES = (
    ("tool_result", re.compile(r"[^.].*\.txt")),
    ("dialog", re.compile(r"\d{4}-\d{2}-\d{2}\.jsonl")),
    ("memory", re.compile(r"[^.].*\.md")),
)
ALL_KINDS = tuple(kind for kind, _ in _FILES)
RACY_SECONDS = 2.0
"""How old a folder's mtime must be, when it is read, to be trusted to move at the next change
(a file added within the same clock tick as the last one leaves it as it was)."""


def folder_key(path: Path) -> tuple[int, int] | None:
    """A folder's (inode, mtime in ns), which a file added, renamed in or removed changes;
    `None` when the folder is missing or its mtime is within `RACY_SECONDS` of now."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    if time.time_ns() - stat.st_mtime_ns < RACY_SECONDS * 1e9:
        return None
    return stat.st_ino, stat.st_mtime_ns


def file_stamp(seconds: float) -> str:
    """A file time as the index stores it (local, to the second)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def up_to_date(kind: str, state: tuple[int, int, int], stat: os.stat_result) -> bool:
    """Whether a file indexed as `state` (inode, size, stamp) needs nothing more."""
    if kind == "tool_result":  # written once, atomically; indexed in pieces (`index_piece`)
        return state[1] >= stat.st_size
    if (state[0], state[1]) != (stat.st_ino, stat.st_size):
        return False
    return kind == "dialog" or state[2] == stat.st_mtime_ns


def _text_lines(file: IO[bytes]) -> Iterator[str]:
    """The lines of a binary file as `read_file` counts them (``\\n`` ends a line, a
    ``\\r`` before it is dropped), decoded in large blocks."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    rest = ""
    while True:
        block = file.read(_READ_BYTES)
        text = rest + decoder.decode(block, final=not block)
        lines = text.replace("\r\n", "\n").split("\n")
        rest = lines.pop()
        yield from lines
        if not block:
            break
    if rest:
        yield rest


def source_files(root: Path, kinds: Iterable[str]) -> dict[str, tuple[str, os.stat_result]]:
    """The files to index under `root` (of `kinds`), by path relative to it: regular files
    of the names this package writes, each with its kind and stat."""
    found: dict[str, tuple[str, os.stat_result]] = {}
    for kind, pattern in _FILES:
        if kind not in kinds:
            continue
        try:
            entries = sorted(os.scandir(root / kind), key=lambda e: e.name)
        except FileNotFoundError:
            continue
        for entry in entries:
            try:
                if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                    found[f"{kind}/{entry.name}"] = (kind, entry.stat(follow_symlinks=False))
            except FileNotFoundError:
                continue  # removed since the listing (a cleanup, a forget): gone
    return found


def index_file(db: sqlite3.Connection, root: Path, rel: str, kind: str, wait: float | None) -> None:
    """Index a memory file whole (again, when it changed)."""
    with write(db, wait), open(root / rel, "rb") as file:
        stat = os.fstat(file.fileno())
        state = db.execute(
            "SELECT inode, size, stamp FROM sources WHERE path = ?", (rel,)
        ).fetchone()
        if state is not None:
            if state == (stat.st_ino, stat.st_size, stat.st_mtime_ns):
                return
            drop_one(db, rel)
        text_batch(db).delete_path(rel)  # what a crash left in the text index
        values = (rel, kind, 1, 0, None, None, "memory", None, None, file_stamp(stat.st_mtime))
        add_doc(db, values, chunk_lines(_text_lines(file)))
        db.execute(
            "INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, 0, ?)",
            (rel, kind, stat.st_ino, stat.st_size, stat.st_mtime_ns),
        )


def _indexed(
    db: sqlite3.Connection, rel: str, stat: os.stat_result, *, appended: bool
) -> tuple[int, int] | None:
    """How far `rel` is indexed (bytes, lines), by its ``sources`` row (`None`: it has none).
    A file replaced since (another inode) or, with `appended` (a file that only grows),
    shrunk is indexed again from the start: its entries are dropped, and it is at (0, 0)."""
    state = db.execute("SELECT inode, size, lines FROM sources WHERE path = ?", (rel,)).fetchone()
    if state is None:
        return None
    if state[0] == stat.st_ino and (not appended or state[1] <= stat.st_size):
        return int(state[1]), int(state[2])
    drop_one(db, rel)
    return 0, 0


def index_piece(
    db: sqlite3.Connection, root: Path, rel: str, wait: float | None, limit: int
) -> tuple[int, bool]:
    """Index the next piece of a saved output (`_index_pieces.cut_piece`: at least `limit`
    bytes, cut after a newline) from where the last piece ended; its ``sources`` row holds
    how far (bytes in ``size``, lines in ``lines``). Returns the bytes indexed and whether
    the output is now indexed whole."""
    with write(db, wait), open(root / rel, "rb") as file:
        stat = os.fstat(file.fileno())
        indexed = _indexed(db, rel, stat, appended=False)  # outputs are written once
        done, line = indexed or (0, 0)
        if indexed is not None and done >= stat.st_size:
            return 0, True
        text_batch(db).delete_from(rel, done)  # what a crash left in the text index
        file.seek(done)
        data = cut_piece(iter(lambda: file.read(PIECE_READ), b""), limit)
        owner = db.execute(
            "SELECT agent, session, tool, args, ts FROM owners WHERE name = ?", (rel,)
        ).fetchone() or (None, None, None, None, None)
        values = (rel, "tool_result", 1, done, *owner[:2], "tool", *owner[2:4])
        ts = owner[4] or file_stamp(stat.st_mtime)
        chunks = chunk_lines(piece_lines(data), line + 1)
        add_doc(db, (*values, ts), chunks, locate(data, done, line + 1))
        done, line = done + len(data), line + data.count(b"\n")
        db.execute(
            "INSERT OR REPLACE INTO sources VALUES (?, 'tool_result', ?, ?, ?, ?)",
            (rel, stat.st_ino, done, line, stat.st_mtime_ns),
        )
        return len(data), done >= stat.st_size


def index_dialog(
    db: sqlite3.Connection,
    root: Path,
    rel: str,
    deadline: float | None,
    wait: float | None,
    add_record: Callable[[sqlite3.Connection, str, int, int, bytes], None],
) -> None:
    """Index the whole lines appended to a dialog file since the last time (all of it when
    the file was replaced or shrank), `_BATCH_BYTES` per transaction, until `deadline`;
    `add_record` indexes one record line."""
    more = True
    while more and (deadline is None or time.monotonic() <= deadline):
        with write(db, wait), open(root / rel, "rb") as file:
            stat = os.fstat(file.fileno())
            offset, line = _indexed(db, rel, stat, appended=True) or (0, 0)
            text_batch(db).delete_from(rel, offset)  # what a crash left in the text index
            file.seek(offset)
            data = file.read(_BATCH_BYTES)
            if len(data) == _BATCH_BYTES and b"\n" not in data:  # one line longer than that
                data += file.readline()
            end = data.rfind(b"\n") + 1
            for raw in data[:end].split(b"\n")[:-1]:
                line += 1
                add_record(db, rel, line, offset, raw)
                offset += len(raw) + 1
            db.execute(
                "INSERT OR REPLACE INTO sources VALUES (?, 'dialog', ?, ?, ?, 0)",
                (rel, stat.st_ino, offset, line),
            )
            more = end > 0 and offset < stat.st_size
