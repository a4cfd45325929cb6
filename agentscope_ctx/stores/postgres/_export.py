"""A session's rows of the fleet store, for its archive (`stores._export`): saved outputs
(whole), dialog records in append order, steps records; read in the maintenance scope
(every tenant's rows, then filtered by the caller's `wants`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ...core.search._saved_summary import SAVED_SUMMARY
from ._engine import PostgresEngine
from ._names import db_name, name_from_db
from ._outputs import PostgresOutputStore
from ._tenant import transaction

__all__ = ["pg_parts", "pg_saved_summaries"]


def pg_parts(
    engine: PostgresEngine,
    session: str,
    wants: Callable[[object], bool],
    wants_step: Callable[[object], bool],
) -> tuple[
    list[tuple[str, str | None, bytes, tuple[str | None, str | None]]],
    list[dict[str, Any]],
    list[dict[str, Any]],
]:
    """The session's outputs (ref, agent key, bytes), dialog records and steps records.

    Raises:
        PersistenceError: the store cannot be read.
    """
    s = engine.schema
    stored = db_name(session)
    try:
        with transaction(engine, None) as conn:
            owned = conn.execute(
                f"SELECT o.id, o.agent, w.tool, w.args FROM {s}.outputs AS o "
                f"LEFT JOIN {s}.owners AS w ON w.id = o.id "
                "WHERE o.session = %s ORDER BY o.saved_at, o.id",
                (stored,),
            ).fetchall()
            records = conn.execute(
                f"SELECT agent, record FROM {s}.dialog WHERE session = %s ORDER BY seq", (stored,)
            ).fetchall()
            steps = conn.execute(
                f"SELECT record FROM {s}.steps WHERE session = %s ORDER BY id",
                (db_name(session or "default"),),
            ).fetchall()
    except Exception as exc:
        raise engine.error("cannot read the session", exc) from None
    reader = PostgresOutputStore(engine, 1.0)
    outputs = []
    for key, agent, tool, args in owned:
        name = name_from_db(agent)
        if not wants(name):
            continue
        ref = f"pg-output:{key}"
        chunks = reader.read_saved(ref)
        if chunks is not None:
            outputs.append((ref, name, b"".join(chunks), (tool, args)))
    dialog = []
    for agent, text in records:
        record = _json(text)
        record["agent"] = name_from_db(agent)  # the column is the owner (a record of a
        # row migrated by schema version 8 keeps the key it was written with)
        record.setdefault("session", session)
        if wants(record["agent"]):
            dialog.append(record)
    kept = [r for r in map(_json, (row[0] for row in steps)) if wants_step(r.get("agent"))]
    return outputs, dialog, kept


def pg_saved_summaries(engine: PostgresEngine, session: str | None) -> dict[str, int]:
    """The summaries' texts saved whole (`core.search._saved_summary`) of `session` (`None`: every
    session): their bytes, by ref.

    Raises:
        PersistenceError: the store cannot be read.
    """
    s = engine.schema
    where = "" if session is None else " AND o.session = %s"
    try:
        with transaction(engine, None) as conn:
            rows = conn.execute(
                f"SELECT o.id, o.size FROM {s}.outputs AS o JOIN {s}.owners AS w ON w.id = o.id "
                f"WHERE w.tool = %s{where}",
                (SAVED_SUMMARY,) if session is None else (SAVED_SUMMARY, db_name(session)),
            ).fetchall()
    except Exception as exc:
        raise engine.error("cannot read the saved summaries", exc) from None
    return {f"pg-output:{key}": int(size) for key, size in rows}


def _json(text: str) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}
