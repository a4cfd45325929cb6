"""`Indexer`: how the PostgreSQL search index catches up with the stores (`_search`): dialog
rows in batches and saved outputs in pieces (`_index_pieces`: ``outputs.indexed_bytes`` says
how far each got) into ``chunks``, each taken with
``FOR UPDATE SKIP LOCKED`` so that workers catching up at once never index a row twice, and
what is known of an output's owner (agent, session, tool, arguments) recorded once. Its
transactions see every tenant's rows (`_tenant.maintenance`: the index serves them all, and
what it finds goes to nobody but the search that filters it) when the role has the schema
owner's privileges; a workers' role without them (docs/tenants.md, "A migration role and a
workers' role") sees and indexes one owner's rows at a time (`Owner`): a save is indexed as
its saver's, a catch-up as each owner's the worker serves. A part of `PostgresSearchIndex`,
kept apart to keep each module to one job."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from typing import Any

from ...core._stamps import local_stamp
from ...core.search import _index_pieces as pieces
from ...core.search._background import BackgroundWork
from ...core.search._index_pieces import cut_piece
from ...core.search._search_text import chunk_lines, record_parts
from .._search_turns import yield_to_searches
from ._blocks import cut_blocks
from ._engine import PostgresEngine
from ._memory_index import catch_up_memory
from ._outputs import output_id
from ._rows import block_row, chunk_row, insert_chunks
from ._schema import CHUNK
from ._search_sql import db_text
from ._tenant import Owner, maintenance

__all__ = ["INDEX_AT_SAVE_BYTES", "Indexer"]

INDEX_AT_SAVE_BYTES = 256 << 10
"""An output up to this size is indexed as it is saved; a larger one in the background, in
pieces (`_index_pieces`), and by the searches that come before it is done (the smallest
first). Indexing runs at about 4 MB/s here: a 1 MB save would wait 250 ms for it."""
_BATCH = 500
"""Dialog rows indexed per transaction."""
ANALYZE_AFTER = 20_000
"""Chunks a worker indexes before it refreshes the planner's statistics (``ANALYZE``), as
autovacuum would later: a table grown by a rebuild is searched through its GIN index. Done by
an unbounded catch-up only (a rebuild, `catch_up()`), never by a search or a background step:
an ANALYZE of a large table takes seconds."""
_NO_FLUSH_WAIT = "SET LOCAL synchronous_commit = off"
"""A catch-up's transaction commits without waiting for its WAL to reach the disk (issue 46
item 11: the flush was most of a search's catch-up under load, 280 of 308 ms at p95 in the
live benchmark). The index is a cache of the stores: a crash loses at most the last such
transactions whole (the chunks with the rows' ``indexed`` flags), and they are indexed again;
PostgreSQL never applies part of one."""


def _stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


class Indexer:
    """The catch-up of `PostgresSearchIndex` (whose `__init__` sets these attributes)."""

    engine: PostgresEngine
    background: BackgroundWork
    _unanalyzed: int
    _spent: int  # output bytes the last catch-up indexed

    def _catch_up(
        self,
        conn: Any,
        deadline: float | None,
        output_bytes: int | None = None,
        fits_only: bool = False,
        owners: Iterable[Owner | None] = (None,),
    ) -> int:
        """Index dialog rows, then saved outputs a piece at a time (the least left first),
        until `deadline`, and about `output_bytes` of outputs at most (`None`: no bound;
        `fits_only`: only the outputs whose rest fits in what is left of it), then the memory
        documents (`_memory_index`): the rows of each of `owners` in turn (`None`: every
        tenant's); the number of rows, outputs and documents left, whole or in part."""
        left = spent = 0
        for owner in owners:
            room = None if output_bytes is None else output_bytes - spent
            left += self._catch_up_owner(conn, deadline, room, fits_only, owner)
            spent += self._spent
        self._spent = spent
        if output_bytes is None and self._unanalyzed > ANALYZE_AFTER:  # then the GIN index
            self._unanalyzed = 0
            conn.execute(f"ANALYZE {self.engine.schema}.chunks")
        return left

    def _outputs_waiting(self, conn: Any, owners: Iterable[Owner | None]) -> int | None:
        """The saved outputs not indexed yet of `owners` when nothing else waits for a search's
        catch-up (no dialog row, no memory document), in one statement per owner; `None`
        when something does. (A search's catch-up of nothing was some 13 round trips, each
        waiting for the interpreter behind the background's work: 150-500 ms under load in
        the live benchmark, issue 46 item 11.)"""
        s, left = self.engine.schema, 0
        for owner in owners:
            with maintenance(conn, owner):
                dialog, memory, outputs = conn.execute(
                    f"SELECT EXISTS (SELECT 1 FROM {s}.dialog WHERE NOT indexed), "
                    f"EXISTS (SELECT 1 FROM {s}.memory_docs WHERE NOT indexed), "
                    f"(SELECT count(*) FROM {s}.outputs WHERE NOT indexed)"
                ).fetchone()
            if dialog or memory:
                return None
            left += int(outputs)
        return left

    def _catch_up_owner(
        self,
        conn: Any,
        deadline: float | None,
        output_bytes: int | None,
        fits_only: bool,
        owner: Owner | None,
    ) -> int:
        s = self.engine.schema
        self._catch_up_dialog(conn, deadline, owner)
        spent = 0
        while deadline is None or time.monotonic() <= deadline:
            if output_bytes is not None and spent >= output_bytes:
                break
            room = output_bytes - spent if fits_only and output_bytes is not None else None
            with maintenance(conn, owner):
                conn.execute(_NO_FLUSH_WAIT)
                row = conn.execute(
                    f"SELECT id FROM {s}.outputs WHERE NOT indexed "
                    "AND (%s::bigint IS NULL OR size - indexed_bytes <= %s::bigint) "
                    "ORDER BY size - indexed_bytes, saved_at LIMIT 1 FOR UPDATE SKIP LOCKED",
                    (room, room),
                ).fetchone()
                if row is None:
                    break
                spent += self._index_piece(conn, row[0])[0]
        self._spent = spent
        with maintenance(conn, owner):
            left = conn.execute(
                f"SELECT (SELECT count(*) FROM {s}.dialog WHERE NOT indexed) "
                f"+ (SELECT count(*) FROM {s}.outputs WHERE NOT indexed)"
            ).fetchone()
        return int(left[0]) + catch_up_memory(conn, s, deadline, owner)

    def _catch_up_dialog(self, conn: Any, deadline: float | None, owner: Owner | None) -> None:
        s = self.engine.schema
        more = True
        while more and (deadline is None or time.monotonic() <= deadline):
            with maintenance(conn, owner):
                conn.execute(_NO_FLUSH_WAIT)
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
        yield_to_searches()  # (a search of the process runs first)
        out = [
            chunk_row("dialog", source, chunk, meta)
            for text in parts.texts
            for chunk in chunk_lines(text.split("\n"))
        ]
        for ref, tool, call_id in parts.outputs:
            key = output_id(ref)
            if key is not None:
                call_args = parts.calls.get(call_id, (tool, ""))[1] or None
                self._named(conn, key, (agent, session, tool, call_args), ts)
        return out

    def _insert(self, conn: Any, rows: list[tuple[object, ...]]) -> None:
        self._unanalyzed += len(rows)
        insert_chunks(conn, self.engine.schema, rows)

    def _saved(self, conn: Any, key: str, owner: tuple[str, str, None, None]) -> None:
        """Index output `key` as it is saved (a large one in the background), as its saver
        `owner`'s: a transaction that sees the saver's rows alone does it (any role may)."""
        s = self.engine.schema
        with maintenance(conn, owner[:2]):  # one commit: the owner and the chunks
            self._set_owner(conn, key, owner, _stamp(time.time()))
            row = conn.execute(
                f"SELECT size FROM {s}.outputs WHERE id = %s AND NOT indexed "
                "FOR UPDATE SKIP LOCKED",
                (key,),
            ).fetchone()
            if row is None:
                return
            if int(row[0]) > INDEX_AT_SAVE_BYTES:
                self.background.kick()
                return
            while not self._index_piece(conn, key)[1]:
                pass

    def _named(self, conn: Any, key: str, owner: tuple[str | None, ...], ts: str | None) -> None:
        """`_set_owner` for output `key` that a dialog record names, in a savepoint: a
        transaction bound to the record's owner may not update the row of an output another
        tenant saved (row-level security), which then stays as it is."""
        import psycopg

        try:
            with conn.transaction():
                self._set_owner(conn, key, owner, ts)
        except psycopg.errors.InsufficientPrivilege:
            pass

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

    def _index_piece(self, conn: Any, key: str) -> tuple[int, bool]:
        """Index the next piece of output `key` (`_index_pieces.cut_piece`, `PIECE_BYTES`)
        from where the last one ended (the caller holds its row); the bytes indexed and
        whether the output is now indexed whole."""
        s = self.engine.schema
        owner = conn.execute(
            f"SELECT o.size, o.indexed_bytes, o.indexed_lines, o.agent, o.session, w.tool, w.args, "
            f"coalesce(w.ts, to_char(o.saved_at AT TIME ZONE current_setting('TimeZone'), "
            f"'YYYY-MM-DD HH24:MI:SS')), o.agent, o.session "  # the saver owns it
            f"FROM {s}.outputs AS o LEFT JOIN {s}.owners AS w ON w.id = o.id WHERE o.id = %s",
            (key,),
        ).fetchone()
        if owner is None:
            return 0, True
        size, done, line, _, _, tool, args, ts, agent, session = owner
        meta = (agent, session, "tool", tool, args, ts)

        def output_bytes() -> Iterator[bytes]:
            n, skip = divmod(int(done), CHUNK)
            while True:
                row = conn.execute(
                    f"SELECT data FROM {s}.output_chunks WHERE id = %s AND n = %s", (key, n)
                ).fetchone()
                if row is None:
                    return
                yield bytes(row[0])[skip:]
                skip, n = 0, n + 1

        source = f"pg-output:{key}"
        if not done:
            conn.execute(f"DELETE FROM {s}.chunks WHERE source = %s", (source,))
        data = cut_piece(output_bytes(), pieces.PIECE_BYTES)
        rows = [block_row(source, b, meta) for b in cut_blocks(data, int(done), int(line) + 1)]
        self._insert(conn, rows)
        done, line = int(done) + len(data), int(line) + data.count(b"\n")
        whole = not data or done >= int(size)
        conn.execute(
            f"UPDATE {s}.outputs SET indexed = %s, indexed_bytes = %s, indexed_lines = %s "
            "WHERE id = %s",
            (whole, done, line, key),
        )
        return len(data), whole
