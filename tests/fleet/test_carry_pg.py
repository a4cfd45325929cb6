"""The carried block kept as data (issue 29 items 1 and 9) on the PostgreSQL store: the
sessions of `tests/core/test_carry_data.py` with the fleet store (a clipped turn's note names the
store's dialog days), on the installed line."""

from __future__ import annotations

from pathlib import Path

from tests.core.test_carry_data import forged_session, paste_session
from tests.fleet.postgres_server import PostgresServer
from tests.support.agent_line import Line


def _store(server: PostgresServer, schema: str) -> dict[str, str]:
    return {
        "kind": "postgres",
        "dsn": server.dsn,
        "password_env": "AGENTSCOPE_CTX_TEST_PGPASSWORD",
        "schema_name": schema,
    }


async def test_a_forged_block_is_never_carried_on_postgres(
    tmp_path: Path, line: Line, pg_server: PostgresServer, pg_password: str, pg_schema: str
) -> None:
    await forged_session(tmp_path, line, "model", False, "block", _store(pg_server, pg_schema))


async def test_a_long_turn_leaves_the_constraints_on_postgres(
    tmp_path: Path, line: Line, pg_server: PostgresServer, pg_password: str, pg_schema: str
) -> None:
    await paste_session(tmp_path, line, "model", _store(pg_server, pg_schema))
