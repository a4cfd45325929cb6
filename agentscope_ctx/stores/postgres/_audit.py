"""`PostgresAudit`: the audit trail (`stores._audit`) in the fleet store, a table of its
schema made on first use::

    audit(id, at, action, line)    one row per forget, retention run, export or import;
        `line` is the JSON line the local ``audit.jsonl`` holds

An operator reads it with ``SELECT line FROM <schema>.audit ORDER BY id``. It holds no
tenant's data, only who acted on which tenant and how many records of each kind: it has no
row-level security, and a `forget` leaves it (the one record a forget may leave).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._engine import PostgresEngine

__all__ = ["PostgresAudit"]

_DDL = """
CREATE TABLE IF NOT EXISTS {s}.audit (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    action text NOT NULL,
    line jsonb NOT NULL
)
"""


class PostgresAudit:
    """The ``audit`` table of `engine`'s schema (see the module docstring)."""

    def __init__(self, engine: PostgresEngine) -> None:
        self.engine = engine
        self._made = False

    @property
    def table(self) -> str:
        return f"{self.engine.schema}.audit"

    def _ensure(self, conn: Any) -> None:
        if not self._made:
            conn.execute(_DDL.format(s=self.engine.schema))
            self._made = True

    def write(self, line: Mapping[str, Any]) -> None:
        """Insert `line` (one row).

        Raises:
            PersistenceError: the store cannot be written (scrubbed of its names).
        """
        try:
            with self.engine.connection() as conn, conn.transaction():
                self._ensure(conn)
                conn.execute(
                    f"INSERT INTO {self.table} (action, line) VALUES (%s, %s)",
                    (str(line.get("action", "")), json.dumps(line, ensure_ascii=False)),
                )
        except Exception as exc:
            raise self.engine.error("cannot write the audit line", exc) from None

    def read(self) -> list[dict[str, Any]]:
        """Every line, oldest first."""
        try:
            with self.engine.connection() as conn, conn.transaction():
                self._ensure(conn)
                rows = conn.execute(f"SELECT line FROM {self.table} ORDER BY id").fetchall()
        except Exception as exc:
            raise self.engine.error("cannot read the audit trail", exc) from None
        return [row[0] if isinstance(row[0], dict) else json.loads(row[0]) for row in rows]
