"""A migration role and a workers' role on the fleet store (issue 46 item 6, docs/tenants.md):
the tables are made by a role that owns them, and the workers log in as a role granted only
``SELECT``, ``INSERT``, ``UPDATE`` and ``DELETE``. As the workers' role, SQL cannot turn the
row-level security off (that takes the owner), and setting ``agentscope_ctx.scope`` to
``all`` or ``shared`` itself reveals no row of another tenant: the policy honours those only
for a role with the owner's privileges (`_schema.CROSSES`). On a real server."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx import ContextConfig
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.stores.factory import open_stores
from agentscope_ctx.stores.postgres import PostgresEngine
from agentscope_ctx.stores.postgres._tenant import transaction
from agentscope_ctx.stores.postgres._tombstones import record_tombstones
from tests.fleet.postgres_server import PORT, PostgresServer
from tests.support.lines import Msg

ENV = "AGENTSCOPE_CTX_TEST_ROLES_PGPASSWORD"
PASSWORD = "roles-Pw'd"
TABLES = (
    "dialog",
    "dialog_days",
    "outputs",
    "output_chunks",
    "owners",
    "chunks",
    "steps",
    "tombstones",
)


def roles(server: PostgresServer, password: str) -> tuple[str, str]:
    """The migration role (may create schemas: it owns what it makes) and the workers' role
    (logs in, owns nothing), as docs/tenants.md has an operator make them."""
    import psycopg

    tag = uuid.uuid4().hex[:8]
    migrate, worker = f"migrate_{tag}", f"worker_{tag}"
    secret = PASSWORD.replace("'", "''")
    with psycopg.connect(server.dsn, password=password, autocommit=True) as conn:
        for role in (migrate, worker):
            conn.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD '{secret}'")
        conn.execute(f"GRANT CREATE ON DATABASE postgres TO {migrate}")
    return migrate, worker


def config(tmp_path: Path, server: PostgresServer, role: str, schema: str) -> ContextConfig:
    """A worker's config, logging in as `role`."""
    store = {
        "kind": "postgres",
        "dsn": f"host={server.root} port={PORT} user={role} dbname=postgres",
        "password_env": ENV,
        "schema_name": schema,
    }
    return ContextConfig(working_dir=tmp_path / role, store=store)


def writes(cfg: ContextConfig, agent: str, session: str, text: str) -> None:
    """`agent` of `session` saves an output and a message leaves its context (indexed)."""
    stores = open_stores(cfg, agent=agent, session=session)
    try:
        stores.outputs.save(f"{text}\n")
        asyncio.run(stores.dialog.append([Msg("user", text, "user")]))
        stores.search.catch_up(seconds=None)
    finally:
        stores.close()


def test_the_workers_role_cannot_turn_the_wall_off_nor_cross_by_the_setting(
    tmp_path: Path,
    pg_server: PostgresServer,
    pg_password: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import psycopg

    monkeypatch.setenv(ENV, PASSWORD)
    schema = f"r_{uuid.uuid4().hex[:12]}"
    migrate, worker = roles(pg_server, pg_password)

    def engine(role: str) -> PostgresEngine:
        return PostgresEngine(
            f"host={pg_server.root} port={PORT} user={role} dbname=postgres",
            password_env=ENV,
            schema=schema,
        )

    owner = config(tmp_path, pg_server, migrate, schema)
    writes(owner, "assistant", "s-alice", "alice's secret hunter2")  # makes the schema
    as_owner = engine(migrate)
    with transaction(as_owner, None) as conn:  # retention's, as the owner runs it
        record_tombstones(
            conn, schema, [("pg-output:" + "0" * 32, "assistant", "s-alice", 1)], at=0
        )
    dml = (
        f"GRANT USAGE ON SCHEMA {schema} TO {worker}; "
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {worker}; "
        f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {worker}"
    )
    with psycopg.connect(pg_server.dsn, password=pg_password, autocommit=True) as conn:
        for statement in dml.split("; "):
            conn.execute(statement)
    as_bob = config(tmp_path, pg_server, worker, schema)
    writes(as_bob, "assistant", "s-bob", "bob's note")  # its own rows: as ever
    # the worker is told, once, that what works on every tenant's rows sees none of them here
    told = [r.getMessage() for r in caplog.records if "owner of the store's schema" in r.message]
    assert len(told) == 1 and worker not in told[0] and migrate not in told[0]

    def counts(conn: Any) -> dict[str, int]:
        return {t: conn.execute(f"SELECT count(*) FROM {schema}.{t}").fetchone()[0] for t in TABLES}

    as_worker = engine(worker)
    try:
        with as_worker.connection() as conn:
            for sql in (
                f"ALTER TABLE {schema}.dialog DISABLE ROW LEVEL SECURITY",
                f"ALTER TABLE {schema}.outputs NO FORCE ROW LEVEL SECURITY",
                f"DROP POLICY tenant ON {schema}.chunks",
                f"ALTER POLICY tenant ON {schema}.dialog USING (true)",
                f"CREATE POLICY everyone ON {schema}.dialog USING (true)",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                    conn.execute(sql)
            for scope in ("all", "shared"):
                with conn.transaction():  # as the store's maintenance binds it (`_tenant.bind`)
                    conn.execute("SELECT set_config('agentscope_ctx.scope', %s, true)", (scope,))
                    assert counts(conn) == dict.fromkeys(TABLES, 0), scope
                    assert not conn.execute(f"DELETE FROM {schema}.dialog RETURNING seq").fetchall()
                conn.execute(f"SET agentscope_ctx.scope = '{scope}'")  # for the session
                with conn.transaction():
                    assert counts(conn) == dict.fromkeys(TABLES, 0), scope
                conn.execute("RESET agentscope_ctx.scope")
        with transaction(as_worker, Tenant.of("assistant", "s-bob")) as conn:
            bob = counts(conn)
            text = " ".join(r for (r,) in conn.execute(f"SELECT record FROM {schema}.dialog"))
        assert bob["dialog"] == bob["outputs"] == 1 and "hunter2" not in text
        with transaction(as_owner, None) as conn:  # the owner's maintenance sees every tenant
            every = counts(conn)
        assert every["dialog"] == every["outputs"] == 2 and every["tombstones"] == 1
    finally:
        as_worker.close()
        as_owner.close()
