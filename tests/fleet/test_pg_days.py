"""A day of the PostgreSQL dialog read as a file (``pg-dialog:YYYY-MM-DD``, what the summary's
guide and `search_history`'s dialog hits point to): its lines are the day's records in order,
one JSON line each, and following `read_file`'s notices from line 1 gives them back exactly
(the lossless chain of DESIGN §4, through the seam)."""

from __future__ import annotations

import asyncio
import itertools
from datetime import date, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_ctx.stores.postgres import PostgresDialogStore, PostgresEngine
from tests.fleet.excerpts import follow_excerpts
from tests.fleet.postgres_server import PostgresServer
from tests.support.lines import Msg

TEXTS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=400,
)


def _msg(n: int, text: str, day: str) -> Msg:
    msg = Msg("user", text, "user")
    msg.id = f"m{n}-{day}"
    msg.timestamp = f"{day} 10:00:{n % 60:02d}.000"
    return msg


_EXAMPLES = itertools.count()
"""The examples run so far (each writes days of its own)."""


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    texts=st.lists(TEXTS, min_size=1, max_size=12),
    other=st.lists(TEXTS, max_size=3),
    max_bytes=st.integers(min_value=200, max_value=3_000),
)
def test_a_day_reads_back_as_its_records_through_the_notices(
    pg_server: PostgresServer,
    pg_password: str,
    pg_schema: str,
    texts: list[str],
    other: list[str],
    max_bytes: int,
) -> None:
    """Each example writes two days of its own (the first the one read) to the test's schema,
    beside the earlier examples' days (a schema an example took some 0.2 s to make)."""
    first = date(2026, 12, 2) + timedelta(days=2 * next(_EXAMPLES))
    the_day, next_day = first.isoformat(), (first + timedelta(days=1)).isoformat()
    engine = PostgresEngine(
        pg_server.dsn, password_env="AGENTSCOPE_CTX_TEST_PGPASSWORD", schema=pg_schema
    )
    dialog = PostgresDialogStore(engine, record_fields={"agent": "a1"})
    msgs = [_msg(n, t, the_day) for n, t in enumerate(texts)]
    msgs += [_msg(100 + n, t, next_day) for n, t in enumerate(other)]  # another day
    asyncio.run(dialog.append(msgs))
    with engine.connection() as conn:
        rows = conn.execute(
            f"SELECT record FROM {engine.schema}.dialog WHERE day = %s ORDER BY seq", (the_day,)
        ).fetchall()
    day = "".join(record + "\n" for (record,) in rows)
    ref = f"pg-dialog:{the_day}"
    assert dialog.line_count(ref) == len(texts)
    at = 0
    for line, (record,) in enumerate(rows, start=1):
        assert dialog.line_start(ref, line) == at
        at += len(record.encode("utf-8")) + 1
    assert dialog.read_range(ref, 0, 1 << 30) == day.encode("utf-8")

    assert follow_excerpts(dialog, ref, max_bytes) == day
    engine.close()


def test_a_day_without_records_or_not_a_day_is_no_file(
    pg_server: PostgresServer, pg_password: str, pg_schema: str
) -> None:
    engine = PostgresEngine(
        pg_server.dsn, password_env="AGENTSCOPE_CTX_TEST_PGPASSWORD", schema=pg_schema
    )
    dialog = PostgresDialogStore(engine)
    for ref in ("pg-dialog:2026-12-02", "pg-dialog:2026-02-30", "pg-output:2026-12-02"):
        with pytest.raises(KeyError):
            dialog.line_count(ref)
    args: Any = ("pg-dialog:2026-12-02", 0, 10)
    with pytest.raises(KeyError):
        dialog.read_range(*args)
    engine.close()
