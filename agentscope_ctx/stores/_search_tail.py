"""The tail of the local search index (issue 46 item 11): what the files hold that the index
has not committed yet, read by a search into memory so that it never commits.

A search must see every record appended before it starts. Indexing them in its own path
meant a Tantivy commit, which waits for the disk (its fsyncs: 50-730 ms on a loaded virtual
disk), and the background indexing of ten handles kept such work coming. So a search answers
from the committed index plus the tail: inside one read transaction of the index database
(`read_tail` is given it open), which fixes how far each file is indexed (``sources``) and
which ``docs`` rows a hit of the text index joins to (a chunk committed by another writer
after that is left out of the index's hits and is in the tail: Tantivy commits before
SQLite), it lists the files and indexes what lies past that into an in-memory database of
the index's schema, by the same steps (`_search_files`: dialog lines, saved outputs in
pieces, memory files whole; the owners of the outputs as the index has them, with those this
handle kept while the index was busy, and a tenant's claim of its unowned outputs), their
chunks collected rather than written (`TailText`). The dialog records and the outputs' rests
are read, chunked and tokenized once per process, whichever handle searches
(`_search_record.tail_records`, `_search_tail_output.tail_output`); each search replays them
into its own tail database, where the owners are its own. `_search_tail_match` matches and
scores them. The commits happen only in the background indexing, which a search never waits
for.

The tail is bounded by how far the background indexing lags. Past `TAIL_BYTES` of dialog
and memory text, `read_tail` returns `None` and the search indexes what is missing itself,
as before, then reads the (small) tail left. Saved outputs are read into the tail when the
rest of each fits in `TAIL_OUTPUT_BYTES` left; a larger one is counted as pending
(`SearchResult.pending`), as a search always left the outputs past its budget to the
background. No dialog record is ever left out: it is either committed in the snapshot or
read from its file.
"""

from __future__ import annotations

import functools
import heapq
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

from ..core._tenant import Tenant
from ..core.search._search_hits import Hit, build_hits
from ..core.search._search_text import Query
from ._search_db import _SCHEMA, IndexConnection, Owner, set_owner, unowned_outputs, write
from ._search_files import (
    ALL_KINDS,
    folder_key,
    index_file,
    source_files,
    up_to_date,
)
from ._search_guard import tantivy_errors
from ._search_query import ranked_rows
from ._search_record import Record, tail_records
from ._search_tail_match import TailChunk, tail_rows
from ._search_tail_output import tail_output
from ._search_tantivy import DOC_SHIFT, query_tokens
from ._search_text_batch import TextBatch, _Add

__all__ = [
    "TAIL_BYTES",
    "TAIL_OUTPUT_BYTES",
    "Tail",
    "TailText",
    "TailTooLarge",
    "ranked_with_tail",
    "read_tail",
    "searched",
]

TAIL_BYTES = 4 << 20
"""Dialog and memory bytes the index lacks past which a search indexes them itself (with a
commit) before it reads the tail."""
TAIL_OUTPUT_BYTES = 2 << 20
"""Bytes of saved outputs a search reads into its tail (`SEARCH_INDEX_BYTES`, what it indexed
before; an output whose rest does not fit in what is left is pending: the background
indexing has it; where none runs, the search indexes a piece of it, as before)."""
TOKENS_CACHED = 2048
"""Chunks of memory files whose tokens the process keeps (`_tokens`; the records' and the
outputs' are kept with them)."""

Learn = Callable[[sqlite3.Connection, Record], None]


class TailTooLarge(Exception):
    """The index lacks more than a search reads into its tail: it indexes it first."""


@dataclass
class Tail:
    """What a search read of the files past the committed index."""

    chunks: list[TailChunk] = field(default_factory=list)
    hidden: set[str] = field(default_factory=set)
    """Files whose committed chunks are not to be shown: gone, or read again from their
    start into the tail (replaced, shrunk, a memory file changed)."""
    pending: int = 0
    """Saved outputs neither committed whole nor read into the tail."""
    files: int = 0
    """Files read into the tail (whole or a part)."""
    text_bytes: int = 0
    """Bytes of dialog and memory files read into the tail."""
    claimed: list[str] = field(default_factory=list)
    """Committed outputs without an owner that the tail read again as the tenant's."""


@dataclass
class TailText(TextBatch):
    """The text side of the tail's database: the chunks its writes add, collected by rowid
    (never written to a text index)."""

    adds: dict[int, _Add] = field(default_factory=dict)
    tokens: dict[int, list[str]] = field(default_factory=dict)
    """The tokens of the chunks of saved outputs, by rowid (`tail_output`)."""

    def apply(self, db: sqlite3.Connection, index: Any, deadline: float) -> None:
        for kind, value in self.ops:
            if kind == "add":
                self.adds[value.rowid] = value
            elif kind == "delete":
                path, off = value
                for rowid in [r for r, a in self.adds.items() if a.path == path and a.off >= off]:
                    del self.adds[rowid]
        self.clear()


def _text(mem: IndexConnection) -> TailText:
    assert isinstance(mem.text, TailText)
    return mem.text


def _tail_db(root: Path) -> IndexConnection:
    db = sqlite3.connect(
        ":memory:", isolation_level=None, check_same_thread=False, factory=IndexConnection
    )
    db.executescript(_SCHEMA)
    assert isinstance(db, IndexConnection)
    db.root, db.index = root, None
    db.text = TailText(root / "index" / "tail")
    return db


def _copy(
    db: sqlite3.Connection, tail: sqlite3.Connection, table: str, key: str, names: list[str]
) -> None:
    """The rows of `table` (whose key column is `key`) named `names`, from the index to the
    tail's database."""
    for at in range(0, len(names), 500):
        part = names[at : at + 500]
        marks = ",".join("?" * len(part))
        rows = db.execute(f"SELECT * FROM {table} WHERE {key} IN ({marks})", part).fetchall()
        if rows:
            tail.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * len(rows[0]))})", rows)


def _stale(
    db: IndexConnection, root: Path
) -> tuple[dict[str, tuple[str, os.stat_result, int, bool]], set[str]]:
    """The files the index lacks something of, by path: (kind, stat, bytes missing, whether
    it is read again from its start), and the paths the index holds that are gone."""
    kinds: tuple[str, ...] = ALL_KINDS
    folder = folder_key(root / "tool_result")
    if folder is not None and folder == db.outputs_whole:
        kinds = tuple(k for k in kinds if k != "tool_result")
    marks = ",".join("?" * len(kinds))
    known = {
        row[0]: row[1:]
        for row in db.execute(
            f"SELECT path, inode, size, stamp FROM sources WHERE kind IN ({marks})", kinds
        )
    }
    present = source_files(root, kinds)
    gone = {path for path in known if path not in present}
    stale = {}
    for rel, (kind, stat) in present.items():
        state = known.get(rel)
        if state is not None and up_to_date(kind, state, stat):
            continue
        again = state is not None and (
            kind == "memory"
            or state[0] != stat.st_ino
            or (kind == "dialog" and state[1] > stat.st_size)
        )
        done = 0 if state is None or again or kind == "memory" else int(state[1])
        stale[rel] = (kind, stat, stat.st_size - done, again)
    if "tool_result" in kinds and not any(
        p.startswith("tool_result/") for p in (*stale, *gone)
    ):  # every output listed is committed whole: not listed while the folder stays so
        db.outputs_whole = folder
    return stale, gone


def read_tail(
    db: IndexConnection,
    root: Path,
    learn: Learn,
    owners: list[tuple[str, Owner, str | None]],
    tenant: Tenant | None,
    most: int | None = TAIL_BYTES,
    output_bytes: int = TAIL_OUTPUT_BYTES,
) -> Tail | None:
    """The tail of the index `db` (in an open read transaction) over the files of `root`
    (see the module docstring); `learn` takes in what a dialog record tells (`CatchUp._learn`),
    `owners` are those the handle kept while the index was busy. The committed outputs the
    index knows no owner of whose names carry the tags of `tenant` are read into the tail
    again, claimed by it (`Tail.claimed`: `CatchUp._claim` writes the claim in the
    background); the saved outputs are read while their rests fit in `output_bytes`. `None`
    when the index lacks more than `most` bytes of dialog and memory text (`None`: no
    bound)."""
    stale, gone = _stale(db, root)
    tail = Tail(hidden=set(gone))
    if tenant is not None and tenant.scope != "shared":
        for name in unowned_outputs(db, tenant.tags):
            try:
                stat = os.stat(root / name)
            except OSError:
                continue
            tail.claimed.append(name)
            stale[name] = ("tool_result", stat, stat.st_size, True)
    if not stale:
        return tail
    text = sum(left for kind, _, left, _ in stale.values() if kind != "tool_result")
    if most is not None and text > most:
        return None
    tail.text_bytes = text
    mem = _tail_db(root)
    try:
        tail.hidden.update(rel for rel, (kind, _, _, again) in stale.items() if again)
        _copy(db, mem, "sources", "path", [rel for rel in stale if rel not in tail.hidden])
        outputs = sorted(
            (left, rel) for rel, (kind, _, left, _) in stale.items() if kind == "tool_result"
        )
        _copy(db, mem, "owners", "name", [rel for _, rel in outputs])
        with write(mem):
            for name, owner, ts in owners:
                set_owner(mem, name, owner, ts)
        budget, dialog = output_bytes, []
        for left, rel in outputs:
            if left > budget:
                tail.pending += 1
                tail.hidden.discard(rel)  # what the index holds of it is shown
                continue
            budget -= left
            tail_output(mem, root, rel, _text(mem).tokens)
            tail.files += 1
        for rel, (kind, _, _, _) in stale.items():
            if kind == "memory":
                index_file(mem, root, rel, kind, None)
            elif kind == "dialog":
                dialog.extend(tail_records(mem, root, rel, learn))
            else:
                continue
            tail.files += 1
        _owned_again(db, mem, root, stale, tail)
        if tenant is not None and tenant.scope != "shared":
            with write(mem):  # as `CatchUp._claim` does in the index
                for name in unowned_outputs(mem, tenant.tags):
                    set_owner(mem, name, (tenant.agent, tenant.session, None, None), None)
        tail.chunks = [*_chunks(mem), *dialog]
    finally:
        mem.close()
    return tail


def _owned_again(
    db: IndexConnection, mem: IndexConnection, root: Path, stale: dict[str, Any], tail: Tail
) -> None:
    """Read again into the tail the committed outputs a record of the tail names whose
    committed chunks have no owner (a dialog record names the owner of an output: a lost
    index learns it again so): their chunks in the tail carry it, those in the index are not
    shown."""
    named = [
        row[0]
        for row in mem.execute("SELECT name FROM owners WHERE agent IS NOT NULL")
        if row[0] not in stale
    ]
    for at in range(0, len(named), 500):
        part = named[at : at + 500]
        marks = ",".join("?" * len(part))
        for (rel,) in db.execute(
            f"SELECT DISTINCT path FROM docs WHERE path IN ({marks}) AND agent IS NULL", part
        ).fetchall():
            try:
                tail_output(mem, root, rel, _text(mem).tokens)
            except OSError:
                continue
            tail.hidden.add(rel)
            tail.files += 1


@functools.lru_cache(maxsize=TOKENS_CACHED)
def _tokens(text: str) -> list[str]:
    """`query_tokens` of a chunk's text, kept for the next searches (of any handle of the
    process): a tail is read again by each search until it is committed, and its tokens are
    most of that cost."""
    return query_tokens(text)


def _chunks(mem: IndexConnection) -> list[TailChunk]:
    """The chunks the tail's database collected, with their ``docs`` rows as they end."""
    assert isinstance(mem.text, TailText)
    rows = {
        row[0]: row[1:]
        for row in mem.execute(
            "SELECT id, path, kind, line, byte_offset, agent, role, tool, args, ts, session "
            "FROM docs"
        )
    }
    chunks = []
    for rowid, add in sorted(mem.text.adds.items()):
        row = rows.get(rowid >> DOC_SHIFT)
        if row is None or row[0] != add.path:
            continue
        body = (add.text, add.start_line, add.line_offset)
        tokens = mem.text.tokens.get(rowid)
        tokens = _tokens(add.text) if tokens is None else tokens
        chunks.append(TailChunk((*body, *row[:9]), row[9], tokens))
    return chunks


def ranked_with_tail(
    db: IndexConnection, query: Query, every: bool, params: dict[str, Any], fetch: int, tail: Tail
) -> Iterator[tuple[Any, ...]]:
    """`ranked_rows` of the committed index (the files `tail` hides left out) merged by score
    with the tail's matches (`tail_rows`): best first."""
    indexed = (
        row for row in ranked_rows(db, query, every, params, fetch) if row[4] not in tail.hidden
    )
    if not tail.chunks:
        return indexed
    with tantivy_errors(db.text.index_dir):
        searcher = db.index.searcher()  # the reader `ranked_rows` reloaded
        total = searcher.num_docs
        rows = tail_rows(
            tail.chunks, query, every, params, lambda w: searcher.doc_freq("terms", w), total
        )
    return heapq.merge(rows, indexed, key=lambda row: float(row[0]))  # ties: the tail first


def searched(
    db: IndexConnection,
    read: Callable[[], Tail],
    query: Query,
    params: dict[str, Any],
    limit: int,
) -> tuple[list[Hit], bool, Tail]:
    """The best `limit` hits of `query` among the committed index `db` and its tail (`read`
    on it inside one read transaction: see the module docstring), whether they hold every
    term (else any), and the tail."""
    db.execute("BEGIN")  # one snapshot of how far each file is indexed, and of its docs
    try:
        tail = read()
        fetch = 4 * limit + 8
        rows = ranked_with_tail(db, query, True, params, fetch, tail)
        first = next(rows, None)
        every = first is not None or len(query.terms) == 1
        if first is not None:
            rows = chain([first], rows)
        elif not every:
            rows = ranked_with_tail(db, query, False, params, fetch, tail)
        return build_hits(rows, db.root, query, limit), every, tail
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
