"""The write transactions of the local search index (`_search_db`): SQLite's, with what they
do to the text index (`_search_text_batch`) committed to Tantivy just before SQLite's own
commit; `batch` makes the writes of one operation share a transaction (each a savepoint),
committed every `FLUSH_BYTES` of chunks."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core._errors import PersistenceError
from ._search_tantivy import FLUSH_BYTES, WriterBusy
from ._search_text_batch import TextBatch

__all__ = [
    "BUSY_SECONDS",
    "IndexBusy",
    "IndexConnection",
    "batch",
    "busy",
    "text_batch",
    "until",
    "write",
]

BUSY_SECONDS = 60.0
"""How long a caller that gives no wait of its own waits for another writer, each time."""


def until(deadline: float | None) -> float:
    """When a wait for another writer ends: `deadline` (`time.monotonic`), or, when the
    caller has none, `BUSY_SECONDS` from now (a bound on each wait, not on the caller's run)."""
    return time.monotonic() + BUSY_SECONDS if deadline is None else deadline


class IndexBusy(PersistenceError):
    """The index is held by another writer (another process's write transaction or
    ``.lock``, or another thread of this process) for longer than the caller may wait. The
    files are untouched: what was not indexed is caught up later."""


def busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` says another connection holds a lock (wait, do not rebuild)."""
    name = str(getattr(exc, "sqlite_errorname", ""))
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return True
    return "locked" in str(exc).lower()


class IndexConnection(sqlite3.Connection):
    """A connection to the index database with the text index of its generation."""

    text: TextBatch
    """What the open write transaction does to the text index (applied at its commit)."""
    index: Any
    """The `tantivy.Index` of this generation."""
    root: Path
    """The working dir (the files a chunk's text is read back from)."""
    batching: int = 0
    savepoints: int = 0
    commits: int = 0
    """Write transactions committed that changed the text index (each a Tantivy commit)."""
    outputs_whole: tuple[int, int] | None = None
    """The ``tool_result/`` folder's `folder_key` when a catch-up found every output in it
    indexed whole (in this generation: a rebuild opens a new connection). While the folder
    keeps that key no output was added or removed (each is written once, renamed in whole),
    so a catch-up need not list them: its cost does not grow with the outputs saved."""


def text_batch(db: sqlite3.Connection) -> TextBatch:
    """What `db`'s open write transaction does to the text index."""
    assert isinstance(db, IndexConnection)
    return db.text


def _commit(db: IndexConnection, deadline: float) -> None:
    """Commit the text index's batch, then SQLite's transaction."""
    db.commits += bool(db.text.ops)
    try:
        db.text.apply(db, db.index, deadline)
    except WriterBusy as exc:
        db.text.clear()
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise IndexBusy(str(exc)) from exc
    except BaseException:
        db.text.clear()
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _begin(db: IndexConnection, deadline: float) -> None:
    left = max(deadline - time.monotonic(), 0.0)
    db.execute(f"PRAGMA busy_timeout = {int(left * 1000)}")
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if busy(exc):
            raise IndexBusy(f"the search index is being written by another process: {exc}") from exc
        raise
    db.text.clear()


@contextmanager
def write(db: sqlite3.Connection, deadline: float | None = None) -> Iterator[None]:
    """A write transaction, taken at once: waits for another writer until `deadline`
    (`time.monotonic`; `None`: up to `BUSY_SECONDS`). Inside `batch`, a savepoint of the
    batch's transaction (which commits first when it holds `FLUSH_BYTES` of chunks).

    Raises:
        IndexBusy: another writer held the database past `deadline`.
    """
    assert isinstance(db, IndexConnection)
    end = until(deadline)
    if db.batching and db.in_transaction and db.text.pending_bytes >= FLUSH_BYTES:
        _commit(db, end)
    if db.batching and db.in_transaction:
        name, mark = f"s{db.savepoints}", db.text.mark()
        db.savepoints += 1
        db.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            db.execute(f"ROLLBACK TO {name}")
            db.execute(f"RELEASE {name}")
            db.text.truncate(mark)
            raise
        db.execute(f"RELEASE {name}")
        return
    _begin(db, end)
    try:
        yield
    except BaseException:
        db.text.clear()
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    if not db.batching:
        _commit(db, end)


@contextmanager
def batch(db: sqlite3.Connection, deadline: float | None = None) -> Iterator[None]:
    """The `write`s inside share one transaction (committed at the end; see `write`)."""
    assert isinstance(db, IndexConnection)
    db.batching += 1
    try:
        yield
    except BaseException:
        db.batching -= 1
        if not db.batching and db.in_transaction:
            db.text.clear()
            db.execute("ROLLBACK")
        raise
    db.batching -= 1
    if not db.batching and db.in_transaction:
        _commit(db, until(deadline))
