"""The writes of one SQLite write transaction to the text index (`_search_tantivy`), and a
chunk's text read back: `TextBatch` buffers them (savepoints truncate it), then applies them
with Tantivy's writer, commits, waits for its merges and deletes what they left; `locate`
finds a saved output's chunks in its file, `chunk_text` reads them back."""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tantivy

from ..core.search._search_text import Chunk
from ._search_guard import MappedFiles, tantivy_errors
from ._search_tantivy import (
    ANALYZER,
    DOC_SHIFT,
    ERA_CHUNKS,
    HEAP_BYTES,
    TextIndexError,
    WriterBusy,
    advise_maps,
    chunk_era_key,
    chunk_pairs,
    chunk_prefixes,
    chunk_terms,
    era_term,
    newest_era,
    open_index,
    output_tags,
    owner_value,
    preload,
    tighten,
    ts_digits,
)
from ._search_turns import yield_to_searches

__all__ = ["TextBatch", "chunk_text", "locate"]

logger = logging.getLogger("agentscope_ctx")


@dataclass
class _Add:
    rowid: int
    path: str
    off: int
    start_line: int
    line_offset: int
    text: str
    at: tuple[int, int] | None = None
    """Where the text is in its file (byte offset, length), when it is read back from there."""


@dataclass
class TextBatch:
    """The Tantivy side of one SQLite write transaction (see the module docstring)."""

    index_dir: Path
    ops: list[tuple[str, Any]] = field(default_factory=list)
    pending_bytes: int = 0
    merge_deadline: float | None = None
    """When a commit stops waiting for the merges it started (`time.monotonic`; a search's
    catch-up sets it to its own deadline, issue 46 item 11); `None`: when they are done."""
    merging: threading.Thread | None = field(default=None, repr=False)
    """The merges a search's commit left running past its deadline (`_merged`)."""
    mapped: MappedFiles = field(init=False)
    """The files this connection's Tantivy index maps, checked before each use (a file
    damaged while open is found before it is read: `_search_guard`)."""

    def __post_init__(self) -> None:
        self.mapped = MappedFiles(self.index_dir)

    def add(
        self,
        rowid: int,
        path: str,
        off: int,
        start_line: int,
        offset: int,
        text: str,
        at: tuple[int, int] | None = None,
    ) -> None:
        """Index a chunk; `at`: where its text is in the file `path` (byte offset, length; it
        is then not stored)."""
        self.ops.append(("add", _Add(rowid, path, off, start_line, offset, text, at)))
        self.pending_bytes += len(text)
        yield_to_searches()

    def delete_path(self, path: str) -> None:
        """Forget every chunk of the file `path`."""
        self.ops.append(("delete", (path, 0)))

    def delete_from(self, path: str, off: int) -> None:
        """Forget the chunks of `path` whose doc starts at byte `off` or later."""
        self.ops.append(("delete", (path, off)))

    def refresh(self, path: str) -> None:
        """The owner columns of `path`'s docs changed: write its committed chunks again."""
        self.ops.append(("refresh", path))

    def mark(self) -> int:
        return len(self.ops)

    def truncate(self, mark: int) -> None:
        del self.ops[mark:]
        self.pending_bytes = sum(len(op[1].text) for op in self.ops if op[0] == "add")

    def clear(self) -> None:
        self.ops.clear()
        self.pending_bytes = 0

    def apply(self, db: sqlite3.Connection, index: tantivy.Index, deadline: float) -> None:
        """Write the buffered operations to `index` and commit them (inside `db`'s open
        transaction: the ``docs`` rows give each chunk its fields)."""
        if not self.ops:
            return
        with tantivy_errors(self.index_dir):
            self._apply(db, index, deadline)
        self.clear()

    def _apply(self, db: sqlite3.Connection, index: tantivy.Index, deadline: float) -> None:
        deletes: list[tuple[str, int]] = []
        adds: dict[int, _Add] = {}
        refresh: list[str] = []
        root = self.index_dir.parent.parent
        for kind, value in self.ops:
            if kind == "add":
                adds[value.rowid] = value
            elif kind == "delete":
                path, off = value
                deletes.append(value)
                for rowid in [r for r, a in adds.items() if a.path == path and a.off >= off]:
                    del adds[rowid]
            elif value not in refresh:
                refresh.append(value)
        schema = index.schema
        kept: list[_Add] = []
        if refresh:
            self.mapped.check(index)
            searcher = index.searcher()
            for path in refresh:
                gone = [off for p, off in deletes if p == path]
                for add in _committed(searcher, schema, path, root):
                    if add.rowid not in adds and not any(add.off >= off for off in gone):
                        kept.append(add)
        # Tantivy makes its files with the process's umask (the umask is not changed: it is
        # the whole process's, every thread's); `_write` tightens them after its commit, and
        # until then they are in the index's 0700 directory, which no other user can enter
        self._write(index, deadline, deletes, refresh, [*kept, *adds.values()], db)

    def _write(
        self,
        index: tantivy.Index,
        deadline: float,
        deletes: list[tuple[str, int]],
        refresh: list[str],
        adds: list[_Add],
        db: sqlite3.Connection,
    ) -> None:
        schema = index.schema
        self.mapped.check(index)  # before the writer maps what its merges read
        writer = _writer(index, deadline)
        advise_maps(self.index_dir, random=False)  # a merge reads its segments in order
        try:
            self.mapped.check(index)  # what the index holds now (its writer is ours)
            eras = _Eras(index.searcher())
            for path, off in deletes:
                writer.delete_documents_by_query(_path_query(schema, path, off))
            for path in refresh:
                writer.delete_documents_by_term("path", path)
            for add, row in _with_rows(db, adds):
                writer.add_document(_document(add, row, eras))
                yield_to_searches()
            writer.commit()
        except BaseException:
            writer.rollback()
            raise
        finally:
            if self._merged(writer):
                _collect(index, self.mapped, self.index_dir)
                advise_maps(self.index_dir)  # the reader's maps, the merged segments' too
                preload(self.index_dir)
            tighten(self.index_dir)

    def _merged(self, writer: tantivy.IndexWriter) -> bool:
        """Wait for the merges `writer`'s commit started: until `merge_deadline` at most, when
        set; whether they are done. Past it, they run on (`merging`: their writer held, the
        next commit waits for it) and finish on their own thread, as `_finish` says."""
        if self.merge_deadline is None:
            writer.wait_merging_threads()
            return True
        waiter = threading.Thread(
            target=_quiet, args=(writer.wait_merging_threads,), name="search_index_merges"
        )
        waiter.daemon = True
        waiter.start()
        waiter.join(max(self.merge_deadline - time.monotonic(), 0.0))
        if not waiter.is_alive():
            return True
        self.merging = threading.Thread(
            target=_finish, args=(waiter, self.index_dir), name="search_index_merges"
        )
        self.merging.daemon = True
        self.merging.start()
        return False

    def wait_merges(self) -> None:
        """Wait for the merges a search left running (`_merged`; before the connection is
        closed)."""
        merging = self.merging
        if merging is not None:
            merging.join()
            if self.merging is merging:
                self.merging = None


def _quiet(call: Callable[[], object]) -> None:
    """`call()` on a thread of its own; a failure is logged (the next commit collects)."""
    try:
        call()
    except BaseException as exc:
        logger.debug("agentscope_ctx: search index merges: %s", exc)


def _finish(waiter: threading.Thread, index_dir: Path) -> None:
    """The end of a commit whose merges ran past a search's catch-up time (`_merged`): wait
    for them, then delete the files they left and advise, preload and tighten the index's
    files, as the commit does when they end in time (the reader of the connection is not
    touched off its thread: its next search reloads it)."""
    waiter.join()
    _quiet(lambda: _collect_files(index_dir))
    advise_maps(index_dir)
    preload(index_dir)
    tighten(index_dir)


def _collect_files(index_dir: Path) -> None:
    """`_collect` off the connection's thread: with a writer of an `Index` of its own."""
    _collect(open_index(index_dir), None, index_dir)


@dataclass
class _Eras:
    """The ``era`` term of each chunk written: its key's (`era_key`) newest era, until that
    holds `ERA_CHUNKS` chunks (deleted ones count until a merge drops them), then the next."""

    searcher: tantivy.Searcher
    keys: dict[str, list[int]] = field(default_factory=dict)

    def next(self, key: str) -> str:
        at = self.keys.get(key)
        if at is None:
            era = max(newest_era(self.searcher, key), 0)
            at = self.keys[key] = [era, self.searcher.doc_freq("era", era_term(key, era))]
        if at[1] >= ERA_CHUNKS:
            at[0], at[1] = at[0] + 1, 0
        at[1] += 1
        return era_term(key, at[0])


def _collect(index: tantivy.Index, mapped: MappedFiles | None, index_dir: Path) -> None:
    """Delete the files of the segments merged away (when the writer is free at once); with
    `mapped`, this connection's reader lets go of them first."""
    try:
        writer = index.writer(heap_size=HEAP_BYTES, num_threads=1)
    except ValueError:
        return  # taken meanwhile: its own commit collects them
    try:
        if mapped is not None:
            mapped.check(index)  # this process's reader lets go of them (and maps the new ones)
        writer.garbage_collect_files()
        _orphans(index_dir)
    finally:
        del writer


def _orphans(path: Path) -> None:
    """Delete the segment files ``meta.json`` does not name (run holding the writer: no
    merge is writing one). Tantivy's own collection misses those of another `Index` of the
    same directory (each keeps its own list of the files it made: several searching agents
    in one process, several processes)."""
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        live = {str(s["segment_id"]).replace("-", "") for s in meta["segments"]}
        for entry in os.scandir(path):
            segment = entry.name.split(".")[0]
            if re.fullmatch(r"[0-9a-f]{32}", segment) and segment not in live:
                os.unlink(entry.path)
    except (OSError, ValueError, KeyError, TypeError):
        return  # best effort: the next commit tries again


def _writer(index: tantivy.Index, deadline: float) -> tantivy.IndexWriter:
    """Tantivy's writer, waiting for another holder until `deadline`.

    Raises:
        WriterBusy: another holder kept it past `deadline`.
    """
    while True:
        try:
            return index.writer(heap_size=HEAP_BYTES, num_threads=1)
        except ValueError as exc:
            if "LockBusy" not in str(exc):
                raise TextIndexError(f"text index: {exc}") from exc
            if time.monotonic() >= deadline:
                raise WriterBusy(
                    f"the text index is being written by another process: {exc}"
                ) from exc
            time.sleep(0.02)


def _path_query(schema: tantivy.Schema, path: str, off: int) -> tantivy.Query:
    term = tantivy.Query.term_query(schema, "path", path)
    if not off:
        return term
    since = tantivy.Query.range_query(schema, "off", tantivy.FieldType.Unsigned, off, None)
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, term), (tantivy.Occur.Must, since)])


def _committed(
    searcher: tantivy.Searcher, schema: tantivy.Schema, path: str, root: Path
) -> Iterator[_Add]:
    """The committed chunks of `path` (their stored fields)."""
    query = tantivy.Query.term_query(schema, "path", path)
    for _, address in searcher.search(query, max(searcher.num_docs, 1), count=False).hits:
        doc = searcher.doc(address)
        yield _Add(
            int(doc.get_first("rowid") or 0), path, int(doc.get_first("off") or 0),
            int(doc.get_first("start_line") or 0),
            int(doc.get_first("line_offset") or 0), chunk_text(doc, root), _place(doc),
        )  # fmt: skip


def _place(doc: tantivy.Document) -> tuple[int, int] | None:
    length = doc.get_first("flen")
    return None if length is None else (int(doc.get_first("fpos") or 0), int(length))


_ROWS = "SELECT id, path, kind, byte_offset, agent, session, role, ts FROM docs WHERE id IN"


def chunk_text(doc: tantivy.Document, root: Path) -> str:
    """The text of a chunk's document: read from its file (a saved output: written once) at
    the place it names, or kept zlib-compressed in it (2-3x smaller than the doc store's own
    compression alone). A file gone or cut short gives what is left (the next catch-up drops
    or indexes it again)."""
    place = _place(doc)
    if place is None:
        return zlib.decompress(bytes(doc.get_first("body") or b"")).decode("utf-8", "replace")
    try:
        with open(root / str(doc.get_first("path")), "rb") as file:
            file.seek(place[0])
            return file.read(place[1]).decode("utf-8", "replace")
    except OSError:
        return ""


def byte_len(text: str) -> int:
    """The length of `text` in UTF-8 (a lone surrogate: one replacement byte)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "replace"))


def locate(data: bytes, start: int, first_line: int) -> Callable[[Chunk], tuple[int, int] | None]:
    """Where each chunk of a saved output's piece (`data`, at byte `start` of the file; its
    first line `first_line`) is in the file: (byte offset, length), or `None` when its bytes
    do not decode to its text exactly (a ``\r\n`` or invalid UTF-8 inside: then its text is
    stored).

    The pieces of a long line come in order: the byte offset of each is measured on from the
    end of the one before (`_Cursor`), not from the line's start, so locating them costs the
    line's length once. Measured from the start, a one-line output of n bytes cost some
    n^2 / 4 KB: 24 MB indexed in 37 s against 9 s as short lines, 32 MB in 422 s (issue 46)."""
    starts = [0]
    at = data.find(b"\n")
    while at >= 0:
        starts.append(at + 1)
        at = data.find(b"\n", at + 1)
    cursor = _Cursor()

    def where(chunk: Chunk) -> tuple[int, int] | None:
        k = chunk.start_line - first_line
        if not 0 <= k < len(starts):
            return None
        a = starts[k]
        length = byte_len(chunk.text)
        if chunk.line_offset:
            end = starts[k + 1] - 1 if k + 1 < len(starts) else len(data)
            a += cursor.bytes_to(k, chunk.line_offset, lambda: data[a:end])
            cursor.moved(k, chunk.line_offset + len(chunk.text), a - starts[k] + length)
        if data[a : a + length].decode("utf-8", "replace") != chunk.text:
            return None
        return start + a, length

    return where


@dataclass
class _Cursor:
    """The line `locate` is in (its number in the piece, its text) and a place in it: so
    many characters from its start are so many bytes."""

    line: int = -1
    text: str = ""
    chars: int = 0
    at: int = 0
    """Bytes from the line's start to `chars` characters."""

    def bytes_to(self, line: int, chars: int, raw: Callable[[], bytes]) -> int:
        """The bytes of the first `chars` characters of the line `line` (its bytes: `raw`)."""
        if line != self.line:
            self.line, self.text = line, raw().decode("utf-8", "replace")
            self.chars = self.at = 0
        if chars < self.chars:  # not in order: from the start
            self.chars = self.at = 0
        self.at += byte_len(self.text[self.chars : chars])
        self.chars = chars
        return self.at

    def moved(self, line: int, chars: int, at: int) -> None:
        """A chunk of `line` ends `chars` characters, `at` bytes into it."""
        if line == self.line:
            self.chars, self.at = chars, at


def _with_rows(
    db: sqlite3.Connection, adds: Sequence[_Add]
) -> Iterator[tuple[_Add, tuple[Any, ...]]]:
    """Each chunk with its ``docs`` row (chunks of a doc that is gone are left out)."""
    for at in range(0, len(adds), 500):
        part = adds[at : at + 500]
        ids = sorted({a.rowid >> DOC_SHIFT for a in part})
        marks = ",".join("?" * len(ids))
        rows = {row[0]: row for row in db.execute(f"{_ROWS} ({marks})", ids)}
        for add in part:
            row = rows.get(add.rowid >> DOC_SHIFT)
            if row is not None and row[1] == add.path:
                yield add, row


def _document(add: _Add, row: tuple[Any, ...], eras: _Eras) -> tantivy.Document:
    doc_id, path, kind, off, agent, session, role, ts = row
    doc = tantivy.Document()
    terms = chunk_terms(add.text)
    doc.add_text("terms", terms)
    words = ANALYZER.analyze(terms)
    doc.add_text("prefixes", chunk_prefixes(words))
    if not terms.isascii():
        doc.add_text("pairs", chunk_pairs(words))
    if add.at is None:
        doc.add_bytes("body", zlib.compress(add.text.encode("utf-8", "replace"), 6))
    else:
        doc.add_unsigned("fpos", add.at[0])
        doc.add_unsigned("flen", add.at[1])
    doc.add_unsigned("rowid", add.rowid)
    doc.add_unsigned("start_line", add.start_line)
    doc.add_unsigned("line_offset", add.line_offset)
    doc.add_unsigned("doc", doc_id)
    doc.add_unsigned("off", int(off))
    for name, value in (
        ("path", path), ("kind", kind), ("role", owner_value(role)),
        ("agent", owner_value(agent)), ("session", owner_value(session)),
    ):  # fmt: skip
        doc.add_text(name, value)
    tags = output_tags(path) if kind == "tool_result" else None
    if tags is not None:
        doc.add_text("tags", "a:" + tags[0])
        doc.add_text("tags", "s:" + tags[1])
    key = chunk_era_key(agent, session, tags)
    doc.add_text("key", key)
    doc.add_text("era", eras.next(key))
    stamp = ts_digits(ts)
    if stamp is not None:
        doc.add_unsigned("ts", stamp)
    return doc
