"""`SearchIndex`: full-text search over what left the context (DESIGN.md §10).

The files are the truth; the index (SQLite FTS5, see `_search_db`) is a cache that catches up
with them: dialog files by inode and byte offset (whole lines only), ``tool_result/`` files by
name (each written once, atomically), memory files by inode, size and mtime; the entries of
files that are gone are dropped. It catches up before each search and whenever a save notifies
it, so writes by other processes and crashes are covered; a missing, torn, corrupt or outdated
index is rebuilt from the files.

What is indexed, by line chunks (`_search_text.chunk_lines`): the text, thinking, tool calls
and tool outputs of each dialog record (a truncated output's excerpt, without its notice: the
whole output is indexed from its file), every saved output, and ``memory/*.md``. Searches and
their results are not indexed. Each record is owned by the agent named in its ``agent`` field;
a saved output by the agent that saved it (told at save, else learnt from the dialog record
that carries its notice).

Several threads and processes may share one ``working_dir``: each indexing step re-reads its
file's state inside its own write transaction, so nothing is indexed twice.

The index never holds up a save: a notification does not wait for another writer (another
process's write transaction or rebuild, another thread's search). When the index is busy it
is skipped; what it would have written is caught up later (the files by the next catch-up,
the owner and tool of a saved output kept in memory until the next write, at most
`MAX_PENDING`). A search waits for other writers at most its catch-up time, then searches
what is indexed and says the index was busy (`SearchResult.busy`).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from pathlib import Path

from ..core import _index_pieces as pieces
from ..core._background import BackgroundWork
from ..core._failures import FailureLog
from ..core._search_hits import LOCAL_SOURCES, Filters, SearchResult, build_hits
from ..core._search_text import Query, chunk_lines, parse_query, record_parts, storable
from ..core._stamps import local_stamp
from ._search_db import (
    BUSY_SECONDS,
    IndexBusy,
    IndexDatabase,
    Owner,
    add_doc,
    drop_one,
    set_owner,
    write,
)
from ._search_files import (
    ALL_KINDS,
    file_stamp,
    index_dialog,
    index_file,
    index_piece,
    source_files,
    up_to_date,
)
from ._search_query import ranked_rows

__all__ = ["Filters", "SearchIndex", "SearchResult"]

logger = logging.getLogger("agentscope_ctx")

INDEX_AT_SAVE_BYTES = 8 << 20
"""A saved output up to this size is indexed as it is saved; a larger one in the background,
in pieces (indexing runs at about 10 MB/s: the save should not wait for seconds)."""
STEP_SECONDS = 0.2
"""Longest a background step holds the index (then a search or a save may take it)."""
BUSY_TRIES = 40
"""Times in a row the background indexing finds the index busy before it stops."""
NOTIFY_SECONDS = 2.0
"""Longest a save spends indexing other files than its own (after an index rebuild)."""
MAX_PENDING = 10_000
"""Owners of saved outputs kept in memory while the index is busy (the oldest are dropped
beyond: a dialog record carrying the output's notice names its owner again)."""


class SearchIndex:
    """The search index of one ``working_dir`` (see the module docstring).

    All methods do blocking I/O: call them from a thread inside an event loop. The
    notification methods (`output_saved`, `describe_output`, `dialog_appended`,
    `drop_outputs`) never raise: a failure is logged once through `failures`, and the next
    catch-up repairs what was missed.
    """

    sources = LOCAL_SOURCES

    def __init__(self, working_dir: Path, *, failures: FailureLog | None = None) -> None:
        self.root = Path(working_dir).expanduser().resolve()
        self.db = IndexDatabase(self.root / "index")
        self.failures = failures or FailureLog()
        self._calls: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._pending: deque[tuple[str, Owner, str | None]] = deque(maxlen=MAX_PENDING)
        self._pending_lock = threading.Lock()
        self._busy_tries = 0
        self.background = BackgroundWork(
            self._background_step, name="search_index_background", failures=self.failures
        )

    # -- notifications ----------------------------------------------------------------------

    def output_saved(
        self, path: str | Path, *, agent: str | None, session: str | None = None
    ) -> None:
        """A tool output was saved to `path` by `agent`: record the owner and index it."""
        name = self._output_name(path)
        if name is not None:
            owner, ts = (agent, session, None, None), file_stamp(time.time())
            self._notify(lambda db: self._saved(db, name, owner, ts), (name, owner, ts))

    def describe_output(self, path: str | Path, *, tool: str, args: str | None) -> None:
        """Name the tool (and its key arguments) whose output was saved to `path`."""
        name = self._output_name(path)
        if name is not None:
            owner = (None, None, tool, args or None)
            self._notify(lambda db: self._owner(db, name, owner), (name, owner, None))

    def dialog_appended(self) -> None:
        """Records were appended to ``dialog/``: index them (for at most
        `NOTIFY_SECONDS`; a search catches up with the rest)."""
        deadline = time.monotonic() + NOTIFY_SECONDS
        self._notify(lambda db: self._catch_up(db, deadline, kinds=("dialog",)))

    def drop_outputs(self, paths: Iterable[str | Path]) -> None:
        """Drop the entries of deleted ``tool_result/`` files."""
        names = [n for n in map(self._output_name, paths) if n and not (self.root / n).exists()]
        if names:
            self._notify(lambda db: self._drop(db, names))

    # -- catch-up and search ----------------------------------------------------------------

    def catch_up(self, *, seconds: float | None = None) -> int:
        """Index what the files hold and the index does not; drop what is gone. Returns how
        many files were left for later because `seconds` ran out.

        Raises:
            PersistenceError: the index cannot be opened or written.
        """
        deadline = None if seconds is None else time.monotonic() + seconds
        wait = BUSY_SECONDS if seconds is None else seconds
        left = self.db.run(lambda db: self._catch_up(db, deadline), wait=wait)
        if left:
            self.background.kick()
        return left

    def search(
        self,
        query: str | Query,
        filters: Filters | None = None,
        *,
        limit: int = 5,
        catch_up_seconds: float | None = 10.0,
    ) -> SearchResult:
        """Catch up (for at most `catch_up_seconds`, which also bounds the wait for other
        writers), then the best `limit` hits of `query` by BM25, newest first on ties; a hit
        showing the same line as a better one is left out. When no chunk has every term, the
        chunks with any of them. When other writers hold the index longer, what is indexed
        is searched (nothing when the index could not even be opened) and `busy` is set.

        Raises:
            PersistenceError: the index cannot be opened or read.
        """
        parsed = parse_query(query) if isinstance(query, str) else query
        filters = Filters(**{k: v and storable(v) for k, v in vars(filters or Filters()).items()})
        if not parsed.terms:
            return SearchResult(hits=[], query=parsed)
        deadline = None if catch_up_seconds is None else time.monotonic() + catch_up_seconds
        busy: list[bool] = []

        def run(db: sqlite3.Connection) -> SearchResult:
            pending = self._catch_up(
                db, deadline, busy=busy, output_bytes=pieces.SEARCH_INDEX_BYTES
            )
            params = {**vars(filters), "limit": 4 * limit + 8}
            rows = ranked_rows(db, parsed.fts(), params, limit)
            every = bool(rows) or len(parsed.terms) == 1
            if not every:
                rows = ranked_rows(db, parsed.fts(every=False), params, limit)
            hits = build_hits(rows, self.root, parsed, limit)
            return SearchResult(hits, parsed, every, pending, busy=bool(busy))

        wait = BUSY_SECONDS if catch_up_seconds is None else catch_up_seconds
        try:
            result = self.db.run(run, wait=wait)
        except IndexBusy as exc:
            logger.info("agentscope_ctx: search without the index: %s", exc)
            result = SearchResult(hits=[], query=parsed, busy=True, searched=False)
        if result.pending or not result.searched:
            self.background.kick()  # what the search left is indexed in the background
        return result

    def rebuild(self) -> None:
        """Replace the database by an empty one (as a damaged one is), then index the files."""
        db = self.db
        db.run(lambda _: db._replace(db._pointer_key()))
        self.catch_up()

    def close(self) -> None:
        """Stop the background indexing and close the database (both resumed when needed)."""
        self.background.close()
        self.db.close()

    # -- internals ----------------------------------------------------------------------------

    def _notify(
        self,
        op: Callable[[sqlite3.Connection], object],
        owner: tuple[str, Owner, str | None] | None = None,
    ) -> None:
        """Run `op` unless the index is busy (never wait: a save is waiting for this); the
        `owner` it records is kept for the next write when it cannot run."""

        def run(db: sqlite3.Connection) -> None:
            self._write_pending(db)
            op(db)

        try:
            self.db.run(run, wait=0)
        except IndexBusy as exc:  # caught up later
            logger.debug("agentscope_ctx: search index busy, caught up later: %s", exc)
            self._keep(owner)
        except Exception as exc:  # a cache: never fail the save that notified it
            self._keep(owner)
            self.failures.failed("search_index", f"search index not updated: {exc}")
        else:
            self.failures.recovered("search_index")

    def _keep(self, owner: tuple[str, Owner, str | None] | None) -> None:
        if owner is not None:
            with self._pending_lock:
                self._pending.append(owner)

    def _write_pending(self, db: sqlite3.Connection) -> None:
        """Record the owners kept while the index was busy (kept again if it still is)."""
        with self._pending_lock:
            if not self._pending:
                return
            owners = list(self._pending)
            self._pending.clear()
        try:
            with write(db, self.db.deadline):
                for name, owner, ts in owners:
                    set_owner(db, name, owner, ts)
        except BaseException:
            with self._pending_lock:
                self._pending.extendleft(reversed(owners))
            raise

    def _output_name(self, path: str | Path) -> str | None:
        """``tool_result/NAME`` when `path` is a file of this working dir's output store."""
        try:
            given = Path(path)
            if given.parent.resolve() != self.root / "tool_result":
                return None
        except (OSError, ValueError):
            return None
        return f"tool_result/{given.name}"

    def _catch_up(
        self,
        db: sqlite3.Connection,
        deadline: float | None,
        kinds: Iterable[str] = ALL_KINDS,
        *,
        busy: list[bool] | None = None,
        output_bytes: int | None = None,
    ) -> int:
        """Index what is missing until `deadline`, saved outputs in pieces (the smallest
        first) and at most about `output_bytes` of them (`None`: no bound); returns how many
        files were left, whole or in part. When another writer holds the index past the
        run's wait, the rest is left and `busy` (when given) gets an entry; without `busy`,
        `IndexBusy` is raised."""
        kinds = tuple(kinds)
        known = {
            row[0]: row[1:]
            for row in db.execute("SELECT path, inode, size, stamp, kind FROM sources")
            if row[4] in kinds
        }
        present = self._files(kinds)  # saved outputs first: dialog records name their owners
        gone = [path for path in known if path not in present]
        pending = 0
        try:
            self._write_pending(db)
            if gone:
                self._drop(db, gone)
        except IndexBusy:
            if busy is None:
                raise
            busy.append(True)
        budget = [output_bytes]

        def left(item: tuple[str, tuple[str, os.stat_result]]) -> tuple[int, int]:
            rel, (kind, stat) = item
            state = known.get(rel)
            done = 0 if state is None or kind != "tool_result" else int(state[1])
            return ALL_KINDS.index(kind), stat.st_size - done if kind == "tool_result" else 0

        for rel, (kind, stat) in sorted(present.items(), key=left):
            state = known.get(rel)
            if state is not None and up_to_date(kind, state, stat):
                continue
            spent = kind == "tool_result" and budget[0] is not None and budget[0] <= 0
            if busy or spent or (deadline is not None and time.monotonic() > deadline):
                pending += 1
                continue
            try:
                if kind == "dialog":
                    self._index_dialog(db, rel, deadline)
                elif kind == "tool_result":
                    pending += not self._index_output(db, rel, deadline, budget)
                else:
                    self._index_file(db, rel, kind)
            except OSError as exc:  # unreadable now: tried again at the next catch-up
                self.failures.failed(f"search_index:{rel}", f"cannot index {rel}: {exc}")
            except IndexBusy:
                if busy is None:
                    raise
                busy.append(True)
                pending += 1
        return pending

    def _saved(self, db: sqlite3.Connection, name: str, owner: Owner, ts: str) -> None:
        with write(db, self.db.deadline):
            set_owner(db, name, owner, ts)
        if os.path.getsize(self.root / name) <= INDEX_AT_SAVE_BYTES:
            self._index_output(db, name, None, [None])
        else:
            self.background.kick()

    def _background_step(self) -> bool:
        """One step of the background indexing: catch up for `STEP_SECONDS`, a piece of the
        saved outputs at most; whether more is left. It never waits for the index (so it
        never holds this process's lock while waiting for another process): when the index
        is busy it tries again a little later, and gives up after `BUSY_TRIES` (a search
        that leaves work starts it again)."""
        try:
            pending = self.db.run(
                lambda db: self._catch_up(
                    db, time.monotonic() + STEP_SECONDS, output_bytes=pieces.PIECE_BYTES
                ),
                wait=0,
            )
        except IndexBusy:
            self._busy_tries += 1
            if self._busy_tries >= BUSY_TRIES:
                self._busy_tries = 0
                return False
            time.sleep(0.05)
            return True
        self._busy_tries = 0
        return pending > 0

    def _index_output(
        self, db: sqlite3.Connection, rel: str, deadline: float | None, budget: list[int | None]
    ) -> bool:
        """Index a saved output piece by piece until it is whole, `deadline` passes or
        `budget[0]` bytes are spent (lowered by what was indexed); whether it is whole."""
        while True:
            used, whole = index_piece(db, self.root, rel, self.db.deadline, pieces.PIECE_BYTES)
            if budget[0] is not None:
                budget[0] -= used
            if whole:
                return True
            if (budget[0] is not None and budget[0] <= 0) or (
                deadline is not None and time.monotonic() > deadline
            ):
                return False

    def _owner(self, db: sqlite3.Connection, name: str, owner: Owner) -> None:
        with write(db, self.db.deadline):
            set_owner(db, name, owner, None)

    def _drop(self, db: sqlite3.Connection, paths: Iterable[str]) -> None:
        with write(db, self.db.deadline):
            for path in paths:
                drop_one(db, path)

    def _files(self, kinds: Iterable[str]) -> dict[str, tuple[str, os.stat_result]]:
        return source_files(self.root, kinds)

    def _index_file(self, db: sqlite3.Connection, rel: str, kind: str) -> None:
        index_file(db, self.root, rel, kind, self.db.deadline)

    def _index_dialog(self, db: sqlite3.Connection, rel: str, deadline: float | None) -> None:
        index_dialog(db, self.root, rel, deadline, self.db.deadline, self._add_record)

    def _add_record(
        self, db: sqlite3.Connection, rel: str, line: int, offset: int, raw: bytes
    ) -> None:
        try:  # an invalid byte costs its character, not the record
            record = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            return  # a torn or foreign line: the dialog reader reports it
        msg = record.get("msg") if isinstance(record, dict) and record.get("v") == 1 else None
        if not isinstance(msg, dict):
            return
        agent, session, ts = record.get("agent"), record.get("session"), msg.get("timestamp")
        agent = agent if isinstance(agent, str) else None
        session = session if isinstance(session, str) else None
        ts = local_stamp(ts) or (ts if isinstance(ts, str) else None)  # 2.x: ISO stamps
        parts = record_parts(msg)
        args = next(iter(parts.calls.values()))[1] if len(parts.calls) == 1 else None
        tools = ",".join(parts.tools) or None
        values = (rel, "dialog", line, offset, agent, session, parts.role, tools, args, ts)
        # the text may hold lone surrogates (the record keeps them as \uXXXX escapes):
        # `add_doc` and `set_owner` store them as U+FFFD
        add_doc(db, values, (c for text in parts.texts for c in chunk_lines(text.split("\n"))))
        for call_id, call in parts.calls.items():
            self._calls[call_id] = call
            if len(self._calls) > 512:
                self._calls.popitem(last=False)
        for file_path, tool, call_id in parts.outputs:
            name = self._output_name(file_path)
            if name is not None:
                call_args = self._calls.get(call_id, (tool, ""))[1] or None
                set_owner(db, name, (agent, session, tool, call_args), ts)
