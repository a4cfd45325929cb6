"""Issue 30: a search's dialog hits are placed in their day (`_search_sql.day_rows`) without
counting the day: each record's line in its owner's day is stored when it is appended
(schema 6, `_schema._LINES`), and a hit's line in the day as a tenant reads it is summed from
the day's owners in its scope. Before, an operator's search counted the day once per hit
(seconds on a day of 100k messages), then once per search (9 ms for a session's 10k rows of a
day). The lines stay 1 to n in `seq` order under concurrent appends, duplicates and a
schema-5 store brought up to 6. Real PostgreSQL (`tests/fleet/conftest`)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.stores.postgres import PostgresDialogStore, PostgresEngine
from agentscope_ctx.stores.postgres._schema import OWNER_LOCK
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


@contextmanager
def _fresh_engine(pg_server: Any, pg_password: str) -> Iterator[PostgresEngine]:
    """An engine on a schema of its own (made on first use), dropped at the end."""
    engine = PostgresEngine(
        pg_server.dsn,
        password_env="AGENTSCOPE_CTX_TEST_PGPASSWORD",
        schema=f"l_{uuid.uuid4().hex[:12]}",
    )
    try:
        yield engine
    finally:
        engine.close()
        with psycopg.connect(pg_server.dsn, password=pg_password, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {engine.schema} CASCADE")


def _hit_rows(seqs: list[int]) -> list[tuple[Any, ...]]:
    """Rows of `ranked_sql` for dialog hits on the records `seqs`."""
    return [
        (-1.0, "", 1, 0, f"pg-dialog:{seq}", "dialog", 1, 0, "a1", "user", None, None, None)
        for seq in seqs
    ]


@contextmanager
def _owner_lock_held(pg_server: Any, pg_password: str, waiter: threading.Thread) -> Iterator[Any]:
    """Another worker mid-append: a connection holding owner (a1, s1)'s lock, `waiter` started
    and waiting for it; the connection commits (the lock let go) at the end, then `waiter` is
    joined."""
    with (
        psycopg.connect(pg_server.dsn, password=pg_password) as other,
        psycopg.connect(pg_server.dsn, password=pg_password, autocommit=True) as watch,
    ):
        other.execute("SELECT set_config('agentscope_ctx.scope', 'all', true)")
        other.execute("SELECT " + OWNER_LOCK.format(a="'a1'", s="'s1'"))
        waiter.start()
        for _ in range(1000):  # until the waiter waits for the lock
            waiting = watch.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ).fetchone()[0]
            if waiting:
                break
            time.sleep(0.01)
        assert waiting
        yield other
        other.commit()
    waiter.join()


def _reads(pg_server: Any, pg_password: str, s: str, rows: list[Any], tenant: Tenant | None) -> Any:
    """`day_rows` of `rows` for `tenant`, on a connection of its own (its transaction's counts
    are this transaction's only), and the dialog rows it read."""
    with psycopg.connect(pg_server.dsn, password=pg_password) as conn, conn.transaction():
        bind(conn, tenant)
        placed, records = day_rows(conn, s, rows, tenant)
        (read,) = conn.execute(
            "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
            "FROM pg_stat_xact_user_tables WHERE relid = %s::regclass",
            (f"{s}.dialog",),
        ).fetchone()
    return placed, records, read


def _fill_at_once(engine: PostgresEngine, rows: int) -> None:
    """`rows` messages of one day, `SESSIONS` sessions interleaved, and one of the next day,
    in one ``INSERT`` (the triggers number them as they number an append's)."""
    with engine.connection() as conn, conn.transaction():
        bind(conn, None)
        conn.execute(
            f"INSERT INTO {engine.schema}.dialog (msg_id, agent, session, day, record) "
            "SELECT 'm' || n, 'a1', 's' || CASE WHEN n < %(rows)s THEN n %% %(k)s ELSE 1 END, "
            "CASE WHEN n < %(rows)s THEN date '2026-12-02' ELSE date '2026-12-03' END, "
            "'message ' || n || ' needleword' FROM generate_series(0, %(rows)s) AS n ORDER BY n",
            {"rows": rows, "k": SESSIONS},
        )
        conn.execute(f"ANALYZE {engine.schema}.dialog")


@pytest.mark.parametrize("tenant", [None, Tenant.of("a1", "s1")], ids=["operator", "tenant"])
def test_the_hits_lines_are_read_not_counted(
    pg_server: Any, pg_password: str, tenant: Tenant | None
) -> None:
    """29 hits (what a search of 5 places) at the end of a day of 4 sessions: each gets its
    line in the day as the tenant reads it, and the dialog rows read do not grow with the day
    (400 rows or 4,000: before, the day's rows were counted, twice as many read for 4,000)."""
    reads = []
    for size in (DAY_ROWS, 10 * DAY_ROWS):
        with _fresh_engine(pg_server, pg_password) as engine:
            s = engine.schema
            _fill_at_once(engine, size)
            with engine.connection() as conn, conn.transaction():
                bind(conn, None)
                seqs = [
                    seq
                    for (seq,) in conn.execute(
                        f"SELECT seq FROM {s}.dialog WHERE session = 's1' AND day = '2026-12-02' "
                        "ORDER BY seq DESC LIMIT 28"
                    ).fetchall()
                ]
                seqs.append(conn.execute(f"SELECT max(seq) FROM {s}.dialog").fetchone()[0])
                expected = _expected(conn, s, seqs, tenant)
            placed, records, read = _reads(pg_server, pg_password, s, _hit_rows(seqs), tenant)
            assert {row[7]: row[6] for row in placed} == expected
            assert {row[4] for row in placed} == {"pg-dialog:2026-12-02", "pg-dialog:2026-12-03"}
            assert sorted(records) == sorted(seqs)
            assert all("needleword" in r for r in records.values())
            reads.append(read)
    assert reads[0] < DAY_ROWS and reads[1] <= reads[0] + 10, reads


def _lines_in_order(engine: PostgresEngine) -> dict[tuple[str, str, str], list[int]]:
    """Each owner's day: its rows' lines in `seq` order."""
    with engine.connection() as conn, conn.transaction():
        bind(conn, None)
        found = conn.execute(
            f"SELECT agent, session, day::text, line FROM {engine.schema}.dialog ORDER BY seq"
        ).fetchall()
    days: dict[tuple[str, str, str], list[int]] = {}
    for agent, session, day, line in found:
        days.setdefault((agent, session, day), []).append(line)
    return days


def test_concurrent_appends_to_one_session_number_its_lines_in_seq_order(
    pg_server: Any, pg_password: str
) -> None:
    """Four workers append to one session at once (and to one other, of another agent), some
    messages twice: each owner's day is numbered 1 to n in `seq` order, no line skipped by a
    duplicate, and ``dialog_days`` lists each owner's days."""
    owners = [("a1", "s1")] * 4 + [("a2", "s1")]
    start = threading.Barrier(len(owners))
    with _fresh_engine(pg_server, pg_password) as engine:

        def worker(k: int, agent: str, session: str) -> None:
            store = PostgresDialogStore(engine, record_fields={"agent": agent, "session": session})
            start.wait()
            for n in range(30):
                msgs = []
                for m in (n, n + 1):  # m = n + 1 again in the next append: a duplicate
                    msg = Msg("user", f"worker {k} message {m}", "user")
                    day = "2026-12-02" if m % 7 else "2026-12-03"
                    msg.id, msg.timestamp = f"w{k}-m{m}", f"{day} 10:00:{m % 60:02d}.000"
                    msgs.append(msg)
                asyncio.run(store.append(msgs))

        threads = [
            threading.Thread(target=worker, args=(k, agent, session))
            for k, (agent, session) in enumerate(owners)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        days = _lines_in_order(engine)
        assert sorted(days) == [
            (a, "s1", d) for a in ("a1", "a2") for d in ("2026-12-02", "2026-12-03")
        ]
        for key, lines in days.items():
            assert lines == list(range(1, len(lines) + 1)), key
        assert sum(map(len, days.values())) == len(owners) * 31
        with engine.connection() as conn, conn.transaction():
            bind(conn, None)
            listed = conn.execute(
                f"SELECT agent, session, day::text FROM {engine.schema}.dialog_days"
            ).fetchall()
        assert sorted(listed) == sorted(days)


def _msg(msg_id: str, text: str, ts: str = "2026-12-02 10:00:00.000") -> Any:
    msg = Msg("user", text, "user")
    msg.id, msg.timestamp = msg_id, ts
    return msg


def test_an_append_takes_its_seq_after_the_owner_s_lock(pg_server: Any, pg_password: str) -> None:
    """Another worker holds the session's lock, mid-append: an append waits for it before it
    takes a `seq` (the trigger alone would wait after: its row's `seq` older than the other's,
    its line newer). Every line follows `seq`."""
    with _fresh_engine(pg_server, pg_password) as engine:
        store = PostgresDialogStore(engine, record_fields={"agent": "a1", "session": "s1"})
        asyncio.run(store.append([_msg("m0", "message 0")]))
        later = threading.Thread(
            target=lambda: asyncio.run(store.append([_msg("m1", "message 1")]))
        )
        with _owner_lock_held(pg_server, pg_password, later) as other:
            other.execute(  # the other worker's row, under the lock it holds
                f"INSERT INTO {engine.schema}.dialog (msg_id, agent, session, day, record) "
                "VALUES ('other', 'a1', 's1', '2026-12-02', '{}')"
            )
        assert _lines_in_order(engine) == {("a1", "s1", "2026-12-02"): [1, 2, 3]}


def test_a_worker_of_5_racing_another_never_gives_a_line_twice(
    pg_server: Any, pg_password: str
) -> None:
    """A worker of version 5 (its ``INSERT`` takes no lock first) draws its row's `seq`, then
    waits in the trigger while another worker numbers a newer row: its row takes the next
    line with an older `seq`. The append after both still takes a line of its own (the day's
    count in ``dialog_days``), not the newest row's line plus one, which the old row holds."""
    with _fresh_engine(pg_server, pg_password) as engine:
        store = PostgresDialogStore(engine, record_fields={"agent": "a1", "session": "s1"})
        insert = (
            f"INSERT INTO {engine.schema}.dialog (msg_id, agent, session, day, record) "
            "VALUES (%s, 'a1', 's1', '2026-12-02', '{}')"
        )

        def old_worker() -> None:
            with psycopg.connect(pg_server.dsn, password=pg_password) as conn:
                conn.execute("SELECT set_config('agentscope_ctx.scope', 'all', true)")
                conn.execute(insert, ("old",))
                conn.commit()

        asyncio.run(store.append([_msg("m0", "first")]))
        with _owner_lock_held(pg_server, pg_password, threading.Thread(target=old_worker)) as other:
            other.execute(insert, ("other",))
        asyncio.run(store.append([_msg("m1", "after", "2026-12-02 10:00:01.000")]))
        assert _lines_in_order(engine) == {("a1", "s1", "2026-12-02"): [1, 3, 2, 4]}


def test_a_schema_5_store_gets_its_lines_and_a_worker_of_5_still_appends(
    pg_server: Any, pg_password: str
) -> None:
    """A schema-5 store (no ``line``, no ``dialog_days``): the first worker of version 6
    numbers its rows, and its hits are placed as the day is read; a row inserted as a worker of
    version 5 does (no lock taken, no line given) is numbered after them."""
    with _fresh_engine(pg_server, pg_password) as made:
        s = made.schema
        _fill(made)
        with psycopg.connect(pg_server.dsn, password=pg_password, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {s}.dialog_days")
            conn.execute(f"DROP TRIGGER dialog_line ON {s}.dialog")
            conn.execute(f"DROP TRIGGER dialog_days ON {s}.dialog")
            conn.execute(f"ALTER TABLE {s}.dialog DROP COLUMN line")
            conn.execute(f"DELETE FROM {s}.schema_version WHERE version > 5")
            conn.execute(
                f"INSERT INTO {s}.schema_version (version) VALUES (5) ON CONFLICT DO NOTHING"
            )
        engine = PostgresEngine(
            pg_server.dsn, password_env="AGENTSCOPE_CTX_TEST_PGPASSWORD", schema=s
        )
        try:
            asyncio.run(PostgresDialogStore(engine).append([]))  # opens it: version 6
            with psycopg.connect(pg_server.dsn, password=pg_password, autocommit=True) as conn:
                conn.execute("SELECT set_config('agentscope_ctx.scope', 'all', false)")
                conn.execute(  # as a worker of version 5 appends
                    f"INSERT INTO {s}.dialog (msg_id, agent, session, day, record) "
                    "VALUES ('old', 'a1', 's1', '2026-12-02', '{}')"
                )
            days = _lines_in_order(engine)
            for key, lines in days.items():
                assert lines == list(range(1, len(lines) + 1)), key
            assert len(days[("a1", "s1", "2026-12-02")]) == DAY_ROWS // SESSIONS + 1
            with engine.connection() as conn, conn.transaction():
                bind(conn, None)
                seqs = [seq for (seq,) in conn.execute(f"SELECT seq FROM {s}.dialog").fetchall()]
                expected = _expected(conn, s, seqs, None)
            placed, _, _ = _reads(pg_server, pg_password, s, _hit_rows(seqs), None)
            assert {row[7]: row[6] for row in placed} == expected
        finally:
            engine.close()


_EXAMPLES = itertools.count()
"""The examples run so far (each writes days of its own)."""


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
    pg_schema: str,
    owners: list[tuple[str, str, bool]],
    scope: str | None,
    picks: set[int],
) -> None:
    """Any owners over two days, any tenant scope, any hits it sees: each hit's line is the
    number of the day's rows up to it that the tenant sees (a plain count per hit). Each
    example writes two days of its own to the test's schema and hits only their rows (a
    schema an example took some 0.2 s to make)."""
    tenant = None if scope is None else Tenant.of("a1", "s1", scope=scope)  # type: ignore[arg-type]
    first = date(2026, 12, 2) + timedelta(days=2 * next(_EXAMPLES))
    days = (first.isoformat(), (first + timedelta(days=1)).isoformat())
    engine = PostgresEngine(
        pg_server.dsn, password_env="AGENTSCOPE_CTX_TEST_PGPASSWORD", schema=pg_schema
    )
    try:
        s = engine.schema
        for n, (agent, session, later) in enumerate(owners):
            day = days[later]
            store = PostgresDialogStore(engine, record_fields={"agent": agent, "session": session})
            asyncio.run(
                store.append([_msg(f"m{n}-{day}", f"message {n}", f"{day} 10:00:{n % 60:02d}.000")])
            )
        with engine.connection() as conn, conn.transaction():
            bind(conn, tenant)
            own, params = owner_sql(tenant, "e")  # the tenant's rows (the server's
            # superuser is not held by row-level security: the search's own filter is)
            found = conn.execute(
                f"SELECT seq FROM {s}.dialog AS e WHERE e.day IN (%s, %s) AND {own} ORDER BY seq",
                (*days, *params),
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
            placed, records = day_rows(conn, s, _hit_rows(seqs), tenant)
        assert {row[7]: row[6] for row in placed if row[7]} == expected
        assert sorted(records) == sorted(seqs)
    finally:
        engine.close()
