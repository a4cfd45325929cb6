"""`SearchIndex`: full-text search over what left the context (DESIGN.md §10).

The files are the truth; the index (SQLite metadata, `_search_db`, and a Tantivy text index,
`_search_tantivy`) is a cache that catches up
with them (`_search_catch_up`): dialog files by inode and byte offset (whole lines only),
``tool_result/`` files by name (each written once, atomically) and how far they are indexed
(in pieces, DESIGN.md §16), memory files by inode, size and mtime; the entries of files that
are gone are dropped. It catches up whenever a save notifies it and in the background; a
search commits nothing: it reads what the files hold past the index into memory (its tail,
`_search_tail`, issue 46 item 11), so writes by other processes and crashes are covered; a
missing, torn, corrupt or outdated index is rebuilt from the files.

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
the owner and tool of a saved output kept in memory until the next write of any handle of
the process on that working dir, at most `_search_kept.MAX_PENDING`). A search waits for
other writers at most its catch-up time, then searches what is indexed and says the index
was busy (`SearchResult.busy`).

A big saved output never holds up a search either: a search indexes at most
`_index_pieces.SEARCH_INDEX_BYTES` of saved outputs (the least left first), answers from what
is indexed and counts what it left in `SearchResult.pending`; a background thread
(`BackgroundWork`, a step of `_search_catch_up.STEP_SECONDS` at a time, never waiting for
the index) indexes the rest, as it does an output larger than `INDEX_AT_SAVE_BYTES` saved.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from ..core._failures import FailureLog
from ..core._tenant import Tenant
from ..core.search import _background as background_module
from ..core.search import _index_pieces as pieces
from ..core.search._background import BackgroundWork
from ..core.search._search_hits import LOCAL_SOURCES, Filters, SearchResult
from ..core.search._search_text import Query, parse_query, storable
from ._search_catch_up import CatchUp, searching
from ._search_db import IndexBusy, IndexConnection, IndexDatabase, Owner, batch, set_owner, write
from ._search_files import file_stamp
from ._search_kept import kept_owners
from ._search_query import tenant_params
from ._search_tail import TAIL_BYTES, TAIL_OUTPUT_BYTES, Tail, TailTooLarge, read_tail, searched

__all__ = ["Filters", "SearchIndex", "SearchResult"]

logger = logging.getLogger("agentscope_ctx")

CLOSE_WAIT_SECONDS = 5.0
"""How long `SearchIndex.close` waits for another writer to write the owners it kept."""

INDEX_AT_SAVE_BYTES = 8 << 20
"""A saved output up to this size is indexed as it is saved; a larger one in the background,
in pieces (indexing runs at about 10 MB/s: the save should not wait for seconds)."""


@dataclass
class SearchWork:
    """What the searches of one `SearchIndex` did in their own path, before searching: the
    files their catch-up indexed (whole or a piece) and the text index commits they made
    (each some 100 ms on a virtual disk: its fsyncs). What the saves and the background
    indexing do is not counted; a search of an index they keep caught up counts nothing."""

    searches: int = 0
    files_indexed: int = 0
    commits: int = 0
    tail_files: int = 0
    """Files read into a search's tail (`_search_tail`: matched in memory, not committed)."""

    def count(self, files: int, commits: int) -> None:
        self.searches += 1
        self.files_indexed += files
        self.commits += commits

    def items(self) -> Iterable[tuple[str, int]]:
        return vars(self).items()


class SearchIndex(CatchUp):
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
        # Shared by the process's handles on this working dir; held: the registry keeps it
        # only while a handle does.
        self._kept = kept_owners(self.root)
        self._busy_tries = 0
        self._claims: OrderedDict[Tenant, None] = OrderedDict()
        self._indexed = 0
        self.search_work = SearchWork()
        """What this handle's searches did in their own path (counters)."""
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
        """Records were appended to ``dialog/``: index them in the background (one text index
        commit for all the records appended meanwhile: a commit costs some 100 ms); a search
        catches up with what is left."""
        self.background.kick()

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
        left = self.db.run(lambda db: self._catch_up(db, deadline), wait=seconds)
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
        """The best `limit` hits of `query` by BM25 (Tantivy's top k, the filters inside the
        query: `_search_query`) among the committed index and its tail (`_search_tail`: what
        the files hold past it, matched in memory; the search commits nothing), newest first
        on ties; a hit showing the same line as a better one is left out. When no chunk has
        every term, the chunks with any of them. `catch_up_seconds` bounds the wait for this
        handle's other work and, when the tail is past `TAIL_BYTES`, the indexing the search
        then does itself (saved outputs: `SEARCH_INDEX_BYTES` at most); `None`: everything
        is indexed first, unbounded. When another writer holds the index then, what is
        indexed and the tail are searched and `busy` is set (nothing is searched when the
        index could not even be opened).

        Raises:
            PersistenceError: the index cannot be opened or read.
        """
        parsed = parse_query(query) if isinstance(query, str) else query
        owner = tenant_params((filters or Filters()).tenant, storable)
        given = filters or Filters()
        tenant = given.tenant
        texts: dict[str, Any] = {
            k: storable(v) for k, v in vars(given).items() if isinstance(v, str) and v
        }  # as the index keeps text
        filters = replace(given, **texts)
        if not parsed.terms:
            return SearchResult(hits=[], query=parsed)
        deadline = None if catch_up_seconds is None else time.monotonic() + catch_up_seconds
        budget = pieces.search_budget(catch_up_seconds)
        busy: list[bool] = []

        params = {**vars(filters), **owner}
        params.pop("tenant", None)

        def answer(db: IndexConnection, most: int | None) -> SearchResult:
            with self._kept.lock:  # before the snapshot: kept, else committed in it
                owners = [*self._kept.recent, *self._kept.pending]
            read = partial(self._tail, db, tenant, most, owners)
            hits, every, tail = searched(db, read, parsed, params, limit)
            self.search_work.tail_files += tail.files
            if tail.claimed and tenant is not None:
                self.claimed([tenant])
            elif tail.files or tail.pending or tail.hidden:
                self.background.kick()  # what the tail holds is committed in the background
            return SearchResult(hits, parsed, every, tail.pending, busy=bool(busy))

        def run(db: IndexConnection) -> SearchResult:
            """Through the writer (which makes or repairs the index): what is missing is
            indexed first when asked (`None`: unbounded) or when the tail is past its bound,
            then the rest read as a tail."""
            if catch_up_seconds is not None:
                try:
                    return answer(db, TAIL_BYTES)
                except TailTooLarge:
                    pass
            self._catch_up_here(db, deadline, busy, budget)
            if catch_up_seconds is None and tenant is not None and tenant.scope != "shared":
                self._claim(db, tenant, busy)  # else read into the tail, claimed there
            return answer(db, None)

        if self._kept.pending:  # the owners this handle kept while the index was busy: its tail
            self.background.kick()  # reads them; the background writes them (never a search:
            # an owner learnt late rewrites its output's chunks, seconds for a 2 MB one)
        rebuilds = self.db.rebuilds
        try:
            with searching(self.root):  # the background indexing lets it go first
                try:
                    if catch_up_seconds is None:
                        raise TailTooLarge("everything is indexed first")
                    result = self.db.read(partial(answer, most=TAIL_BYTES), wait=catch_up_seconds)
                except (TailTooLarge, sqlite3.DatabaseError, OSError):
                    result = self.db.run(run, wait=catch_up_seconds)
        except IndexBusy as exc:
            logger.info("agentscope_ctx: search without the index: %s", exc)
            result = SearchResult(hits=[], query=parsed, busy=True, searched=False)
        self.search_work.searches += 1
        result.rebuilt = self.db.rebuilds != rebuilds
        if not result.searched:
            self.background.kick()  # what the search left is indexed in the background
        return result

    def _tail(
        self,
        db: IndexConnection,
        tenant: Tenant | None,
        most: int | None,
        owners: list[tuple[str, Owner, str | None]],
    ) -> Tail:
        """What the files hold past the index `db` (in a read transaction): `read_tail`.

        Raises:
            TailTooLarge: more than `most` bytes of dialog and memory text.
        """
        alone = not background_module.ENABLED  # no background: what searches alone do
        room = 0 if alone and most is None else min(TAIL_OUTPUT_BYTES, pieces.SEARCH_INDEX_BYTES)
        tail = read_tail(db, self.root, self._learn, owners, tenant, most, room)
        if tail is None:
            raise TailTooLarge(f"the index lacks more than {most} bytes")
        if tail.pending and most is not None and alone:
            raise TailTooLarge("no background indexing: the search indexes a piece itself")
        return tail

    def _catch_up_here(
        self, db: IndexConnection, deadline: float | None, busy: list[bool], budget: int | None
    ) -> None:
        """Index what is missing in the search's own path (the tail is too large): its
        commits wait for the merges they start until `deadline` at most."""
        indexed, commits = self._indexed, db.commits
        db.text.merge_deadline = deadline
        try:
            self._catch_up(
                db, deadline, busy=busy, output_bytes=budget, fits_only=self.background.running()
            )
        finally:
            db.text.merge_deadline = None
        self.search_work.files_indexed += self._indexed - indexed
        self.search_work.commits += db.commits - commits

    def rebuild(self) -> None:
        """Replace the database by an empty one (as a damaged one is), then index the files."""
        db = self.db
        db.run(lambda _: db._replace(db._pointer_key()))
        self.catch_up()

    def close(self) -> None:
        """Stop the background indexing, write the owners kept while the index was busy, and
        close the database (all resumed when needed). The owners' write waits for another
        writer `CLOSE_WAIT_SECONDS` at most (a manager closes on the event loop, at the end
        of a reply, and must not hang on a process holding the index); one left unwritten is
        claimed from the output's name by its tenant's next search (`CatchUp._claim`)."""
        self.background.close()
        if self._kept.pending:
            try:
                self.db.run(self._write_pending, wait=CLOSE_WAIT_SECONDS)
            except IndexBusy as exc:
                logger.warning("agentscope_ctx: search index busy at close: %s", exc)
            except Exception as exc:  # a cache: the owners are claimed later
                self.failures.failed("search_index", f"search index not updated: {exc}")
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
        except IndexBusy as exc:  # caught up later: by the background, not the next search
            logger.debug("agentscope_ctx: search index busy, caught up later: %s", exc)
            self._keep(owner)
            self.background.kick()
        except Exception as exc:  # a cache: never fail the save that notified it
            self._keep(owner)
            self.failures.failed("search_index", f"search index not updated: {exc}")
        else:
            self.failures.recovered("search_index")

    def _keep(self, owner: tuple[str, Owner, str | None] | None) -> None:
        if owner is not None:
            with self._kept.lock:
                self._kept.pending.append(owner)

    def _saved(self, db: sqlite3.Connection, name: str, owner: Owner, ts: str) -> None:
        with write(db, self.db.deadline):
            set_owner(db, name, owner, ts)
        if os.path.getsize(self.root / name) <= INDEX_AT_SAVE_BYTES:
            with batch(db, self.db.deadline):  # one text index commit
                self._index_output(db, name, None, [None])
        else:
            self.background.kick()

    def _owner(self, db: sqlite3.Connection, name: str, owner: Owner) -> None:
        with write(db, self.db.deadline):
            set_owner(db, name, owner, None)
