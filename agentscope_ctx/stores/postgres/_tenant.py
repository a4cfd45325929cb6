"""The tenant of a PostgreSQL transaction (DESIGN.md §15, docs/tenants.md).

Row-level security (`_schema`, version 2) shows a transaction only the rows its settings
allow; `bind` sets them, for the transaction only (``set_config(..., true)``), so a
connection handed back to the pool carries none. A statement made outside a transaction, or
in one that did not bind, sees no row and writes none.

The store's own queries filter on the owner columns too (`owner_sql`): the policy is the
second wall, for a query that forgets the first.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...core._tenant import Tenant
from ._engine import PostgresEngine
from ._names import db_name

__all__ = [
    "Owner",
    "bind",
    "crosses",
    "maintenance",
    "owner_named",
    "owner_of",
    "owner_sql",
    "stored_owner",
    "transaction",
]

Owner = tuple[str, str | None]
"""An owner as the owner columns hold it (`stored_owner`): its agent key and its session
(`None`: every session of the agent)."""

_SET = (
    "SELECT set_config('agentscope_ctx.scope', %s, true), "
    "set_config('agentscope_ctx.agent', %s, true), "
    "set_config('agentscope_ctx.session', %s, true)"
)


def stored_owner(tenant: Tenant) -> tuple[str, str]:
    """`tenant`'s agent key and session as the owner columns hold them (`_names`)."""
    return db_name(tenant.agent) or "", db_name(tenant.session) or ""


def bind(conn: Any, tenant: Tenant | None) -> None:
    """Make the current transaction `tenant`'s (`None`: every tenant's rows, for the index's
    own catch-up, retention and the operator's tools)."""
    if tenant is None:
        conn.execute(_SET, ("all", "", ""))
    else:
        conn.execute(_SET, (tenant.scope, *stored_owner(tenant)))


@contextmanager
def transaction(engine: PostgresEngine, tenant: Tenant | None) -> Iterator[Any]:
    """A connection in a transaction bound to `tenant` (committed at the end)."""
    with engine.connection() as conn, conn.transaction():
        bind(conn, tenant)
        yield conn


@contextmanager
def maintenance(conn: Any, owner: Owner | None = None) -> Iterator[None]:
    """A transaction on `conn` that sees every tenant's rows (the index's catch-up), or only
    `owner`'s: what a role without the schema owner's privileges can see (`crosses`)."""
    with conn.transaction():
        if owner is None:
            bind(conn, None)
        else:
            agent, session = owner
            conn.execute(_SET, ("agent" if session is None else "session", agent, session or ""))
        yield


def owner_of(tenant: Tenant) -> Owner | None:
    """The rows `tenant` sees as an `Owner` (`None`: every tenant's, for ``shared``)."""
    if tenant.scope == "shared":
        return None
    agent, session = stored_owner(tenant)
    return agent, session if tenant.scope == "session" else None


def crosses(conn: Any, schema: str) -> bool:
    """Whether the connection's role sees every tenant's rows when it binds none: it has the
    privileges of `schema`'s owner (`_schema.CROSSES`)."""
    row = conn.execute(
        "SELECT pg_has_role(nspowner, 'USAGE') FROM pg_catalog.pg_namespace "
        "WHERE oid = to_regnamespace(%s)",
        (schema,),
    ).fetchone()
    return row is None or bool(row[0])


def owner_sql(tenant: Tenant | None, alias: str = "") -> tuple[str, tuple[str, ...]]:
    """The condition (with its parameters, ``%s`` style) that a row of `alias` is in
    `tenant`'s scope: ``TRUE`` for `None` and ``shared``."""
    if tenant is None or tenant.scope == "shared":
        return "TRUE", ()
    a = f"{alias}." if alias else ""
    agent, session = stored_owner(tenant)
    if tenant.scope == "agent":
        return f"{a}agent = %s", (agent,)
    return f"({a}agent = %s AND {a}session = %s)", (agent, session)


def owner_named(tenant: Tenant | None, alias: str = "") -> tuple[str, dict[str, str]]:
    """`owner_sql` with named parameters (``%(t_agent)s``, ``%(t_session)s``)."""
    own, params = owner_sql(tenant, alias)
    names = ("t_agent", "t_session")[: len(params)]
    for name in names:
        own = own.replace("%s", f"%({name})s", 1)
    return own, dict(zip(names, params, strict=True))
