"""`PostgresDialogStore`: the dialog seam on PostgreSQL (table ``dialog``, see `_schema`).

Append-only and idempotent by message id (``INSERT ... ON CONFLICT (msg_id) DO NOTHING``),
ordered by an identity sequence (the order of the appends, across workers). Each row holds
the record line of `_dialog_record` (so both stores keep a message the same way), its day
(the date of ``Msg.timestamp``, else today) and the agent and session it was given.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import Any

from ...core._entry import Msg
from ...core._errors import ContextUsageError, PersistenceError
from .._dialog import DialogReadReport
from .._dialog_record import date_prefix, decode_record, encode_record
from ._engine import PostgresEngine

__all__ = ["PostgresDialogStore"]

logger = logging.getLogger("agentscope_ctx")

_SOURCE = "dialog"
"""The name a read report gives the table (where the local store names a day file)."""


class PostgresDialogStore:
    """The append-only store of messages that left the context, on PostgreSQL.

    Args:
        engine: The database.
        record_fields: ``agent`` and ``session`` written on each record (and in their
            columns).
        on_append: Called (in a worker thread) after records were written; what it raises
            is logged, never passed on.
    """

    def __init__(
        self,
        engine: PostgresEngine,
        *,
        record_fields: Mapping[str, str] | None = None,
        on_append: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self._fields = dict(record_fields or {})
        self._on_append = on_append

    async def append(self, msgs: Sequence[Msg]) -> int:
        """Store `msgs` durably (committed) in order, skipping stored ids; the number written.

        Raises:
            PersistenceError: a message id is not a string, or the database cannot be
                written (appending the same messages again is safe).
        """
        if not msgs:
            return 0
        written = await asyncio.to_thread(self._append_sync, list(msgs))
        if written and self._on_append is not None:
            try:
                await asyncio.to_thread(self._on_append)
            except Exception:  # a listener (the search index) never fails a durable append
                logger.exception("agentscope_ctx: the dialog append listener failed")
        return written

    def read(self, day: str | None = None) -> tuple[list[Msg], DialogReadReport]:
        """The stored messages in append order (`day`: ``YYYY-MM-DD`` only). A record that
        does not decode is skipped and reported as (``"dialog"``, its seq, why).

        Raises:
            ContextUsageError: `day` is not a ``YYYY-MM-DD`` date.
            PersistenceError: the database cannot be read.
        """
        if day is not None and date_prefix(day) != day:
            raise ContextUsageError(f"day must be a date 'YYYY-MM-DD', got {day!r}")
        s = self.engine.schema
        where, params = ("WHERE day = %s", (day,)) if day is not None else ("", ())
        msgs: list[Msg] = []
        report = DialogReadReport()
        try:
            with self.engine.connection() as conn, conn.transaction():
                cursor = conn.cursor(name="agentscope_ctx_read")
                cursor.itersize = 2_000
                cursor.execute(f"SELECT seq, record FROM {s}.dialog {where} ORDER BY seq", params)
                for seq, record in cursor:
                    msg = decode_record(record.encode("utf-8"))
                    if isinstance(msg, Msg):
                        msgs.append(msg)
                    else:
                        report.bad_lines.append((_SOURCE, int(seq), msg[:200]))
                cursor.close()
        except PersistenceError:
            raise
        except Exception as exc:
            raise self.engine.error("cannot read the dialog", exc) from None
        report.files = [_SOURCE] if msgs or report.bad_lines else []
        report.messages = len(msgs)
        return msgs, report

    async def aread(self, day: str | None = None) -> tuple[list[Msg], DialogReadReport]:
        """`read`, in a thread."""
        return await asyncio.to_thread(self.read, day)

    def days(self) -> list[str]:
        """The days that hold messages, sorted."""
        rows = self._query(f"SELECT DISTINCT day FROM {self.engine.schema}.dialog ORDER BY day")
        return [row[0].isoformat() for row in rows]

    def ids(self) -> set[str]:
        """The ids of every stored message."""
        return {row[0] for row in self._query(f"SELECT msg_id FROM {self.engine.schema}.dialog")}

    def count(self) -> int:
        """How many messages are stored."""
        return int(self._query(f"SELECT count(*) FROM {self.engine.schema}.dialog")[0][0])

    # -- internals -------------------------------------------------------------------------

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        try:
            with self.engine.connection() as conn:
                return list(conn.execute(sql).fetchall())
        except PersistenceError:
            raise
        except Exception as exc:
            raise self.engine.error("cannot read the dialog", exc) from None

    def _append_sync(self, msgs: list[Msg]) -> int:
        today = date.today().isoformat()
        ids: list[str] = []
        days: list[str] = []
        records: list[str] = []
        lossy_of: dict[str, list[str]] = {}
        seen: set[str] = set()
        for msg in msgs:
            line, lossy = encode_record(msg, self._fields)  # raises for a non-str id
            if msg.id in seen:
                continue
            seen.add(msg.id)
            ids.append(msg.id)
            days.append(date_prefix(msg.timestamp) or today)
            records.append(line.decode("utf-8").rstrip("\n"))
            if lossy:
                lossy_of[msg.id] = lossy
        s = self.engine.schema
        agent, session = self._fields.get("agent"), self._fields.get("session")
        try:
            with self.engine.connection() as conn:
                rows = conn.execute(
                    f"INSERT INTO {s}.dialog (msg_id, agent, session, day, record) "
                    "SELECT u.msg_id, %s, %s, u.day, u.record "
                    "FROM unnest(%s::text[], %s::date[], %s::text[]) WITH ORDINALITY "
                    "AS u(msg_id, day, record, n) ORDER BY u.n "
                    "ON CONFLICT (msg_id) DO NOTHING RETURNING msg_id",
                    (agent, session, ids, days, records),
                ).fetchall()
        except PersistenceError:
            raise
        except Exception as exc:
            raise self.engine.error("cannot append to the dialog", exc) from None
        for (msg_id,) in rows:
            if msg_id in lossy_of:
                logger.warning(
                    "agentscope_ctx: message %r stored with values changed to make it storable "
                    "(listed in its record's 'lossy'): %s",
                    msg_id, ", ".join(lossy_of[msg_id][:10]),
                )  # fmt: skip
        return len(rows)
