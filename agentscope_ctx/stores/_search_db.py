"""`IndexDatabase`: the SQLite file behind `SearchIndex`, and how it is replaced when damaged.

On disk, under ``{working_dir}/index/``:

- ``current``: the file name of the live database, replaced atomically;
- ``search-{hex}.sqlite3`` (and SQLite's ``-wal``, ``-shm``): the database. A rebuild creates a
  new name and never reuses one, so a process still holding the old file cannot touch the new
  one (SQLite finds its journal files by name);
- ``.lock``: ``flock``-ed while a database is created or replaced.

All of them are private to their owner (``0600`` in a ``0700`` directory, `_private`).

Nobody waits on another process without a bound: each `IndexDatabase.run` says how long it may
wait (for another thread of this process, ``.lock``, and SQLite's write lock, all within one
deadline; or, given none, up to `BUSY_SECONDS` each time it waits), and raises `IndexBusy`
past it. A save waits not at all (its notification is then
skipped and caught up later); a search waits at most its catch-up time.

- ``tantivy-{hex}/``: the text index of that database (`_search_tantivy`), made and replaced
  with it.

Schema, ``PRAGMA user_version`` 2 (paths are relative to ``working_dir``)::

    sources(path, kind, inode, size, lines, stamp)  how far each file is indexed (bytes and
        lines for a dialog file; mtime in ns as `stamp` for a memory file)
    docs(id, path, kind, line, byte_offset, agent, session, role, tool, args, ts)
        one per dialog record (its line and byte offset), saved output or memory file
    owners(name, agent, session, tool, args, ts)    who saved each tool_result file, filled
        at save and from the dialog; kept apart so the order of file and owner does not matter
    and in the Tantivy index, one document per chunk: rowid = doc id << 24 | chunk number

Every process opens the file named by ``current`` and re-checks that name (one ``stat``) at
each use. SQLite's WAL mode lets searches run while another process writes. A write
transaction (`write`) buffers what it does to the text index (`IndexConnection.text`) and
commits it to Tantivy just before SQLite's own commit; inside `batch`, the writes of one
operation share a transaction (each a savepoint), committed every `FLUSH_BYTES` of chunks.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from itertools import islice
from pathlib import Path
from typing import TypeVar

from ..core._errors import PersistenceError
from ..core._private import FILE_MODE, file_lock, private_dir, write_atomic
from ..core.search._search_text import Chunk, storable
from ._search_tantivy import DOC_SHIFT, create_index, open_index
from ._search_text_batch import TextBatch
from ._search_txn import (
    BUSY_SECONDS,
    IndexBusy,
    IndexConnection,
    batch,
    busy,
    text_batch,
    until,
    write,
)

__all__ = [
    "BUSY_SECONDS",
    "IndexBusy",
    "IndexConnection",
    "IndexDatabase",
    "Owner",
    "add_doc",
    "batch",
    "drop_one",
    "set_owner",
    "text_batch",
    "unowned_outputs",
    "write",
]

logger = logging.getLogger("agentscope_ctx")

SCHEMA_VERSION = 5  # 3: the text index's ``prefixes`` field; 4: its ``era`` and ``pairs``
# fields; 5: an owner's records and outputs in one era key, and its ``key`` field (an older
# index is made again)
_DB_NAME = re.compile(r"search-[0-9a-f]{12}\.sqlite3")
_OUTPUT = re.compile(r"tool_result/[^/.][^/]*\.txt")
_UNOWNED = (
    "CREATE INDEX IF NOT EXISTS docs_unowned ON docs(path) "
    "WHERE kind = 'tool_result' AND agent IS NULL;"
)
"""The saved outputs whose owner is not known (`unowned_outputs`); added to a database of an
older build at its first open (no new schema version: it needs no rebuild)."""
_SCHEMA = f"""
CREATE TABLE sources(path TEXT PRIMARY KEY, kind TEXT NOT NULL, inode INTEGER NOT NULL,
    size INTEGER NOT NULL, lines INTEGER NOT NULL, stamp INTEGER NOT NULL);
CREATE TABLE docs(id INTEGER PRIMARY KEY, path TEXT NOT NULL, kind TEXT NOT NULL,
    line INTEGER NOT NULL, byte_offset INTEGER NOT NULL, agent TEXT, session TEXT, role TEXT,
    tool TEXT, args TEXT, ts TEXT);
CREATE INDEX docs_by_path ON docs(path);
{_UNOWNED}
CREATE TABLE owners(name TEXT PRIMARY KEY, agent TEXT, session TEXT, tool TEXT, args TEXT,
    ts TEXT);
PRAGMA user_version={SCHEMA_VERSION};
"""

T = TypeVar("T")
_Key = tuple[int, int, int]
Owner = tuple[str | None, str | None, str | None, str | None]
"""What is known of a saved output: (agent, session, tool, key arguments)."""


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    """Whether `exc` says the database itself is bad (rebuild), not busy or out of disk."""
    name = str(getattr(exc, "sqlite_errorname", ""))
    if name.startswith("SQLITE_CORRUPT") or name == "SQLITE_NOTADB":
        return True
    text = str(exc).lower()
    return any(
        s in text for s in ("malformed", "not a database", "no such", "corrupt", "schema version")
    )


@contextmanager
def _flock(path: Path, deadline: float) -> Iterator[None]:
    """Hold `path` locked (a private lock file, `_private.file_lock`), waiting for another
    process until `deadline` at most.

    Raises:
        IndexBusy: another process held it past `deadline`.
    """
    with ExitStack() as stack:
        try:
            stack.enter_context(file_lock(path, deadline=deadline))
        except TimeoutError:
            raise IndexBusy(
                f"{str(path)!r} is held by another process (creating the index)"
            ) from None
        yield


def _text_dir(name: str) -> str:
    """The text index's directory of the database file `name` (``search-{hex}.sqlite3``)."""
    return "tantivy-" + name[len("search-") : -len(".sqlite3")]


class IndexDatabase:
    """One process's connection to the index database of a working dir; thread-safe (one
    operation at a time)."""

    def __init__(self, index_dir: Path) -> None:
        self.dir = index_dir
        self._lock = threading.RLock()
        self._db: IndexConnection | None = None
        self._key: _Key | None = None
        self.rebuilds = 0
        """Damaged generations this process replaced (`SearchResult.rebuilt`)."""
        self.deadline: float | None = 0.0
        """When the current `run` stops waiting for others (`time.monotonic`; `None`: each
        wait `BUSY_SECONDS` at most): pass it to `write`."""
        self._read_lock = threading.Lock()
        self._reader: IndexConnection | None = None
        self._reader_key: _Key | None = None

    def read(self, op: Callable[[IndexConnection], T], *, wait: float | None = None) -> T:
        """Run the read-only `op` on a connection of its own, beside this handle's writes (a
        search never waits for the commit of its own background indexing: issue 46 item 11);
        waits `wait` seconds at most for another read of this handle (`None`: as long as it
        runs). Whatever fails there is not repaired here: the caller runs `op` again through
        `run`, which replaces a damaged database.

        Raises:
            IndexBusy: another read of this handle ran longer than `wait`.
            sqlite3.DatabaseError, OSError: the database or its text index cannot be read (or
                is missing): the reader is closed.
        """
        if not self._read_lock.acquire(timeout=-1 if wait is None else wait):
            raise IndexBusy("the search index is read by another thread of this handle")
        try:
            try:
                return op(self._open_reader())
            except (sqlite3.DatabaseError, OSError):
                self._close_reader()
                raise
        finally:
            self._read_lock.release()

    def _open_reader(self) -> IndexConnection:
        key = self._pointer_key()
        if self._reader is not None and key == self._reader_key:
            return self._reader
        self._close_reader()
        if key is None:
            raise sqlite3.DatabaseError("no such database: the index is not made yet")
        db = self._connect(timeout=0, writer=False)
        self._reader, self._reader_key = db, key
        return db

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.text.mapped.close()
            try:
                self._reader.close()
            except sqlite3.Error:
                pass
        self._reader = self._reader_key = None

    def run(self, op: Callable[[IndexConnection], T], *, wait: float | None = None) -> T:
        """Run `op` on the database; a damaged database is replaced by an empty one and `op`
        run once more (the caller's catch-up then refills it from the files). Waits for other
        writers (threads, processes) `wait` seconds in all, at most; 0: not at all; `None`:
        for this process's other threads as long as they run, and `BUSY_SECONDS` at most each
        time another process holds the index (an unbounded catch-up of a large history runs
        for minutes beside other writers: issue 30).

        Raises:
            IndexBusy: another writer held the index longer than `wait`.
            PersistenceError: the database cannot be opened, read, written or replaced.
        """
        deadline = None if wait is None else time.monotonic() + wait
        if wait is None:
            self._lock.acquire()
        elif not (self._lock.acquire(timeout=wait) if wait > 0 else self._lock.acquire(False)):
            raise IndexBusy("the search index is in use by another thread of this process")
        try:
            self.deadline = deadline
            for attempt in (1, 2):
                try:
                    db = self._open()
                    left = max(until(deadline) - time.monotonic(), 0.0)
                    db.execute(f"PRAGMA busy_timeout = {int(left * 1000)}")
                    return op(db)
                except sqlite3.DatabaseError as exc:
                    if busy(exc):
                        raise IndexBusy(f"search index in {str(self.dir)!r}: {exc}") from exc
                    if attempt == 1 and self._replaced():
                        continue  # another process made a new generation meanwhile
                    if attempt == 2 or not _damaged(exc):
                        raise PersistenceError(f"search index in {str(self.dir)!r}: {exc}") from exc
                    logger.warning("agentscope_ctx: search index damaged (%s): rebuilding", exc)
                    try:
                        self.rebuilds += self._replace(self._key)
                    except (OSError, sqlite3.Error) as err:
                        raise PersistenceError(f"cannot rebuild the search index: {err}") from err
                except OSError as exc:
                    if attempt == 1 and self._replaced():
                        continue  # its files were deleted with the generation another replaced
                    raise PersistenceError(f"search index in {str(self.dir)!r}: {exc}") from exc
        finally:
            self._lock.release()
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the connections (reopened at the next `run` or `read`)."""
        with self._lock:
            self._close()
        with self._read_lock:
            self._close_reader()

    def _replaced(self) -> bool:
        """Whether ``current`` names another generation than the one `run` opened (closed
        then): an operation that failed on the old one's files is run again on the new."""
        if self._key is None or self._pointer_key() == self._key:
            return False
        self._close()
        return True

    def _pointer_key(self) -> _Key | None:
        try:
            stat = os.stat(self.dir / "current")
        except FileNotFoundError:
            return None
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)

    def _open(self) -> IndexConnection:
        key = self._pointer_key()
        if self._db is not None and key is not None and key == self._key:
            return self._db
        self._close()
        if key is None:
            self._replace(None)
            key = self._pointer_key()
        self._key = key  # what `run` names as bad if what follows fails
        db = self._connect(max(until(self.deadline) - time.monotonic(), 0.0), writer=True)
        self._db = db
        return db

    def _connect(self, timeout: float, *, writer: bool) -> IndexConnection:
        """The generation ``current`` names, opened: its name and schema version checked, its
        text index with it (`timeout`: SQLite's busy wait). The writer's (`_open`) also
        tightens the folder and sets its write pragmas; the reader's (`_open_reader`) does
        not write."""
        name = (self.dir / "current").read_text(encoding="utf-8", errors="replace").strip()
        path = self.dir / name
        if not _DB_NAME.fullmatch(name) or not path.is_file():
            raise sqlite3.DatabaseError(f"no such database file {name[:80]!r}")
        if writer:
            private_dir(self.dir)  # tightens a database an older version left readable
        db = sqlite3.connect(
            path,
            timeout=timeout,
            isolation_level=None,
            check_same_thread=False,
            factory=IndexConnection,
        )
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                raise sqlite3.DatabaseError(f"schema version {version}, expected {SCHEMA_VERSION}")
            if writer:
                db.execute("PRAGMA synchronous=NORMAL")
                _add_unowned_index(db)
            db.root = self.dir.parent
            db.index = open_index(self.dir / _text_dir(name))
            db.text = TextBatch(self.dir / _text_dir(name))
        except BaseException:
            db.close()
            raise
        return db

    def _close(self) -> None:
        if self._db is not None:
            self._db.text.wait_merges()  # those a search left running hold the writer
            self._db.text.mapped.close()
            try:
                self._db.close()
            except sqlite3.Error:
                pass
        self._db = None

    def _replace(self, bad: _Key | None) -> bool:
        """Create an empty database and point ``current`` at it, unless another process did so
        since `bad` (the pointer seen when the problem was found); whether it did."""
        self._close()
        self._key = None
        private_dir(self.dir)
        with _flock(self.dir / ".lock", until(self.deadline)):
            key = self._pointer_key()
            if key is not None and key != bad:
                return False
            owners = _carried_owners(self.dir) if key is not None else []
            name = f"search-{uuid.uuid4().hex[:12]}.sqlite3"
            # Created private before SQLite opens it: its -wal, -shm and -journal files take
            # the database's mode.
            os.close(os.open(self.dir / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
            db = sqlite3.connect(self.dir / name, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(_SCHEMA)
                db.execute("BEGIN")
                db.executemany("INSERT OR IGNORE INTO owners VALUES (?, ?, ?, ?, ?, ?)", owners)
                db.execute("COMMIT")
            finally:
                db.close()
            create_index(self.dir / _text_dir(name))
            write_atomic(self.dir / "current", name + "\n")
            for entry in os.scandir(self.dir):  # older generations (open elsewhere: harmless)
                if entry.name.startswith("search-") and not entry.name.startswith(name):
                    Path(entry.path).unlink(missing_ok=True)
                elif entry.name.startswith("tantivy-") and entry.name != _text_dir(name):
                    shutil.rmtree(entry.path, ignore_errors=True)
        return True


def _add_unowned_index(db: sqlite3.Connection) -> None:
    """Add `_UNOWNED` to a database made before it (best effort: while another process writes,
    the next open adds it; `unowned_outputs` is right without it, only slower)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'docs_unowned'").fetchone():
        return
    try:
        db.execute(_UNOWNED)
    except sqlite3.OperationalError as exc:
        if not busy(exc):
            raise


def unowned_outputs(db: sqlite3.Connection, tags: tuple[str, str]) -> list[str]:
    """The saved outputs indexed without an owner whose name carries the tenant tags `tags`
    (``tool_result/<agent tag>-<session tag>-...``)."""
    low = f"tool_result/{tags[0]}-{tags[1]}-"
    return [
        row[0]
        for row in db.execute(
            "SELECT DISTINCT path FROM docs WHERE kind = 'tool_result' "
            "AND agent IS NULL AND path >= ? AND path < ?",
            (low, low[:-1] + "."),
        )
    ]


def _carried_owners(index_dir: Path) -> list[tuple[object, ...]]:
    """The ``owners`` rows of the generation ``current`` names (about to be replaced) whose
    saved output is still there: who saved an output, and with which tool, is known only from
    its save (its name's tags say whose it is, not who: `SearchIndex` claims such an output
    for the tenant whose tags it carries). None when that database cannot be read (a damaged
    one: its outputs are claimed)."""
    try:
        name = (index_dir / "current").read_text(encoding="utf-8", errors="replace").strip()
        if not _DB_NAME.fullmatch(name) or not (index_dir / name).is_file():
            return []
        db = sqlite3.connect(index_dir / name, isolation_level=None)
        try:
            rows = db.execute("SELECT name, agent, session, tool, args, ts FROM owners").fetchall()
        finally:
            db.close()
    except (OSError, sqlite3.Error):
        return []
    root = index_dir.parent
    return [
        row
        for row in rows
        if isinstance(row[0], str) and _OUTPUT.fullmatch(row[0]) and (root / row[0]).is_file()
    ]


# -- statements (run inside the caller's transaction) --------------------------------------


def add_doc(
    db: sqlite3.Connection,
    values: tuple[object, ...],
    chunks: Iterable[Chunk],
    locate: Callable[[Chunk], tuple[int, int] | None] | None = None,
) -> int:
    """Insert a doc (`values` in the column order of ``docs`` after ``id``) and its chunks;
    `locate` says where a chunk's text is in its file (then read back from there). Returns
    the rowid of its first chunk (the next ones follow it)."""
    assert isinstance(db, IndexConnection)
    stored = _storable(values)
    cursor = db.execute(
        "INSERT INTO docs(path, kind, line, byte_offset, agent, session, role, tool, args, ts) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        stored,
    )
    base = int(cursor.lastrowid or 0) << DOC_SHIFT
    path, off = str(stored[0]), int(stored[3])  # type: ignore[call-overload]
    for k, c in enumerate(islice(chunks, 1 << DOC_SHIFT)):
        at = None if locate is None else locate(c)
        db.text.add(base + k, path, off, c.start_line, c.line_offset, storable(c.text), at)
    return base


def set_owner(
    db: sqlite3.Connection,
    name: str,
    owner: Owner,
    ts: str | None,
) -> None:
    """Record what is known of a saved output: `owner` is (agent, session, tool, args); what
    was recorded first stays."""
    db.execute(
        "INSERT INTO owners VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
        "agent = coalesce(agent, excluded.agent), session = coalesce(session, excluded.session), "
        "tool = coalesce(tool, excluded.tool), args = coalesce(args, excluded.args)",
        _storable((name, *owner, ts)),
    )
    assert isinstance(db, IndexConnection)
    agent, session = owner[0], owner[1]
    if (agent is not None or session is not None) and db.execute(
        "SELECT 1 FROM docs WHERE path = ? AND ((agent IS NULL AND ? IS NOT NULL) "
        "OR (session IS NULL AND ? IS NOT NULL)) LIMIT 1",
        _storable((name, agent, session)),
    ).fetchone():
        db.text.refresh(name)  # its chunks carry the owner columns
    db.execute(
        "UPDATE docs SET agent = coalesce(agent, ?), session = coalesce(session, ?), "
        "tool = coalesce(tool, ?), args = coalesce(args, ?) WHERE path = ?",
        _storable((*owner, name)),
    )


def _storable(values: tuple[object, ...]) -> tuple[object, ...]:
    """`values` with every string `storable` (no lone surrogate: SQLite takes UTF-8 only)."""
    return tuple(storable(v) if isinstance(v, str) else v for v in values)


def drop_one(db: sqlite3.Connection, path: str) -> None:
    """Remove a file's docs, chunks, state and owner."""
    assert isinstance(db, IndexConnection)
    db.text.delete_path(path)
    for table, column in (("docs", "path"), ("sources", "path"), ("owners", "name")):
        db.execute(f"DELETE FROM {table} WHERE {column} = ?", (path,))
