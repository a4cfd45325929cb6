"""`PostgresStepLog`: the steps record of the session viewer (`stores._steps_file`) in the
fleet store: a ``steps`` table beside the schema's others (`_schema`, under the same row-level
security: a run's row is written in its tenant's transaction; the viewer, an operator's tool,
reads in the maintenance scope)::

    steps(id, session, agent, record, saved_at)    one row per pipeline run; `record` is the
        JSON line the local file holds

Bounded like the file: past `MAX_ROWS` rows of one agent in one session, the oldest go (checked
every `PRUNE_EVERY` appends). A failure is logged, never raised: the agent goes on.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ...core._tenant import Tenant
from .._steps_file import STEPS_VERSION, step_records
from ._engine import PostgresEngine
from ._names import db_name, name_from_db
from ._tenant import transaction

__all__ = ["MAX_ROWS", "PostgresStepLog"]

logger = logging.getLogger("agentscope_ctx")

MAX_ROWS = 50_000
"""Rows kept per agent and session (about what two local files of 4 MB hold)."""
PRUNE_EVERY = 1_000


class PostgresStepLog:
    """The steps record in PostgreSQL (see the module docstring)."""

    def __init__(self, engine: PostgresEngine, *, max_rows: int = MAX_ROWS) -> None:
        self.engine = engine
        self.max_rows = max_rows
        self._appends = 0

    def _table(self, conn: Any) -> str:
        return f"{self.engine.schema}.steps"

    def append(self, record: dict[str, Any]) -> None:
        """Insert one run's record (best effort)."""
        session = str(record.get("session") or "default")
        agent = str(record.get("agent") or "agent")
        line = json.dumps({"v": STEPS_VERSION, **record}, ensure_ascii=False)
        stored = (db_name(session) or "", db_name(agent) or "")  # as the columns hold names
        try:
            with transaction(self.engine, Tenant(agent, session)) as conn:
                table = self._table(conn)
                conn.execute(
                    f"INSERT INTO {table} (session, agent, record) VALUES (%s, %s, %s)",
                    (*stored, line),
                )
                self._appends += 1
                if self._appends % PRUNE_EVERY == 0:
                    conn.execute(
                        f"DELETE FROM {table} WHERE session = %s AND agent = %s AND id <= "
                        f"(SELECT id FROM {table} WHERE session = %s AND agent = %s "
                        "ORDER BY id DESC OFFSET %s LIMIT 1)",
                        (*stored, *stored, self.max_rows),
                    )
        except Exception as exc:
            logger.warning(
                "agentscope_ctx: cannot record the step: %s", self.engine.scrub(str(exc))
            )

    def read(self, session: str | None) -> list[dict[str, Any]]:
        """The session's records, every agent, oldest first."""
        with transaction(self.engine, None) as conn:
            table = self._table(conn)
            rows = conn.execute(
                f"SELECT record FROM {table} WHERE session = %s ORDER BY id",
                (db_name(session or "default"),),
            ).fetchall()
        return step_records(text for (text,) in rows)

    def sessions(self) -> list[str]:
        """The sessions with recorded steps."""
        with transaction(self.engine, None) as conn:
            table = self._table(conn)
            rows = conn.execute(f"SELECT DISTINCT session FROM {table} ORDER BY 1").fetchall()
        return [str(name_from_db(row[0])) for row in rows]
