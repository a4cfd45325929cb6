"""`PostgresDialogStore`: the dialog seam on PostgreSQL (table ``dialog``, see `_schema`).

Append-only and idempotent by message id within its owner (``INSERT ... ON CONFLICT
(agent, session, msg_id) DO NOTHING``: two agents given one message object keep a copy each),
ordered by an identity sequence (the order of the appends, across workers), and numbered in
its owner's day (``line``, `_schema`). Each row holds
the record line of `_dialog_record` (so both stores keep a message the same way), its day
(the date of ``Msg.timestamp``, else today) and its owner: the agent and session it was given
(``""`` for none).

Reads see what the store's `tenant` may (`None`: every tenant, the operator's view): each
query filters on the owner columns and runs in a transaction bound to the tenant
(`_tenant`), which row-level security enforces as well. A day of another tenant reads as a
day without records.

Its days read like the local day files: ``pg-dialog:YYYY-MM-DD`` names the day's records in
order, one JSON line each (what ``dialog/YYYY-MM-DD.jsonl`` holds locally), and `read_file`
reads it by line and byte range (`line_count`, `line_start`, `read_range`: the
`seams.RangedSource` of `seams.excerpt`) without loading more than the records it shows. The
summary's guide and `search_history`'s dialog hits point there.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import Any

from ...core._entry import Msg
from ...core._errors import ContextUsageError, PersistenceError
from ...core._tenant import Tenant
from .._dialog import DialogReadReport, append_notifying
from .._dialog_record import date_prefix, decode_record, encode_record
from .._tombstones import Tombstone
from ._engine import PostgresEngine
from ._names import db_name
from ._schema import OWNER_LOCK
from ._tenant import owner_sql, transaction
from ._tombstones import deleted

__all__ = ["DAY_REF", "PostgresDialogStore", "day_ref"]

logger = logging.getLogger("agentscope_ctx")

DAY_REF = re.compile(r"pg-dialog:(\d{4}-\d{2}-\d{2})")
"""The form of a day of the dialog, as `read_file` reads it."""
GUIDE = "pg-dialog:YYYY-MM-DD"
"""How the summary's guide names the days (`ContextMemory.dialog_days`)."""


def day_ref(ref: str) -> str | None:
    """The ``YYYY-MM-DD`` of a day ref, or `None` when `ref` is not one."""
    match = DAY_REF.fullmatch(ref.strip()) if isinstance(ref, str) else None
    return match.group(1) if match and date_prefix(match.group(1)) == match.group(1) else None


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
        tenant: Whose records the reads show (`None`: everyone's).
    """

    def __init__(
        self,
        engine: PostgresEngine,
        *,
        record_fields: Mapping[str, str] | None = None,
        on_append: Callable[[], None] | None = None,
        tenant: Tenant | None = None,
    ) -> None:
        self.engine = engine
        self._fields = dict(record_fields or {})
        self._on_append = on_append
        self.tenant = tenant
        self._owner = Tenant(self._fields.get("agent", ""), self._fields.get("session", ""))

    @property
    def dialog_dir(self) -> str:
        """How notices name where the messages go: the days, as `read_file` reads them."""
        return GUIDE

    async def append(self, msgs: Sequence[Msg]) -> int:
        """Store `msgs` durably (committed) in order, skipping stored ids; the number written.

        Raises:
            PersistenceError: a message id is not a string, or the database cannot be
                written (appending the same messages again is safe).
        """
        return await append_notifying(self._append_sync, msgs, self._on_append)

    def read(
        self, day: str | None = None, *, session: str | None = None
    ) -> tuple[list[Msg], DialogReadReport]:
        """The stored messages in append order (`day`: ``YYYY-MM-DD`` only; `session`: that
        session's only, ``""`` those without one), as the store's tenant sees them. A record
        that does not decode is skipped and reported as (``"dialog"``, its seq, why).

        Raises:
            ContextUsageError: `day` is not a ``YYYY-MM-DD`` date.
            PersistenceError: the database cannot be read.
        """
        if day is not None and date_prefix(day) != day:
            raise ContextUsageError(f"day must be a date 'YYYY-MM-DD', got {day!r}")
        s = self.engine.schema
        own, params = owner_sql(self.tenant)
        where = f"WHERE {own}" + (" AND day = %s" if day is not None else "")
        params += (day,) if day is not None else ()
        if session is not None:
            where += " AND session = %s"
            params += (db_name(session) or "",)
        msgs: list[Msg] = []
        report = DialogReadReport()
        try:
            with transaction(self.engine, self.tenant) as conn:
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
        own, params = owner_sql(self.tenant)
        rows = self._query(
            f"SELECT DISTINCT day FROM {self.engine.schema}.dialog WHERE {own} ORDER BY day",
            *params,
        )
        return [row[0].isoformat() for row in rows]

    def ids(self) -> set[str]:
        """The ids of every stored message."""
        own, params = owner_sql(self.tenant)
        sql = f"SELECT msg_id FROM {self.engine.schema}.dialog WHERE {own}"
        return {row[0] for row in self._query(sql, *params)}

    def day_counts(self) -> dict[str, int]:
        """Messages stored per day (``YYYY-MM-DD``)."""
        own, params = owner_sql(self.tenant)
        rows = self._query(
            f"SELECT day, count(*) FROM {self.engine.schema}.dialog WHERE {own} "
            "GROUP BY day ORDER BY day",
            *params,
        )
        return {day.isoformat(): int(n) for day, n in rows}

    def count(self) -> int:
        """How many messages are stored."""
        own, params = owner_sql(self.tenant)
        sql = f"SELECT count(*) FROM {self.engine.schema}.dialog WHERE {own}"
        return int(self._query(sql, *params)[0][0])

    # -- a day as a file (``pg-dialog:YYYY-MM-DD``) ------------------------------------------

    def owns(self, ref: str) -> bool:
        """Whether `ref` names a day of this store (``pg-dialog:YYYY-MM-DD``)."""
        return day_ref(ref) is not None

    def deleted(self, ref: str) -> Tombstone | None:
        """The tombstone of the day `ref`, deleted by retention, as the tenant may see it."""
        return deleted(self.engine, ref, self.tenant) if day_ref(ref) is not None else None

    def line_count(self, ref: str) -> int:
        """Records of the day.

        Raises:
            KeyError: not a day ref, or no record that day.
        """
        day = self._day(ref)
        own, params = owner_sql(self.tenant)
        rows = self._query(
            f"SELECT count(*) FROM {self.engine.schema}.dialog WHERE {own} AND day = %s",
            *params, day,
        )  # fmt: skip
        if not rows or not rows[0][0]:
            raise KeyError(ref)
        return int(rows[0][0])

    def line_start(self, ref: str, line: int) -> int:
        """Byte offset where record `line` (from 1) of the day begins.

        Raises:
            KeyError: not a day ref.
        """
        day = self._day(ref)
        own, params = owner_sql(self.tenant)
        rows = self._query(
            "SELECT coalesce(sum(octet_length(record) + 1), 0) FROM (SELECT record "
            f"FROM {self.engine.schema}.dialog WHERE {own} AND day = %s ORDER BY seq "
            "LIMIT %s) AS r",
            *params, day, max(line - 1, 0),
        )  # fmt: skip
        return int(rows[0][0])

    def read_range(self, ref: str, offset: int, size: int) -> bytes:
        """Up to `size` bytes of the day's lines from `offset` (only the records they cover
        are fetched).

        Raises:
            KeyError: not a day ref, or no record that day.
        """
        day = self._day(ref)
        offset, size = max(offset, 0), max(size, 0)
        own, params = owner_sql(self.tenant)
        rows = self._query(
            "SELECT start, record FROM (SELECT seq, record, "
            "sum(octet_length(record) + 1) OVER (ORDER BY seq) - octet_length(record) - 1 "
            f"AS start FROM {self.engine.schema}.dialog WHERE {own} AND day = %s) AS r "
            "WHERE start < %s AND start + octet_length(record) + 1 > %s ORDER BY seq",
            *params, day, offset + size, offset,
        )  # fmt: skip
        if not rows:
            if not self._query(
                f"SELECT 1 FROM {self.engine.schema}.dialog WHERE {own} AND day = %s LIMIT 1",
                *params, day,
            ):  # fmt: skip
                raise KeyError(ref)
            return b""
        data = b"".join(record.encode("utf-8") + b"\n" for _, record in rows)
        skip = offset - int(rows[0][0])
        return data[skip : skip + size]

    def _day(self, ref: str) -> str:
        day = day_ref(ref)
        if day is None:
            raise KeyError(ref)
        return day

    # -- internals -------------------------------------------------------------------------

    def _query(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        try:
            with transaction(self.engine, self.tenant) as conn:
                return list(conn.execute(sql, params or None).fetchall())
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
        agent, session = db_name(self._owner.agent), db_name(self._owner.session)
        try:
            with transaction(self.engine, self._owner) as conn:
                # the owner's lines are numbered in `seq` order (`_schema._LINES`)
                conn.execute("SELECT " + OWNER_LOCK.format(a="%s", s="%s"), (agent, session))
                rows = conn.execute(
                    f"INSERT INTO {s}.dialog (msg_id, agent, session, day, record) "
                    "SELECT u.msg_id, %s, %s, u.day, u.record "
                    "FROM unnest(%s::text[], %s::date[], %s::text[]) WITH ORDINALITY "
                    "AS u(msg_id, day, record, n) ORDER BY u.n "
                    "ON CONFLICT (agent, session, msg_id) DO NOTHING RETURNING msg_id",
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
