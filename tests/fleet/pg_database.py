"""A database of its own on the test server (`own_database` fixture): a store there can be
closed to every connection and opened again mid-test, and its connections counted, while
the server goes on serving the other tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.fleet.postgres_server import PASSWORD, PostgresServer

__all__ = ["Database", "own_database"]


@dataclass
class Database:
    """One database on `server` (made by the `own_database` fixture)."""

    server: PostgresServer
    name: str

    @property
    def dsn(self) -> str:
        """Its DSN, without the password."""
        return self.server.dsn.replace("dbname=postgres", f"dbname={self.name}")

    def admin(self) -> Any:
        """A superuser connection to the server's ``postgres`` database (autocommit)."""
        import psycopg

        return psycopg.connect(self.server.dsn, password=PASSWORD, autocommit=True)

    def close(self) -> None:
        """Refuse every new connection, and end the open ones (waiting until they are gone):
        to its clients, the database is unreachable."""
        with self.admin() as conn:
            conn.execute(f"ALTER DATABASE {self.name} ALLOW_CONNECTIONS false")
            ended = conn.execute(
                "SELECT bool_and(pg_terminate_backend(pid, 60000)) FROM pg_stat_activity "
                "WHERE datname = %s",
                (self.name,),
            ).fetchone()
        assert ended is not None and ended[0] is not False, "a connection did not end"

    def open(self) -> None:
        """Accept connections again."""
        with self.admin() as conn:
            conn.execute(f"ALTER DATABASE {self.name} ALLOW_CONNECTIONS true")

    def connections(self) -> int:
        """The connections open to it now (`pg_stat_activity`)."""
        with self.admin() as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (self.name,)
            ).fetchone()
        return int(row[0]) if row else 0


@pytest.fixture
def own_database(pg_server: PostgresServer, pg_password: str) -> Iterator[Database]:
    """A fresh database on the test server, the password set (dropped at the end)."""
    database = Database(pg_server, f"own_{uuid.uuid4().hex[:10]}")
    with database.admin() as conn:
        conn.execute(f"CREATE DATABASE {database.name}")
    try:
        yield database
    finally:
        database.open()
        with database.admin() as conn:
            conn.execute(f"DROP DATABASE {database.name} WITH (FORCE)")
