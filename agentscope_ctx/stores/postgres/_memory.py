"""`PostgresMemoryDocs`: the memory seam on PostgreSQL (table ``memory_docs``, see `_schema`).

One long-term memory per agent, the same on every worker: MEMORY.md, the daily notes and the
consolidation's record are rows keyed by (``agent``, ``name``), where ``agent`` is the agent's
name as the dialog and output tables record it (the tenant boundary's row-level security keys
on that column). A document is its whole text (``body``) with a ``version`` counted up at each
write (0: a placeholder row, the document does not exist yet).

- `update` and `append` are one transaction each: the row is taken ``FOR UPDATE`` (a
  placeholder row is inserted first when the document is new, so that there is a row to
  lock), the change is computed, the row written. Concurrent writers of one document, in any
  worker, wait for each other: no `remember` is lost, no note line duplicated, and
  consolidation's compare-and-swap reads and writes MEMORY.md with nothing in between.
- `consolidation_lock` is a session-level advisory lock on one pooled connection, held for
  the run (a model call may be inside it; no transaction is held open): a second
  consolidation of the same agent, on any worker, is skipped at once. A worker that dies
  releases it with its connection.

Names are flat (``MEMORY.md``, ``YYYY-MM-DD.md``): `name_of` takes ``name``,
``memory/name`` or the ref ``pg-memory:name`` and refuses paths, ``..`` and hidden names.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ...core._errors import PersistenceError
from ...core._tenant import Tenant
from ._engine import PostgresEngine
from ._memory_index import MEMORY_REF, index_memory
from ._names import db_name, name_from_db
from ._tenant import transaction

__all__ = ["MEMORY_REF", "PostgresMemoryDocs", "memory_agents"]

logger = logging.getLogger("agentscope_ctx")

_NAME = re.compile(r"[^./\\\x00][^/\\\x00]{0,254}")
_LOCK_KEY = "agentscope_ctx.consolidate:{schema}:{agent}"
_RETRIED = frozenset({"40P01", "40001"})
"""SQLSTATEs of a transaction the server aborted for the others' sake (deadlock_detected,
serialization_failure): run again, it succeeds."""
_WRITE_TRIES = 5


class _Aborted(Exception):
    """A memory write's transaction aborted by the server (`_RETRIED`); `error`: the
    scrubbed error to raise if no try succeeds."""

    def __init__(self, error: PersistenceError) -> None:
        super().__init__(str(error))
        self.error = error


class PostgresMemoryDocs:
    """The long-term memory of one agent in the fleet store (see the module docstring).

    Every method does blocking I/O (call it from a thread inside an event loop).

    Args:
        engine: The fleet store's engine.
        agent: The agent's name (the key of its memory; every worker uses the same).
    """

    def __init__(self, engine: PostgresEngine, agent: str) -> None:
        self.engine = engine
        self.agent = agent
        self._owner = Tenant(agent, "", "agent")  # its row-level security scope (`_tenant`)
        self._stored = db_name(agent) or ""  # the agent column (`_names`)

    def ref(self, name: str) -> str:
        return f"{MEMORY_REF}{name}"

    def name_of(self, file_path: str) -> str:
        name = file_path.strip()
        for prefix in (MEMORY_REF, "memory/"):
            name = name.removeprefix(prefix)
        if not _NAME.fullmatch(name) or name == "..":
            raise ValueError(
                f"file_path {file_path!r} is not a memory file: give a name such as "
                "'MEMORY.md' or '2025-01-31.md'"
            )
        return name

    def read(self, name: str) -> str:
        row = self._query(
            "read the memory",
            "SELECT body FROM {s}.memory_docs WHERE agent = %s AND name = %s AND version > 0",
            (self._stored, name),
        )
        return "" if row is None else str(row[0])

    def exists(self, name: str) -> bool:
        row = self._query(
            "read the memory",
            "SELECT 1 FROM {s}.memory_docs WHERE agent = %s AND name = %s AND version > 0",
            (self._stored, name),
        )
        return row is not None

    def names(self) -> list[str]:
        s = self.engine.schema
        try:
            with transaction(self.engine, self._owner) as conn:
                rows = conn.execute(
                    f"SELECT name FROM {s}.memory_docs WHERE agent = %s AND version > 0 "
                    "AND name NOT LIKE '.%%' ORDER BY name COLLATE \"C\"",
                    (self._stored,),
                ).fetchall()
        except PersistenceError:
            raise
        except Exception as exc:
            raise self.engine.error("cannot list the memory", exc) from None
        return [str(row[0]) for row in rows]

    def update(self, name: str, change: Callable[[str], str | None]) -> bool:
        return self._write(name, change, append=False)

    def append(self, name: str, change: Callable[[str], str]) -> None:
        self._write(name, change, append=True)

    @contextmanager
    def consolidation_lock(self) -> Iterator[bool]:
        key = _LOCK_KEY.format(schema=self.engine.schema, agent=self._stored)
        with self.engine.connection() as conn:
            try:
                row = conn.execute(
                    "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)
                ).fetchone()
            except Exception as exc:
                raise self.engine.error("cannot lock the memory's consolidation", exc) from None
            held = bool(row and row[0])
            try:
                yield held
            finally:
                if held:
                    try:
                        conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))
                    except Exception:  # the lock goes with the session: close it
                        conn.close()

    # -- internals -----------------------------------------------------------------------

    def _query(self, what: str, sql: str, params: tuple[Any, ...]) -> Any:
        try:
            with transaction(self.engine, self._owner) as conn:
                return conn.execute(sql.format(s=self.engine.schema), params).fetchone()
        except PersistenceError:
            raise
        except Exception as exc:
            raise self.engine.error(f"cannot {what}", exc) from None

    def _write(self, name: str, change: Callable[[str], str | None], *, append: bool) -> bool:
        """One transaction: lock the document's row (made first when missing), change it.
        A transaction the server aborted to break a deadlock, or as a serialization failure
        (other workers writing and indexing memory at once), is run again, `change` on the
        document as it is then: PostgreSQL's rule for both errors (before, the `remember`
        of one of two workers answered "cannot save", the fact lost)."""
        for attempt in range(_WRITE_TRIES):
            try:
                return self._write_once(name, change, append=append)
            except _Aborted as aborted:
                if attempt + 1 == _WRITE_TRIES:
                    raise aborted.error from None
                logger.info("agentscope_ctx: %s; run again", aborted.error)
        raise AssertionError("unreachable")

    def _write_once(self, name: str, change: Callable[[str], str | None], *, append: bool) -> bool:
        s = self.engine.schema
        lock = (
            f"SELECT body, version FROM {s}.memory_docs WHERE agent = %s AND name = %s FOR UPDATE"
        )
        key = (self._stored, name)
        try:
            with transaction(self.engine, self._owner) as conn:
                row = conn.execute(lock, key).fetchone()
                if row is None:
                    conn.execute(
                        f"INSERT INTO {s}.memory_docs (agent, name, body, version) "
                        "VALUES (%s, %s, '', 0) ON CONFLICT DO NOTHING",
                        key,
                    )
                    row = conn.execute(lock, key).fetchone()
                current = str(row[0]) if row[1] > 0 else ""
                new = change(current)
                if new is None or (append and not new):
                    return False
                body = current + new if append else new
                conn.execute(
                    f"UPDATE {s}.memory_docs SET body = %s, version = version + 1, "
                    "updated_at = now(), indexed = false WHERE agent = %s AND name = %s",
                    (_clean(body), *key),
                )
        except PersistenceError:
            raise
        except Exception as exc:
            error = self.engine.error(f"cannot write {name!r} of the memory", exc)
            if getattr(exc, "sqlstate", None) in _RETRIED:
                raise _Aborted(error) from None
            raise error from None
        try:  # a cache: the search index's catch-up repairs what fails here
            with self.engine.connection() as conn:
                index_memory(conn, s, self._stored, name)
        except Exception as exc:
            logger.warning("agentscope_ctx: %s", self.engine.scrub(f"memory not indexed: {exc}"))
        return True


def memory_agents(engine: PostgresEngine) -> list[str]:
    """The agents that have a long-term memory in the store, sorted.

    Raises:
        PersistenceError: the database cannot be read (scrubbed of the password).
    """
    try:
        with transaction(engine, None) as conn:
            rows = conn.execute(
                f"SELECT DISTINCT agent FROM {engine.schema}.memory_docs WHERE version > 0 "
                "ORDER BY agent"
            ).fetchall()
    except PersistenceError:
        raise
    except Exception as exc:
        raise engine.error("cannot list the memories", exc) from None
    return [str(name_from_db(row[0])) for row in rows]


def _clean(text: str) -> str:
    """`text` as PostgreSQL stores it: NUL and lone surrogates become U+FFFD."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
