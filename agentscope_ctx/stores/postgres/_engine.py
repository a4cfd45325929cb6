"""`PostgresEngine`: the connections of the fleet store, and how its DSN is kept secret.

A DSN names the server (``postgresql://user@host:5432/db`` or ``host=... dbname=...``); the
password comes from the environment: libpq's own ``PGPASSWORD`` (or ``~/.pgpass``), or the
variable named by `password_env`. The DSN is never shown: errors, log lines and the repr name
the store by its schema (`name`), and what libpq said of a failure is told without the
server's names (`_secrets.Secrets.describe`; docs/fleet-secrets.md).

Connections are pooled per engine (one per thread at a time, made when needed, autocommit
with explicit transactions); a connection that failed is dropped, and the next call makes a
new one (so a database that comes back is used again). The schema is made on the first
connection (`_schema.ensure`).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...core._errors import PersistenceError
from ._schema import ensure
from ._secrets import Secrets, store_name

__all__ = ["PostgresEngine"]

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_MAX_IDLE = 8
_DEADLOCK = "40P01"  # SQLSTATE deadlock_detected
_ENSURE_TRIES = 3


class PostgresEngine:
    """The database behind the three PostgreSQL seams (see the module docstring).

    Args:
        dsn: libpq connection string or URL, without the password (never shown).
        password_env: Name of an environment variable holding the password (read at each
            connection); `None`: libpq's own (``PGPASSWORD``, ``~/.pgpass``).
        schema: The PostgreSQL schema holding the tables.
        connect_timeout: Seconds a connection attempt may take.
        retry_after: Seconds after a failed connection attempt during which the engine
            fails at once without trying (0: try every time); `attempts` counts the tries.

    Raises:
        ContextUsageError-like `ValueError`: `schema` is not a plain lower-case identifier.
    """

    def __init__(
        self,
        dsn: str,
        *,
        password_env: str | None = None,
        schema: str = "agentscope_ctx",
        connect_timeout: float = 10.0,
        retry_after: float = 0.0,
    ) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"schema must be a lower-case identifier; got {schema!r}")
        self._dsn = dsn
        self.secrets = Secrets(dsn, password_env)
        self.password_env = password_env
        self.schema = schema
        self.connect_timeout = connect_timeout
        self.retry_after = retry_after
        self.attempts = 0
        self._down_until = 0.0
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._ready = False

    def __repr__(self) -> str:
        return f"PostgresEngine(schema={self.schema!r})"

    @property
    def name(self) -> str:
        """How errors, logs and the CLI name this store (never by its DSN)."""
        return store_name(self.schema)

    def scrub(self, text: str) -> str:
        """`text` with every name and password this engine knows replaced by ``***``."""
        return self.secrets.scrub(text)

    def describe(self, exc: BaseException) -> str:
        """What may be said of `exc` (`Secrets.describe`: no DSN, host, user, database or
        password)."""
        return self.secrets.describe(exc)

    def error(self, what: str, exc: BaseException) -> PersistenceError:
        """A `PersistenceError` saying `what` failed on this store, told safely (raise it
        ``from None``: the original, in libpq's words, must not be chained)."""
        return PersistenceError(f"{what} ({self.name}): {self.describe(exc)}")

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A connection of the pool (autocommit; use ``conn.transaction()``).

        Raises:
            PersistenceError: no connection could be made, or the schema not created
                (scrubbed of the password).
        """
        conn = self._take()
        try:
            yield conn
        except BaseException:
            self._drop(conn)
            raise
        else:
            self._give_back(conn)

    def close(self) -> None:
        """Close the idle connections (new ones are made when needed)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            self._drop(conn)

    # -- internals -----------------------------------------------------------------------

    def _take(self) -> Any:
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    return conn
        return self._connect()

    def _give_back(self, conn: Any) -> None:
        if conn.closed or conn.info.transaction_status != 0:  # 0: idle
            self._drop(conn)
            return
        with self._lock:
            if len(self._idle) < _MAX_IDLE:
                self._idle.append(conn)
                return
        self._drop(conn)

    @staticmethod
    def _drop(conn: Any) -> None:
        try:
            conn.close()
        except Exception:  # already broken: nothing to release
            pass

    def _connect(self) -> Any:
        try:
            import psycopg
        except ImportError as exc:
            raise PersistenceError(
                "the PostgreSQL store needs psycopg 3: pip install 'agentscope-ctx[fleet]'"
            ) from exc
        wait = self._down_until - time.monotonic()
        if wait > 0:
            raise PersistenceError(
                f"{self.name} is unreachable (the last attempt failed); "
                f"trying again in {wait:.1f} s"
            )
        extra: dict[str, Any] = {"connect_timeout": max(1, round(self.connect_timeout))}
        if self.password_env is not None:
            password = os.environ.get(self.password_env)
            if password is None:
                raise PersistenceError(
                    f"{self.name}: the password variable {self.password_env!r} is not set "
                    "in the environment"
                )
            extra["password"] = password
        self.attempts += 1
        try:
            conn = psycopg.connect(self._dsn, autocommit=True, **extra)
        except Exception as exc:
            self._down_until = time.monotonic() + self.retry_after
            raise self.error("cannot connect", exc) from None
        self._down_until = 0.0
        if not self._ready:
            for attempt in range(_ENSURE_TRIES):
                try:
                    ensure(conn, self.schema)
                    break
                except Exception as exc:
                    # Workers making a new schema at once can deadlock on its DDL: the server
                    # aborts one of them, whose next try finds the schema made (or makes it).
                    if _DEADLOCK == getattr(exc, "sqlstate", None) and attempt + 1 < _ENSURE_TRIES:
                        continue
                    self._drop(conn)
                    raise self.error("cannot create the schema", exc) from None
            self._ready = True
        return conn
