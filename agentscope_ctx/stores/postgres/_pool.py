"""`ConnectionPool`: the connections of one process to one PostgreSQL database, and how they
are shared (issue 46 item 16).

Connections belong to the process, not to a manager: every engine the managers open on one
DSN with the same connection settings (`shared_pool`: the password variable, the timeouts
and `max_connections`) draws from one pool, so a process serving a thousand sessions, each
with a manager of its own (the 1.x pattern, a hand-wired 2.x service), holds what one
manager would. The pool:

- lends an idle connection, else makes one while fewer than `max_connections` are open,
  else waits for one to come back, up to `connect_timeout` (then `PersistenceError`, as for
  an unreachable database: the callers degrade, the budget holds);
- keeps the connections given back idle (all of them, up to the cap) while an engine uses
  it, drops one that broke or was left in a transaction, and closes them when no engine uses
  it any more (`leave`, or the engines gone);
- makes the connections (autocommit, the password read from the environment at each one)
  and fails at once, without trying, for `retry_after` seconds after a failed attempt
  (`attempts` counts the tries): an unreachable database costs one attempt per period for
  the whole process, not one per manager.

A pool is used from many threads (the seams' blocking calls run in worker threads, some on
the event loop's thread); one lock guards its state, and no connection is made under it.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from ...core._errors import PersistenceError
from ._secrets import Secrets

__all__ = ["ConnectionPool", "shared_pool"]


class ConnectionPool:
    """The connections of one process to one database (see the module docstring).

    Args:
        dsn: libpq connection string or URL, without the password.
        password_env: Name of the environment variable holding the password (`None`:
            libpq's own).
        connect_timeout: Seconds a connection attempt may take, and the longest wait for a
            connection when all are in use.
        retry_after: Seconds after a failed attempt during which `take` fails at once.
        max_connections: Most connections open at once (idle and lent).
    """

    def __init__(
        self,
        dsn: str,
        *,
        password_env: str | None = None,
        connect_timeout: float = 10.0,
        retry_after: float = 0.0,
        max_connections: int = 8,
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1; got {max_connections!r}")
        self._dsn = dsn
        self.secrets = Secrets(dsn, password_env)
        self.password_env = password_env
        self.connect_timeout = connect_timeout
        self.retry_after = retry_after
        self.max_connections = max_connections
        self.attempts = 0
        """Connection attempts made so far."""
        self.down_until = 0.0
        """Until when (`time.monotonic`) `take` fails at once, after a failed attempt."""
        self.peak = 0
        """The most connections open at once so far."""
        self._idle: list[Any] = []
        self._open = 0
        self._waiting = 0
        self._users: weakref.WeakSet[object] = weakref.WeakSet()
        self._changed = threading.Condition(threading.Lock())

    def __repr__(self) -> str:
        return f"ConnectionPool(open={self._open}, max_connections={self.max_connections})"

    @property
    def open(self) -> int:
        """Connections open now (idle and lent)."""
        return self._open

    @property
    def waiting(self) -> int:
        """Callers waiting for a connection now."""
        return self._waiting

    def join(self, user: object) -> None:
        """`user` (an engine) draws from this pool: connections given back are kept idle
        while one does."""
        with self._changed:
            self._users.add(user)

    def leave(self, user: object) -> None:
        """`user` is done: when no one else uses the pool, its idle connections are closed,
        and so is each one given back later (a call made after that, by a closed engine or
        its background work, connects for itself)."""
        with self._changed:
            self._users.discard(user)
            if len(self._users):
                return
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._changed.notify_all()
        for conn in idle:
            _close(conn)

    def take(self, name: str) -> Any:
        """A connection (autocommit) for one call: idle, new, or the first given back.

        Args:
            name: How errors name the store (never by its DSN).

        Raises:
            PersistenceError: no connection could be made, or none came back within
                `connect_timeout` while all were in use.
        """
        with self._changed:
            deadline: float | None = None
            while True:
                while self._idle:
                    conn = self._idle.pop()
                    if not conn.closed:
                        return conn
                    self._open -= 1
                if self._open < self.max_connections:
                    self._open += 1
                    self.peak = max(self.peak, self._open)
                    break
                now = time.monotonic()
                deadline = now + self.connect_timeout if deadline is None else deadline
                if now >= deadline:
                    raise PersistenceError(
                        f"{name}: all {self.max_connections} connections of this process are "
                        f"in use (store.max_connections), none came back within "
                        f"{self.connect_timeout:g} s"
                    )
                self._waiting += 1
                self._changed.notify_all()
                try:
                    self._changed.wait(deadline - now)
                finally:
                    self._waiting -= 1
        try:
            return self._connect(name)
        except BaseException:
            self._release()
            raise

    def give_back(self, conn: Any) -> None:
        """Return a lent connection: kept idle; dropped when it broke or was left in a
        transaction, or when no engine uses the pool any more (with the idle ones)."""
        if conn.closed or conn.info.transaction_status != 0:  # 0: idle
            self.drop(conn)
            return
        with self._changed:
            self._idle.append(conn)
            closing = [] if len(self._users) else self._idle
            if closing:
                self._idle = []
                self._open -= len(closing)
            self._changed.notify_all()
        for idle in closing:
            _close(idle)

    def drop(self, conn: Any) -> None:
        """Close a lent connection (it failed): its place is free for a new one."""
        _close(conn)
        self._release()

    def wait_for(self, predicate: Callable[[ConnectionPool], bool], timeout: float) -> bool:
        """Wait until `predicate(self)` holds (checked at each change of the pool's state);
        whether it did within `timeout` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout)

    # -- internals -----------------------------------------------------------------------

    def _release(self) -> None:
        with self._changed:
            self._open -= 1
            self._changed.notify_all()

    def _connect(self, name: str) -> Any:
        try:
            import psycopg
        except ImportError as exc:
            raise PersistenceError(
                "the PostgreSQL store needs psycopg 3: pip install 'agentscope-ctx[fleet]'"
            ) from exc
        wait = self.down_until - time.monotonic()
        if wait > 0:
            raise PersistenceError(
                f"{name} is unreachable (the last attempt failed); trying again in {wait:.1f} s"
            )
        extra: dict[str, Any] = {"connect_timeout": max(1, round(self.connect_timeout))}
        if self.password_env is not None:
            password = os.environ.get(self.password_env)
            if password is None:
                raise PersistenceError(
                    f"{name}: the password variable {self.password_env!r} is not set in the "
                    "environment"
                )
            extra["password"] = password
        self.attempts += 1
        try:
            conn = psycopg.connect(self._dsn, autocommit=True, **extra)
        except Exception as exc:
            self.down_until = time.monotonic() + self.retry_after
            raise PersistenceError(
                f"cannot connect ({name}): {self.secrets.describe(exc)}"
            ) from None
        self.down_until = 0.0
        return conn


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # already broken: nothing to release
        pass


_POOLS: dict[tuple[str, str | None, float, float, int], ConnectionPool] = {}
_POOLS_PID = os.getpid()
"""The process `_POOLS` belongs to."""
_POOLS_LOCK = threading.Lock()


def shared_pool(
    dsn: str,
    *,
    password_env: str | None,
    connect_timeout: float,
    retry_after: float,
    max_connections: int,
) -> ConnectionPool:
    """The process's pool for these settings, made at the first call (see the module
    docstring). A forked child makes its own: a connection is not shared across processes."""
    global _POOLS_PID
    key = (dsn, password_env, connect_timeout, retry_after, max_connections)
    with _POOLS_LOCK:
        if _POOLS_PID != os.getpid():
            _POOLS.clear()
            _POOLS_PID = os.getpid()
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = ConnectionPool(
                dsn,
                password_env=password_env,
                connect_timeout=connect_timeout,
                retry_after=retry_after,
                max_connections=max_connections,
            )
        return pool
