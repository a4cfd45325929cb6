"""Retention on the fleet store (`stores._retention` for what each kind means): one
transaction in the maintenance scope (every tenant's rows) deletes, per kind past its age,

- ``outputs``: ``outputs`` rows unused for their days and not `referenced` (their
  ``output_chunks``, ``owners`` and index blocks with them), a tombstone row each;
- ``dialog``: the ``dialog`` rows of the whole days past it, their search ``chunks`` and
  ``dialog_days`` rows, a tombstone row per owner's day (``pg-dialog:YYYY-MM-DD``);
- ``memory``: the daily notes (``memory_docs`` named ``YYYY-MM-DD.md``) and their chunks;
- ``steps``: the ``steps`` rows saved before it.

Then, when anything was deleted, ``VACUUM (ANALYZE)`` of those tables: their dead rows'
space is reusable at once (returned to the operating system only by ``VACUUM FULL``, which
locks the table: docs/data.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import date, datetime, timedelta
from typing import Any

from .._retention import RetentionDays, RetentionReport
from ._engine import PostgresEngine
from ._outputs import PostgresOutputStore
from ._tenant import transaction
from ._tombstones import record_tombstones

__all__ = ["pg_retention"]

logger = logging.getLogger("agentscope_ctx")


def last_expired_day(days: float, now: float) -> date:
    """The newest local day whose end (next midnight) is over `days` days before `now`."""
    cutoff = datetime.fromtimestamp(now - days * 86_400)
    day = cutoff.date()
    if datetime.combine(day + timedelta(days=1), datetime.min.time()) > cutoff:
        day -= timedelta(days=1)
    return day


def pg_retention(
    engine: PostgresEngine,
    days: RetentionDays,
    *,
    now: float,
    referenced: Iterable[str] = (),
    vacuum: bool = True,
) -> RetentionReport:
    """Apply `days` to the store (see the module docstring); what was deleted.

    Raises:
        PersistenceError: the store cannot be read or written (nothing deleted).
    """
    report = RetentionReport()
    s = engine.schema
    touched: list[str] = []
    if days.outputs is not None:
        store = PostgresOutputStore(engine, days.outputs)
        refs = store.cleanup(list(referenced), now=now)
        if refs:
            with transaction(engine, None) as conn:
                size = conn.execute(
                    f"SELECT coalesce(sum(size), 0) FROM {s}.tombstones "
                    "WHERE ref = ANY(%s) AND deleted_at = %s",
                    (refs, now),
                ).fetchone()[0]
            report.add("outputs", len(refs), int(size))
            report.outputs = refs
            touched += ["outputs", "output_chunks", "owners", "chunks"]
    try:
        with transaction(engine, None) as conn:
            if days.dialog is not None:
                touched += _dialog(conn, s, last_expired_day(days.dialog, now), now, report)
            if days.memory is not None:
                touched += _notes(conn, s, last_expired_day(days.memory, now), report)
            if days.steps is not None:
                rows = conn.execute(
                    f"DELETE FROM {s}.steps WHERE saved_at < to_timestamp(%s) "
                    "RETURNING octet_length(record)",
                    (now - days.steps * 86_400,),
                ).fetchall()
                report.add("steps", len(rows), sum(int(r[0]) for r in rows))
                touched += ["steps"] if rows else []
    except Exception as exc:
        raise engine.error("cannot apply retention", exc) from None
    if vacuum and touched:
        _vacuum(engine, sorted(set(touched)))
    return report


def _dialog(conn: Any, s: str, last: date, now: float, report: RetentionReport) -> list[str]:
    rows = conn.execute(
        f"DELETE FROM {s}.dialog WHERE day <= %s "
        "RETURNING seq, agent, session, day, octet_length(record)",
        (last,),
    ).fetchall()
    if not rows:
        return []
    conn.execute(
        f"DELETE FROM {s}.chunks WHERE kind = 'dialog' AND source = ANY(%s)",
        ([f"pg-dialog:{row[0]}" for row in rows],),
    )
    conn.execute(f"DELETE FROM {s}.dialog_days WHERE day <= %s", (last,))
    days: dict[tuple[str, str, str], int] = {}
    for _, agent, session, day, size in rows:
        key = (f"pg-dialog:{day.isoformat()}", agent, session)
        days[key] = days.get(key, 0) + int(size)
    record_tombstones(conn, s, [(*key, size) for key, size in days.items()], at=now)
    report.add("dialog", len(rows), sum(int(row[4]) for row in rows))
    return ["dialog", "dialog_days", "chunks", "tombstones"]


def _notes(conn: Any, s: str, last: date, report: RetentionReport) -> list[str]:
    rows = conn.execute(
        f"DELETE FROM {s}.memory_docs WHERE name ~ '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}[.]md$' "
        "AND name <= %s RETURNING agent, name, octet_length(body)",
        (f"{last.isoformat()}.md",),
    ).fetchall()
    for agent, name, _ in rows:
        conn.execute(
            f"DELETE FROM {s}.chunks WHERE kind = 'memory' AND agent = %s AND source = %s",
            (agent, f"pg-memory:{name}"),
        )
    report.add("memory", len(rows), sum(int(row[2]) for row in rows))
    return ["memory_docs", "chunks"] if rows else []


def _vacuum(engine: PostgresEngine, tables: list[str]) -> None:
    """``VACUUM (ANALYZE)`` of `tables` (outside a transaction; a failure is logged)."""
    try:
        with engine.connection() as conn:
            for table in tables:
                conn.execute(f"VACUUM (ANALYZE) {engine.schema}.{table}")
    except Exception as exc:
        logger.warning("agentscope_ctx: %s", engine.error("cannot vacuum after retention", exc))
