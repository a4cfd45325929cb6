"""Issue 30: a search's dialog hits are placed in their day (`_search_sql.day_rows`) by one
pass over the day, not one pass per hit: an operator's search filtered by session only
(no tenant: the day as every tenant's rows) took seconds on a day of 100k messages. Real
PostgreSQL (`tests/fleet/conftest`)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.stores.postgres import PostgresDialogStore, PostgresEngine
from agentscope_ctx.stores.postgres._search_sql import day_rows
from agentscope_ctx.stores.postgres._tenant import bind, owner_sql
from tests.support.lines import Msg

DAY_ROWS = 400
SESSIONS = 4


def _fill(engine: PostgresEngine) -> None:
    """`DAY_ROWS` messages of one day, `SESSIONS` sessions interleaved, and one of the next day."""
    for n in range(DAY_ROWS + 1):
        day = "2026-12-02" if n < DAY_ROWS else "2026-12-03"
        msg = Msg("user", f"message {n} needleword", "user")
        msg.id, msg.timestamp = f"m{n}", f"{day} 10:00:{n % 60:02d}.000"
        dialog = PostgresDialogStore(
            engine,
            record_fields={"agent": "a1", "session": f"s{n % SESSIONS if n < DAY_ROWS else 1}"},
        )
        asyncio.run(dialog.append([msg]))


def _expected(conn: Any, schema: str, seqs: list[int], tenant: Tenant | None) -> dict[int, int]:
    """Each seq's line in its day as `tenant` reads it, counted plainly."""
    own = "" if tenant is None else f" AND e.session = '{tenant.session}'"
    return {
        seq: conn.execute(
            f"SELECT count(*) FROM {schema}.dialog AS e, {schema}.dialog AS d WHERE d.seq = %s "
            f"AND e.day = d.day AND e.seq <= d.seq{own}",
            (seq,),
        ).fetchone()[0]
        for seq in seqs
    }


@pytest.mark.parametrize("tenant", [None, Tenant.of("a1", "s1")], ids=["operator", "tenant"])
def test_the_hits_lines_are_counted_in_one_pass_over_the_day(
    pg_server: Any, pg_password: str, tenant: Tenant | None
) -> None:
    """28 hits (what a search of 5 places) of one session in a day of 400 rows: each gets
    its line in the day as the tenant reads it, and the dialog rows read are about the day's
    once (before: a count of the day per hit, 28 times as many)."""
    engine = PostgresEngine(
        pg_server.dsn,
        password_env="AGENTSCOPE_CTX_TEST_PGPASSWORD",
        schema=f"l_{uuid.uuid4().hex[:12]}",
    )
    s = engine.schema
    try:
        _fill(engine)
        with engine.connection() as conn:
            with conn.transaction():
                bind(conn, None)
                conn.execute(f"ANALYZE {s}.dialog")
                seqs = [
                    seq
                    for (seq,) in conn.execute(
                        f"SELECT seq FROM {s}.dialog WHERE session = 's1' AND day = '2026-12-02' "
                        "ORDER BY seq DESC "
                        "LIMIT 28"
                    ).fetchall()
                ]
                seqs.append(conn.execute(f"SELECT max(seq) FROM {s}.dialog").fetchone()[0])
                expected = _expected(conn, s, seqs, tenant)
        rows = [
            (-1.0, "", 1, 0, f"pg-dialog:{seq}", "dialog", 1, 0, "a1", "user", None, None, None)
            for seq in seqs
        ]
        # a connection of its own: its transaction's counts are this transaction's only
        with psycopg.connect(pg_server.dsn, password=pg_password) as conn:
            with conn.transaction():
                bind(conn, tenant)
                placed, records = day_rows(conn, s, rows, tenant)
                (read,) = conn.execute(
                    "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
                    "FROM pg_stat_xact_user_tables WHERE relid = %s::regclass",
                    (f"{s}.dialog",),
                ).fetchone()
        assert {row[7]: row[6] for row in placed} == expected
        assert {row[4] for row in placed} == {"pg-dialog:2026-12-02", "pg-dialog:2026-12-03"}
        assert sorted(records) == sorted(seqs) and all("needleword" in r for r in records.values())
        assert read <= 2 * (DAY_ROWS + 1) + len(seqs), read
    finally:
        engine.close()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    owners=st.lists(
        st.tuples(st.sampled_from(["a1", "a2"]), st.sampled_from(["s1", "s2"]), st.booleans()),
        min_size=1,
        max_size=30,
    ),
    scope=st.sampled_from(["session", "agent", "shared", None]),
    picks=st.sets(st.integers(min_value=0, max_value=29), min_size=1, max_size=10),
)
def test_a_hit_s_line_is_its_rank_in_the_day_as_the_tenant_reads_it(
    pg_server: Any,
    pg_password: str,
    owners: list[tuple[str, str, bool]],
    scope: str | None,
    picks: set[int],
) -> None:
    """Any owners over two days, any tenant scope, any hits it sees: each hit's line is the
    number of the day's rows up to it that the tenant sees (a plain count per hit)."""
    engine = PostgresEngine(
        pg_server.dsn,
        password_env="AGENTSCOPE_CTX_TEST_PGPASSWORD",
        schema=f"l_{uuid.uuid4().hex[:12]}",
    )
    s = engine.schema
    tenant = None if scope is None else Tenant.of("a1", "s1", scope=scope)  # type: ignore[arg-type]
    try:
        for n, (agent, session, later) in enumerate(owners):
            msg = Msg("user", f"message {n}", "user")
            day = "2026-12-03" if later else "2026-12-02"
            msg.id, msg.timestamp = f"m{n}", f"{day} 10:00:{n % 60:02d}.000"
            store = PostgresDialogStore(engine, record_fields={"agent": agent, "session": session})
            asyncio.run(store.append([msg]))
        with engine.connection() as conn, conn.transaction():
            bind(conn, tenant)
            own, params = owner_sql(tenant, "e")  # the tenant's rows (the server's
            # superuser is not held by row-level security: the search's own filter is)
            found = conn.execute(
                f"SELECT seq FROM {s}.dialog AS e WHERE {own} ORDER BY seq", params
            )
            seen = [seq for (seq,) in found]
            seqs = [seen[k] for k in sorted(picks) if k < len(seen)]
            expected = {
                seq: conn.execute(
                    f"SELECT count(*) FROM {s}.dialog AS e, {s}.dialog AS d WHERE d.seq = %s "
                    f"AND e.day = d.day AND e.seq <= d.seq AND {own}",
                    (seq, *params),
                ).fetchone()[0]
                for seq in seqs
            }
            rows = [
                (-1.0, "", 1, 0, f"pg-dialog:{seq}", "dialog", 1, 0, "a1", "user", None, None, None)
                for seq in seqs
            ]
            placed, records = day_rows(conn, s, rows, tenant)
        assert {row[7]: row[6] for row in placed if row[7]} == expected
        assert sorted(records) == sorted(seqs)
    finally:
        with engine.connection() as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
        engine.close()
