"""An unreachable database costs one connection attempt per `store.retry_seconds`, not one
per save or read (issue 23 item 4): in between, the store answers "unreachable" at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_ctx.core._errors import OffloadError, PersistenceError
from agentscope_ctx.stores.postgres import PostgresEngine, PostgresOutputStore
from tests.fleet.postgres_server import PostgresServer

ENV = "AGENTSCOPE_CTX_TEST_PGPASSWORD"


def _outputs(engine: PostgresEngine) -> PostgresOutputStore:
    return PostgresOutputStore(engine, 7)


def test_after_a_failed_attempt_the_store_fails_at_once_until_the_retry_time(
    tmp_path: Path, pg_password: str
) -> None:
    dsn = f"host={tmp_path} port=1 user=x dbname=x"  # no server listens there
    engine = PostgresEngine(dsn, password_env=ENV, connect_timeout=2, retry_after=3_600)
    outputs = _outputs(engine)
    for _ in range(3):
        with pytest.raises(OffloadError):
            outputs.save("kept whole by the caller")
    with pytest.raises(PersistenceError, match="unreachable"):
        outputs.size("pg-output:" + "0" * 32)
    assert engine.attempts == 1  # one attempt, then answered at once

    eager = PostgresEngine(dsn, password_env=ENV, connect_timeout=2, retry_after=0)
    for _ in range(3):
        with pytest.raises(OffloadError):
            _outputs(eager).save("x")
    assert eager.attempts == 3  # 0: every call tries


def test_a_database_that_answers_again_is_used_after_the_retry_time(
    pg_server: PostgresServer, pg_password: str, pg_schema: str
) -> None:
    engine = PostgresEngine(pg_server.dsn, password_env=ENV, schema=pg_schema, retry_after=0)
    outputs = _outputs(engine)
    engine.pool.down_until = float("inf")  # as after a failed attempt
    with pytest.raises(OffloadError, match="unreachable"):
        outputs.save("x")
    assert engine.attempts == 0
    engine.pool.down_until = 0.0  # the retry time has come
    ref = outputs.save("back\n")
    assert outputs.read_range(ref, 0, 10) == b"back\n" and engine.attempts == 1
    engine.close()
