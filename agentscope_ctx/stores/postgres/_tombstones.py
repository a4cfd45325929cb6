"""The fleet store's tombstones (`stores._tombstones`): a table of its schema, made on first
use, under the same row-level security as the rows it stands for::

    tombstones(ref, agent, session, reason, deleted_at, size)   PRIMARY KEY (ref, agent,
        session): a saved output (``pg-output:ID``) or an owner's day of the dialog
        (``pg-dialog:YYYY-MM-DD``) that retention deleted

A read of a ref that is gone asks `deleted`: a tenant learns only of its own records.
"""

from __future__ import annotations

from typing import Any

from ...core._tenant import Tenant
from .._tombstones import Tombstone
from ._engine import PostgresEngine
from ._schema import TENANT_POLICY
from ._tenant import owner_sql, transaction

__all__ = ["deleted", "ensure_tombstones", "record_tombstones"]

_POLICY = TENANT_POLICY
"""The schema's policy of an owned row (`_schema.TENANT_POLICY`: every tenant only for the
owner's role)."""
_DDL = """
SELECT pg_advisory_xact_lock(hashtext('agentscope_ctx.tombstones'));
CREATE TABLE IF NOT EXISTS {s}.tombstones (
    ref text NOT NULL, agent text NOT NULL, session text NOT NULL,
    reason text NOT NULL, deleted_at double precision NOT NULL, size bigint,
    PRIMARY KEY (ref, agent, session));
ALTER TABLE {s}.tombstones ENABLE ROW LEVEL SECURITY;
ALTER TABLE {s}.tombstones FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS tenant ON {s}.tombstones;
CREATE POLICY tenant ON {s}.tombstones USING {p} WITH CHECK {p};
"""


def ensure_tombstones(conn: Any, schema: str) -> None:
    """Make the table when missing (inside the caller's transaction)."""
    exists = conn.execute("SELECT to_regclass(%s)", (f"{schema}.tombstones",)).fetchone()[0]
    if exists is None:
        for statement in _DDL.format(s=schema, p=_POLICY.format(s=schema)).split(";\n"):
            if statement.strip():
                conn.execute(statement)


def record_tombstones(
    conn: Any, schema: str, rows: list[tuple[str, str, str, int | None]], *, at: float
) -> None:
    """A tombstone per (ref, agent, session, size) of `rows` (in the caller's transaction,
    which must see every tenant: `_tenant.bind(conn, None)`)."""
    if not rows:
        return
    ensure_tombstones(conn, schema)
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {schema}.tombstones (ref, agent, session, reason, deleted_at, size) "
            "VALUES (%s, %s, %s, 'retention', %s, %s) ON CONFLICT (ref, agent, session) "
            "DO UPDATE SET deleted_at = EXCLUDED.deleted_at, size = EXCLUDED.size",
            [(ref, agent, session, at, size) for ref, agent, session, size in rows],
        )


def deleted(engine: PostgresEngine, ref: str, tenant: Tenant | None) -> Tombstone | None:
    """The tombstone of `ref` that `tenant` may see (`None`: none, or no table yet)."""
    schema = engine.schema
    own, params = owner_sql(tenant)
    try:
        with transaction(engine, tenant) as conn:
            if conn.execute("SELECT to_regclass(%s)", (f"{schema}.tombstones",)).fetchone()[0]:
                row = conn.execute(
                    f"SELECT reason, max(deleted_at), max(size) FROM {schema}.tombstones "
                    f"WHERE ref = %s AND {own} GROUP BY reason ORDER BY 2 DESC LIMIT 1",
                    (ref, *params),
                ).fetchone()
            else:
                row = None
    except Exception:
        return None
    if row is None:
        return None
    return Tombstone(reason=str(row[0]), deleted_at=float(row[1]), size=row[2])
