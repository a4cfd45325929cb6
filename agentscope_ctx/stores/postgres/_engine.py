"""`PostgresEngine`: the connections of the fleet store, and how its DSN is kept secret.

A DSN names the server (``postgresql://user@host:5432/db`` or ``host=... dbname=...``); the
password comes from the environment: libpq's own ``PGPASSWORD`` (or ``~/.pgpass``), or the
variable named by `password_env`. The DSN is never shown: errors, log lines and the repr name
the store by its schema (`name`), and what libpq said of a failure is told without the
server's names (`_secrets.Secrets.describe`; docs/fleet-secrets.md).

Connections come from a `ConnectionPool` (`_pool`: made when needed, autocommit with explicit
transactions, at most `max_connections` open, a caller waiting for one when all are in use):
the engine's own, or with ``shared=True`` (what the managers open) the process's pool for the
DSN and connection settings, which every such engine shares (issue 46 item 16). A connection
that failed is dropped, and the next call makes a new one (so a database that comes back is
used again). The schema is made (or found made) on the engine's first connection
(`_schema.ensure`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ...core._errors import PersistenceError
from ._pool import ConnectionPool, shared_pool
from ._schema import ensure
from ._secrets import Secrets, store_name

__all__ = ["PostgresEngine", "engine_of"]

if TYPE_CHECKING:
    from ...core.config._config import ContextConfig

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_DEADLOCK = "40P01"  # SQLSTATE deadlock_detected
_ENSURE_TRIES = 3


class PostgresEngine:
    """The database behind the three PostgreSQL seams (see the module docstring).

    Args:
        dsn: libpq connection string or URL, without the password (never shown).
        password_env: Name of an environment variable holding the password (read at each
            connection); `None`: libpq's own (``PGPASSWORD``, ``~/.pgpass``).
        schema: The PostgreSQL schema holding the tables.
        connect_timeout: Seconds a connection attempt may take, and the longest wait for a
            connection when `max_connections` are in use.
        retry_after: Seconds after a failed connection attempt during which the engine
            fails at once without trying (0: try every time); `attempts` counts the tries.
        max_connections: Most connections open at once in the engine's pool.
        shared: Draw from the process's pool for these settings (`_pool.shared_pool`),
            shared with every engine opened so, rather than from a pool of its own.

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
        max_connections: int = 8,
        shared: bool = False,
    ) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"schema must be a lower-case identifier; got {schema!r}")
        self.secrets = Secrets(dsn, password_env)
        self.schema = schema
        settings: dict[str, Any] = {
            "password_env": password_env,
            "connect_timeout": connect_timeout,
            "retry_after": retry_after,
            "max_connections": max_connections,
        }
        self.pool = shared_pool(dsn, **settings) if shared else ConnectionPool(dsn, **settings)
        self.pool.join(self)
        self._ready = False

    def __repr__(self) -> str:
        return f"PostgresEngine(schema={self.schema!r})"

    @property
    def name(self) -> str:
        """How errors, logs and the CLI name this store (never by its DSN)."""
        return store_name(self.schema)

    @property
    def attempts(self) -> int:
        """Connection attempts made so far by the engine's pool."""
        return self.pool.attempts

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
            PersistenceError: no connection could be made (or none came back in time while
                all were in use), or the schema not created (scrubbed of the password).
        """
        conn = self._take()
        try:
            yield conn
        except BaseException:
            self.pool.drop(conn)
            raise
        else:
            self.pool.give_back(conn)

    def close(self) -> None:
        """Done with the pool: its connections are closed as they go idle once no other
        engine uses it (a call made after this connects for itself)."""
        self.pool.leave(self)

    # -- internals -----------------------------------------------------------------------

    def _take(self) -> Any:
        pool = self.pool
        conn = pool.take(self.name)
        if self._ready:
            return conn
        for attempt in range(_ENSURE_TRIES):
            try:
                ensure(conn, self.schema)
                break
            except Exception as exc:
                # Workers making a new schema at once can deadlock on its DDL: the server
                # aborts one of them, whose next try finds the schema made (or makes it).
                if _DEADLOCK == getattr(exc, "sqlstate", None) and attempt + 1 < _ENSURE_TRIES:
                    continue
                pool.drop(conn)
                raise self.error("cannot create the schema", exc) from None
        self._ready = True
        return conn


def engine_of(config: ContextConfig) -> PostgresEngine:
    """The engine on the PostgreSQL store `config` names, drawing on the process's shared pool
    (`shared_pool`): what the stores, forget, export and the audit trail open."""
    store = config.store
    assert store.dsn is not None  # the config refuses postgres without one
    return PostgresEngine(
        store.dsn,
        password_env=store.password_env,
        schema=store.schema_name,
        connect_timeout=store.connect_timeout_seconds,
        retry_after=store.retry_seconds,
        max_connections=store.max_connections,
        shared=True,
    )
