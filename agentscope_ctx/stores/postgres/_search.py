"""`PostgresSearchIndex`: the search seam on PostgreSQL (table ``chunks``, see `_schema`).

What is indexed is what the local index keeps (`_search_text.record_parts`, `chunk_lines`):
the text, thinking, tool calls and outputs of each dialog record (a truncated output's
excerpt without its notice), every saved output, and each agent's long-term memory
(`_memory_index`).

Tokens are ours, not PostgreSQL's parser's: `_search_text.tokens` of `index_text` (case and
diacritics folded, each CJK character a token), written as a ``tsvector`` literal with their
positions; a query is `parse_query`'s terms, each a phrase of the same tokens (``<->``), all
of them (``&``) else any (``|``), ``:*`` for a prefix. The tokens hold letters and digits
only and are quoted, so nothing a user types is ever query syntax; lone surrogates and NUL
become U+FFFD before they reach the database. Ranked by ``ts_rank`` (the score is its
negation: lower is better, as BM25 in the local index) among the newest
`_search_sql.CANDIDATES` matches that pass the filters (`_search_sql.ranked_sql`), an
output's block as a chunk holding the words once; a block's chunks that hold the query are
then read back from the output, for the hits only (`_blocks.expand`).

The stores are the truth and the index catches up with them: dialog rows and outputs carry an
``indexed`` flag, taken with ``FOR UPDATE SKIP LOCKED`` so that workers catching up at once
never index a row twice. A save notifies the index (an output up to 256 KB is indexed at
once, a larger one in the background, in pieces); each search catches up first (outputs:
`SEARCH_INDEX_BYTES` at most, and it says what is left), so what another worker stored is
found even if that worker died before indexing it. `rebuild` empties the
index and indexes everything again.

A workers' role without the schema owner's privileges (docs/tenants.md, "A migration role and
a workers' role") sees no tenant's rows but by binding it: a save is indexed as its saver's, a
search catches up its own tenant's rows, and the other catch-ups (a dialog append, the
background, `catch_up`) those of the owners this index has met (saved for or searched for,
the newest `KNOWN_OWNERS`); the migration role catches up everyone's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from ...core._errors import PersistenceError
from ...core._failures import FailureLog
from ...core._tenant import Tenant
from ...core.search import _background as background_module
from ...core.search import _index_pieces as pieces
from ...core.search._background import BackgroundWork
from ...core.search._search_hits import Filters, SearchResult, build_hits
from ...core.search._search_text import _TOKEN as _TOKEN
from ...core.search._search_text import (
    Query,
    parse_query,
)
from .._search_turns import searching
from ._blocks import expand
from ._engine import PostgresEngine
from ._indexer import Indexer
from ._names import db_name, name_from_db
from ._outputs import output_id
from ._search_gate import background_gate
from ._search_sql import day_rows, db_text, ranked_rows
from ._tenant import Owner, bind, crosses, maintenance, owner_of, stored_owner

__all__ = ["PostgresSearchIndex"]

logger = logging.getLogger("agentscope_ctx")

T = TypeVar("T")

NOTIFY_SECONDS = 2.0
STALLED_STEPS = 50
"""Background steps in a row that find nothing to take (others hold it) before it stops."""
KNOWN_OWNERS = 64
"""The owners a workers' role catches up (the newest met): see the module docstring."""


class PostgresSearchIndex(Indexer):
    """Full-text search over the PostgreSQL dialog and outputs (see the module docstring).

    All methods do blocking I/O (call them from a thread inside an event loop); the
    notifications never raise: a failure is logged once through `failures` and the next
    catch-up repairs it.
    """

    sources = "the fleet store: pg-dialog days, pg-output saved outputs, pg-memory"

    def __init__(self, engine: PostgresEngine, *, failures: FailureLog | None = None) -> None:
        self.engine = engine
        self.failures = failures or FailureLog()
        self._unanalyzed = 0  # chunks inserted since this index last ran ANALYZE
        self._last_left = self._stalled = self._spent = 0  # the background's progress
        self._crosses: bool | None = None  # whether the role sees every tenant's rows
        self._owners: dict[Owner, None] = {}  # the owners met, the newest last
        self._saved_by: dict[str, Owner] = {}  # the saver of each output saved here, newest last
        self._lock = threading.Lock()
        self._closed = False
        self.background = BackgroundWork(
            self._background_step, name="search_index_background", failures=self.failures
        )

    # -- notifications ----------------------------------------------------------------------

    def output_saved(self, ref: str, *, agent: str | None, session: str | None = None) -> None:
        key = output_id(ref)
        if key is not None:
            saver = stored_owner(Tenant(agent or "", session or ""))
            self._met(saver, key)
            owner = (*saver, None, None)
            self._notify(lambda conn: self._saved(conn, key, owner))

    def describe_output(self, ref: str, *, tool: str, args: str | None) -> None:
        key = output_id(ref)
        if key is not None:
            with self._lock:
                saver = self._saved_by.get(key)  # (unknown: another worker's save)
            owner = (*(saver or (None, None)), tool, args or None)

            def describe(conn: Any) -> None:
                if saver is None and not self._sees_all(conn):
                    return  # (another worker's save: its dialog record names the tool)
                with maintenance(conn, saver):
                    self._set_owner(conn, key, owner, None)

            self._notify(describe)

    def dialog_appended(self) -> None:
        deadline = time.monotonic() + NOTIFY_SECONDS

        def catch_up(conn: Any) -> None:
            for owner in self._scopes(conn):
                self._catch_up_dialog(conn, deadline, owner)

        self._notify(catch_up)

    def drop_outputs(self, refs: Iterable[str]) -> None:
        keys = [key for key in map(output_id, refs) if key]
        if keys:
            s = self.engine.schema
            sources = [f"pg-output:{key}" for key in keys]

            def drop(conn: Any) -> None:
                with maintenance(conn):
                    conn.execute(f"DELETE FROM {s}.chunks WHERE source = ANY(%s)", (sources,))
                    conn.execute(f"DELETE FROM {s}.owners WHERE id = ANY(%s)", (keys,))

            self._notify(drop)

    # -- catch-up, search, rebuild ------------------------------------------------------------

    def catch_up(self, *, seconds: float | None = None) -> int:
        """Index the dialog rows and outputs not indexed yet, until `seconds` run out; the
        number left (dialog rows and outputs).

        Raises:
            PersistenceError: the database cannot be read or written.
        """
        deadline = None if seconds is None else time.monotonic() + seconds
        left = self._run(
            lambda conn: self._catch_up(conn, deadline, owners=self._scopes(conn)),
            "cannot update the index",
        )
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
        """Catch up (for at most `catch_up_seconds`), then the best `limit` hits of `query`:
        chunks with every term, else with any. The catch-up indexes the dialog rows and
        memory documents, and leaves the saved outputs not indexed yet to the background
        indexing, which it starts, and says so (`SearchResult.pending`): a piece of an output
        indexed in a search's path was its p95 in the live benchmark (123-503 ms, issue 46
        item 11). Without background indexing (`_background.ENABLED` off), or unbounded
        (`catch_up_seconds` `None`), it indexes them as before.

        Raises:
            PersistenceError: the database cannot be read.
        """
        parsed = parse_query(query) if isinstance(query, str) else query
        tenant = (filters or Filters()).tenant
        given = filters or Filters()
        texts: dict[str, Any] = {  # names escaped as stored (`_names`), other text as kept
            k: db_name(v) if k in ("agent", "session") else db_text(v)
            for k, v in vars(given).items()
            if isinstance(v, str) and v
        }
        filters = replace(given, **texts)
        owner: dict[str, str | None] = {"t_agent": None, "t_session": None}  # None: any
        if tenant is not None and tenant.scope != "shared":
            agent, session = stored_owner(tenant)
            owner = {"t_agent": agent, "t_session": session if tenant.scope == "session" else None}
        if not parsed.terms:
            return SearchResult(hits=[], query=parsed)
        deadline = None if catch_up_seconds is None else time.monotonic() + catch_up_seconds
        budget = pieces.search_budget(catch_up_seconds)
        if budget is not None and background_module.ENABLED:
            budget = 0  # the outputs are the background's (issue 46 item 11): see `search`
        params = {**vars(filters), **owner, "limit": 4 * limit + 8}
        params.pop("tenant", None)

        def ranked(conn: Any, every: bool) -> list[Any]:
            rows = ranked_rows(conn, self.engine.schema, params, parsed, every)
            return expand(conn, self.engine.schema, rows, parsed, every, limit)  # blocks read

        def run(conn: Any) -> SearchResult:
            scopes = self._scopes(conn, tenant)
            pending = self._outputs_waiting(conn, scopes) if budget == 0 else None
            if pending is None:
                running = self.background.running()
                pending = self._catch_up(conn, deadline, budget, running, scopes)
            with conn.transaction():
                bind(conn, tenant)
                rows = ranked(conn, True)
                every = bool(rows) or len(parsed.terms) == 1
                if not every:
                    rows = ranked(conn, False)
                rows, records = day_rows(conn, self.engine.schema, rows, tenant)
            rows = [(*row[:8], name_from_db(row[8]), *row[9:]) for row in rows]  # c.agent
            hits = build_hits(rows, Path(), parsed, limit, record=lambda _, seq: records.get(seq))
            return SearchResult(hits, parsed, every, pending)

        with searching(("postgres", self.engine.schema)):  # the indexing hands it the GIL
            result = self._run(run, "cannot search")
        if result.pending:
            self.background.kick()  # what the search left is indexed in the background
        return result

    def rebuild(self) -> None:
        """Empty the index and index the whole dialog and every output again.

        Raises:
            PersistenceError: the database cannot be written.
        """
        s = self.engine.schema

        def reset(conn: Any) -> None:
            with maintenance(conn):
                conn.execute(f"TRUNCATE {s}.chunks")
                conn.execute(f"UPDATE {s}.dialog SET indexed = false WHERE indexed")
                conn.execute(
                    f"UPDATE {s}.outputs SET indexed = false, indexed_bytes = 0, "
                    "indexed_lines = 0 WHERE indexed OR indexed_bytes > 0"
                )
                conn.execute(f"UPDATE {s}.memory_docs SET indexed = false WHERE indexed")

        self._run(reset, "cannot rebuild the index")
        self.catch_up()

    def close(self) -> None:
        self._closed = True  # (a background step waiting for the gate then stops)
        self.background.close()
        self.engine.close()

    # -- internals ----------------------------------------------------------------------------

    def _background_step(self) -> bool:
        """One step of the background indexing: a piece of the saved outputs (and the dialog
        rows waiting); whether more is left. The steps of a process's handles on one pool run
        one at a time (`_search_gate`). Workers share the work (``SKIP LOCKED``): while what
        is left is held by others it waits, and stops after `STALLED_STEPS`."""
        with background_gate(self.engine.pool):
            if self._closed:
                return False
            deadline = time.monotonic() + NOTIFY_SECONDS
            left = self._run(
                lambda conn: self._catch_up(
                    conn, deadline, pieces.PIECE_BYTES, owners=self._scopes(conn)
                ),
                "indexing",
            )
        stalled = left and not self._spent and left >= self._last_left
        self._last_left, self._stalled = left, self._stalled + 1 if stalled else 0
        if self._stalled:
            time.sleep(0.2)
        return left > 0 and self._stalled < STALLED_STEPS

    def _met(self, owner: Owner, key: str | None = None) -> None:
        """Remember `owner` (and that it saved output `key`) for `_scopes`, the newest
        `KNOWN_OWNERS` of each."""
        with self._lock:
            self._owners.pop(owner, None)
            self._owners[owner] = None
            if key is not None:
                self._saved_by[key] = owner
            while len(self._owners) > KNOWN_OWNERS:
                del self._owners[next(iter(self._owners))]
            while len(self._saved_by) > KNOWN_OWNERS:
                del self._saved_by[next(iter(self._saved_by))]

    def _sees_all(self, conn: Any) -> bool:
        """Whether the role sees every tenant's rows (`_tenant.crosses`; asked once)."""
        if self._crosses is None:
            with conn.transaction():
                self._crosses = crosses(conn, self.engine.schema)
        return self._crosses

    def _scopes(self, conn: Any, tenant: Tenant | None = None) -> list[Owner | None]:
        """Whose rows a catch-up indexes: every tenant's when the role may see them all;
        else `tenant`'s (a search's), or the owners met, the newest first."""
        if self._sees_all(conn):
            return [None]
        if tenant is not None and tenant.scope != "shared":
            owner = owner_of(tenant)
            if owner is not None and owner[1] is not None:
                self._met(owner)
            return [owner]
        with self._lock:
            return list(reversed(self._owners))

    def _run(self, op: Callable[[Any], T], what: str) -> T:
        try:
            with self.engine.connection() as conn:
                return op(conn)
        except Exception as exc:
            if isinstance(exc, PersistenceError):
                raise
            raise self.engine.error(what, exc) from None

    def _notify(self, op: Callable[[Any], object]) -> None:
        try:
            with self.engine.connection() as conn:
                op(conn)
        except Exception as exc:  # a cache: never fail the save that notified it
            self.failures.failed(
                "search_index",
                f"search index not updated ({self.engine.name}): {self.engine.describe(exc)}",
            )
        else:
            self.failures.recovered("search_index")
