"""`PostgresSearchIndex`: the search seam on PostgreSQL (table ``chunks``, see `_schema`).

What is indexed is what the local index keeps (`_search_text.record_parts`, `chunk_lines`):
the text, thinking, tool calls and outputs of each dialog record (a truncated output's
excerpt without its notice), and every saved output. Memory files stay local (they are not
in this store).

Tokens are ours, not PostgreSQL's parser's: `_search_text.tokens` of `index_text` (case and
diacritics folded, each CJK character a token), written as a ``tsvector`` literal with their
positions; a query is `parse_query`'s terms, each a phrase of the same tokens (``<->``), all
of them (``&``) else any (``|``), ``:*`` for a prefix. The tokens hold letters and digits
only and are quoted, so nothing a user types is ever query syntax; lone surrogates and NUL
become U+FFFD before they reach the database. Ranked by ``ts_rank`` (the score is its
negation: lower is better, as BM25 in the local index).

The stores are the truth and the index catches up with them: dialog rows and outputs carry an
``indexed`` flag, taken with ``FOR UPDATE SKIP LOCKED`` so that workers catching up at once
never index a row twice. A save notifies the index (an output up to 8 MB is indexed at
once, a larger one at the next catch-up); each search catches up first, so what another
worker stored is found even if that worker died before indexing it. `rebuild` empties the
index and indexes everything again.
"""

from __future__ import annotations

import codecs
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ...core._errors import PersistenceError
from ...core._failures import FailureLog
from ...core._search_hits import Filters, SearchResult, build_hits
from ...core._search_text import _TOKEN as _TOKEN
from ...core._search_text import (
    Chunk,
    Query,
    chunk_lines,
    parse_query,
    record_parts,
)
from ...core._stamps import local_stamp
from ._engine import PostgresEngine
from ._outputs import output_id
from ._search_sql import (
    LOW,
    MAX_LEXEME,
    RANKED,
    day_rows,
    db_text,
    lexemes,
    query_text,
    tsvector_text,
)

__all__ = ["PostgresSearchIndex"]

logger = logging.getLogger("agentscope_ctx")

T = TypeVar("T")

INDEX_AT_SAVE_BYTES = 8 << 20
"""An output up to this size is indexed as it is saved; a larger one at the next catch-up."""
NOTIFY_SECONDS = 2.0
_BATCH = 500
"""Dialog rows indexed per transaction."""
ANALYZE_AFTER = 20_000
"""Chunks a worker indexes before it refreshes the planner's statistics (``ANALYZE``), as
autovacuum would later: a table grown by a rebuild is searched through its GIN index."""
MAX_RANKED = 5_000
"""A query matching more chunks ranks the newest ones only (as the local index); if the
filters then leave too few hits, it ranks them all."""


def _output_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of an output as `read_file` counts them, decoded chunk by chunk."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    rest = ""
    for block in [*chunks, b""]:
        text = rest + decoder.decode(block, final=not block)
        lines = text.replace("\r\n", "\n").split("\n")
        rest = lines.pop()
        yield from lines
    if rest:
        yield rest


def _stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


class PostgresSearchIndex:
    """Full-text search over the PostgreSQL dialog and outputs (see the module docstring).

    All methods do blocking I/O (call them from a thread inside an event loop); the
    notifications never raise: a failure is logged once through `failures` and the next
    catch-up repairs it.
    """

    sources = "the fleet store: pg-dialog days, pg-output saved outputs"

    def __init__(self, engine: PostgresEngine, *, failures: FailureLog | None = None) -> None:
        self.engine = engine
        self.failures = failures or FailureLog()
        self._unanalyzed = 0  # chunks inserted since this index last ran ANALYZE

    # -- notifications ----------------------------------------------------------------------

    def output_saved(self, ref: str, *, agent: str | None, session: str | None = None) -> None:
        key = output_id(ref)
        if key is not None:
            self._notify(lambda conn: self._saved(conn, key, (agent, session, None, None)))

    def describe_output(self, ref: str, *, tool: str, args: str | None) -> None:
        key = output_id(ref)
        if key is not None:
            owner = (None, None, tool, args or None)
            self._notify(lambda conn: self._set_owner(conn, key, owner, None))

    def dialog_appended(self) -> None:
        deadline = time.monotonic() + NOTIFY_SECONDS
        self._notify(lambda conn: self._catch_up_dialog(conn, deadline))

    def drop_outputs(self, refs: Iterable[str]) -> None:
        keys = [key for key in map(output_id, refs) if key]
        if keys:
            s = self.engine.schema
            sources = [f"pg-output:{key}" for key in keys]
            self._notify(
                lambda conn: (
                    conn.execute(f"DELETE FROM {s}.chunks WHERE source = ANY(%s)", (sources,)),
                    conn.execute(f"DELETE FROM {s}.owners WHERE id = ANY(%s)", (keys,)),
                )
            )

    # -- catch-up, search, rebuild ------------------------------------------------------------

    def catch_up(self, *, seconds: float | None = None) -> int:
        """Index the dialog rows and outputs not indexed yet, until `seconds` run out; the
        number left (dialog rows and outputs).

        Raises:
            PersistenceError: the database cannot be read or written.
        """
        deadline = None if seconds is None else time.monotonic() + seconds
        return self._run(lambda conn: self._catch_up(conn, deadline), "cannot update the index")

    def search(
        self,
        query: str | Query,
        filters: Filters | None = None,
        *,
        limit: int = 5,
        catch_up_seconds: float | None = 10.0,
    ) -> SearchResult:
        """Catch up (for at most `catch_up_seconds`), then the best `limit` hits of `query`:
        chunks with every term, else with any.

        Raises:
            PersistenceError: the database cannot be read.
        """
        parsed = parse_query(query) if isinstance(query, str) else query
        filters = Filters(**{k: v and db_text(v) for k, v in vars(filters or Filters()).items()})
        if not parsed.terms:
            return SearchResult(hits=[], query=parsed)
        deadline = None if catch_up_seconds is None else time.monotonic() + catch_up_seconds
        sql, low_sql = RANKED.format(s=self.engine.schema), LOW.format(s=self.engine.schema)

        def ranked(conn: Any, match: str, params: dict[str, object]) -> list[Any]:
            bound = conn.execute(low_sql, {"match": match, "ranked": MAX_RANKED}).fetchone()
            low = 0 if bound is None else int(bound[0]) + 1
            rows = conn.execute(sql, {**params, "match": match, "low": low}).fetchall()
            if low and len(rows) < limit:
                rows = conn.execute(sql, {**params, "match": match, "low": 0}).fetchall()
            return list(rows)

        def run(conn: Any) -> SearchResult:
            pending = self._catch_up(conn, deadline)
            params = {**vars(filters), "limit": 4 * limit + 8}
            rows = ranked(conn, query_text(parsed), params)
            every = bool(rows) or len(parsed.terms) == 1
            if not every:
                rows = ranked(conn, query_text(parsed, every=False), params)
            rows, records = day_rows(conn, self.engine.schema, rows)
            hits = build_hits(rows, Path(), parsed, limit, record=lambda _, seq: records.get(seq))
            return SearchResult(hits, parsed, every, pending)

        return self._run(run, "cannot search")

    def rebuild(self) -> None:
        """Empty the index and index the whole dialog and every output again.

        Raises:
            PersistenceError: the database cannot be written.
        """
        s = self.engine.schema

        def reset(conn: Any) -> None:
            with conn.transaction():
                conn.execute(f"TRUNCATE {s}.chunks")
                conn.execute(f"UPDATE {s}.dialog SET indexed = false WHERE indexed")
                conn.execute(f"UPDATE {s}.outputs SET indexed = false WHERE indexed")

        self._run(reset, "cannot rebuild the index")
        self.catch_up()

    def close(self) -> None:
        self.engine.close()

    # -- internals ----------------------------------------------------------------------------

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
                "search_index", self.engine.scrub(f"search index not updated: {exc}")
            )
        else:
            self.failures.recovered("search_index")

    def _catch_up(self, conn: Any, deadline: float | None) -> int:
        s = self.engine.schema
        self._catch_up_dialog(conn, deadline)
        while deadline is None or time.monotonic() <= deadline:
            with conn.transaction():
                row = conn.execute(
                    f"SELECT id FROM {s}.outputs WHERE NOT indexed ORDER BY saved_at "
                    "LIMIT 1 FOR UPDATE SKIP LOCKED"
                ).fetchone()
                if row is None:
                    break
                self._index_output(conn, row[0])
        if self._unanalyzed > ANALYZE_AFTER:  # the planner then uses the GIN index
            self._unanalyzed = 0
            conn.execute(f"ANALYZE {s}.chunks")
        left = conn.execute(
            f"SELECT (SELECT count(*) FROM {s}.dialog WHERE NOT indexed) "
            f"+ (SELECT count(*) FROM {s}.outputs WHERE NOT indexed)"
        ).fetchone()
        return int(left[0])

    def _catch_up_dialog(self, conn: Any, deadline: float | None) -> None:
        s = self.engine.schema
        more = True
        while more and (deadline is None or time.monotonic() <= deadline):
            with conn.transaction():
                rows = conn.execute(
                    f"SELECT seq, agent, session, record FROM {s}.dialog WHERE NOT indexed "
                    "ORDER BY seq LIMIT %s FOR UPDATE SKIP LOCKED",
                    (_BATCH,),
                ).fetchall()
                more = len(rows) == _BATCH
                chunks: list[tuple[object, ...]] = []
                for seq, agent, session, record in rows:
                    chunks.extend(self._record_chunks(conn, int(seq), agent, session, record))
                self._insert(conn, chunks)
                if rows:
                    conn.execute(
                        f"UPDATE {s}.dialog SET indexed = true WHERE seq = ANY(%s)",
                        ([row[0] for row in rows],),
                    )

    def _record_chunks(
        self, conn: Any, seq: int, agent: str | None, session: str | None, record: str
    ) -> list[tuple[object, ...]]:
        try:
            data = json.loads(record)
        except ValueError:
            return []
        msg = data.get("msg") if isinstance(data, dict) and data.get("v") == 1 else None
        if not isinstance(msg, dict):
            return []
        ts = msg.get("timestamp")
        ts = local_stamp(ts) or (ts if isinstance(ts, str) else None)
        parts = record_parts(msg)
        args = next(iter(parts.calls.values()))[1] if len(parts.calls) == 1 else None
        tools = ",".join(parts.tools) or None
        meta = (agent, session, parts.role, tools, args, ts)
        source = f"pg-dialog:{seq}"
        out = [
            self._row("dialog", source, chunk, meta)
            for text in parts.texts
            for chunk in chunk_lines(text.split("\n"))
        ]
        for ref, tool, call_id in parts.outputs:
            key = output_id(ref)
            if key is not None:
                call_args = parts.calls.get(call_id, (tool, ""))[1] or None
                self._set_owner(conn, key, (agent, session, tool, call_args), ts)
        return out

    @staticmethod
    def _row(kind: str, source: str, chunk: Chunk, meta: tuple[object, ...]) -> tuple[object, ...]:
        text = db_text(chunk.text)
        words = lexemes(text)
        if all(len(word) <= MAX_LEXEME for word in words) and " ".join(words).isascii():
            # letters and digits, apart: PostgreSQL's parser keeps each word as it is
            terms: tuple[str | None, str | None] = (None, " ".join(words))
        else:
            terms = (tsvector_text(text), None)
        return (kind, source, chunk.start_line, chunk.line_offset, text, *terms, *meta)

    def _insert(self, conn: Any, rows: list[tuple[object, ...]]) -> None:
        if not rows:
            return
        self._unanalyzed += len(rows)
        s = self.engine.schema
        with conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {s}.chunks (kind, source, start_line, line_offset, body, terms, "
                "agent, session, role, tool, args, ts) "
                "VALUES (%s, %s, %s, %s, %s, "
                "coalesce(%s::tsvector, to_tsvector('simple', %s::text)), "
                "%s, %s, %s, %s, %s, %s)",
                [tuple(db_text(v) if isinstance(v, str) else v for v in row) for row in rows],
            )

    def _saved(self, conn: Any, key: str, owner: tuple[str | None, ...]) -> None:
        s = self.engine.schema
        with conn.transaction():  # one commit: the owner and the chunks
            self._set_owner(conn, key, owner, _stamp(time.time()))
            row = conn.execute(
                f"SELECT size FROM {s}.outputs WHERE id = %s AND NOT indexed "
                "FOR UPDATE SKIP LOCKED",
                (key,),
            ).fetchone()
            if row is not None and int(row[0]) <= INDEX_AT_SAVE_BYTES:
                self._index_output(conn, key)

    def _set_owner(
        self, conn: Any, key: str, owner: tuple[str | None, ...], ts: str | None
    ) -> None:
        """Record what is known of output `key`; what was recorded first stays."""
        s = self.engine.schema
        values = tuple(db_text(v) if isinstance(v, str) else v for v in owner)
        conn.execute(
            f"INSERT INTO {s}.owners VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE "
            "SET agent = coalesce(owners.agent, excluded.agent), "
            "session = coalesce(owners.session, excluded.session), "
            "tool = coalesce(owners.tool, excluded.tool), "
            "args = coalesce(owners.args, excluded.args)",
            (key, *values, ts),
        )
        conn.execute(
            f"UPDATE {s}.chunks SET agent = coalesce(agent, %s), session = coalesce(session, %s), "
            "tool = coalesce(tool, %s), args = coalesce(args, %s) WHERE source = %s",
            (*values, f"pg-output:{key}"),
        )

    def _index_output(self, conn: Any, key: str) -> None:
        """Index output `key` whole, streaming its chunks (the caller holds its row)."""
        s = self.engine.schema
        owner = conn.execute(
            f"SELECT o.agent, o.session, w.tool, w.args, "
            f"coalesce(w.ts, to_char(o.saved_at AT TIME ZONE current_setting('TimeZone'), "
            f"'YYYY-MM-DD HH24:MI:SS')), coalesce(w.agent, o.agent), "
            f"coalesce(w.session, o.session) "
            f"FROM {s}.outputs AS o LEFT JOIN {s}.owners AS w ON w.id = o.id WHERE o.id = %s",
            (key,),
        ).fetchone()
        if owner is None:
            return
        _, _, tool, args, ts, agent, session = owner
        meta = (agent, session, "tool", tool, args, ts)

        def blocks() -> Iterator[bytes]:
            n = 0
            while True:
                row = conn.execute(
                    f"SELECT data FROM {s}.output_chunks WHERE id = %s AND n = %s", (key, n)
                ).fetchone()
                if row is None:
                    return
                yield bytes(row[0])
                n += 1

        source = f"pg-output:{key}"
        conn.execute(f"DELETE FROM {s}.chunks WHERE source = %s", (source,))
        batch: list[tuple[object, ...]] = []
        for chunk in chunk_lines(_output_lines(blocks())):
            batch.append(self._row("tool_result", source, chunk, meta))
            if len(batch) >= 1_000:
                self._insert(conn, batch)
                batch = []
        self._insert(conn, batch)
        conn.execute(f"UPDATE {s}.outputs SET indexed = true WHERE id = %s", (key,))
