"""Fixtures of the fleet tests: a private PostgreSQL server per xdist worker (session scope,
see `postgres_server`), a fresh PostgreSQL schema per test, a private Redis server
(`redis_server`), and the state two workers share on either (`state_spec`). Without the server binaries
(or psycopg) every test that needs them skips with the reason; CI installs them (`.ci/run`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.pg_config import PASSWORD_ENV, PgStore
from tests.fleet.postgres_server import PASSWORD, PostgresServer, why_unavailable
from tests.fleet.redis_server import redis_server  # noqa: F401 (a fixture)
from tests.fleet.session import StateSpec, state_at


def _serve() -> Iterator[PostgresServer]:
    why = why_unavailable()
    if why is not None:
        pytest.skip(why)
    server = PostgresServer.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """The server the fleet tests share (one per xdist worker)."""
    yield from _serve()


@pytest.fixture(scope="module")
def _pg_module_server() -> Iterator[PostgresServer]:
    yield from _serve()


@pytest.fixture
def pg_private_server(_pg_module_server: PostgresServer) -> PostgresServer:
    """A server no other module uses (for tests that stop and start it mid-test), shared by
    the module's tests, each on a schema of its own: it is started again before a test when
    the one before left it stopped (one server start per module, not per test)."""
    if not _pg_module_server.running():
        _pg_module_server.resume()
    return _pg_module_server


@pytest.fixture
def pg_password(monkeypatch: pytest.MonkeyPatch) -> str:
    """The server's password, in ``AGENTSCOPE_CTX_TEST_PGPASSWORD`` (the `password_env` the
    tests name) for the duration of a test."""
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    return PASSWORD


@pytest.fixture
def pg_schema() -> str:
    """A schema name of its own for each test (the tables are made on first use)."""
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def pg_store(pg_server: PostgresServer, pg_password: str, pg_schema: str) -> PgStore:
    """This test's PostgreSQL store: a schema of its own on the server, the password set."""
    return PgStore(pg_server, pg_schema, pg_password)


@pytest.fixture(params=["redis", "sqlite"])
def state_spec(request: pytest.FixtureRequest, tmp_path: Path) -> StateSpec:
    """Where two workers share a session's state: a fresh Redis database, or SQLite."""
    if request.param == "redis":
        return state_at("redis", tmp_path, request.getfixturevalue("redis_server"))
    return state_at("sql", tmp_path)
