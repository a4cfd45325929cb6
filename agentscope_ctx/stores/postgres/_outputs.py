"""`PostgresOutputStore`: the output seam on PostgreSQL (tables ``outputs`` and
``output_chunks``, see `_schema`).

An output's ref is ``pg-output:{32 hex}``: any worker on the database resolves it. Its bytes
are stored in 1 MB chunks (one transaction with its row: a notice never points at a partial
output), each with the number of newlines before it, so that a ranged read fetches only the
chunks it covers (and of those only the bytes asked for: ``substring`` of uncompressed
out-of-line data), and finding where a line starts reads one chunk.

An output belongs to the agent and session that saved it (``""`` for none). The reads of a
store made for a `tenant` see only what that tenant may (`core._tenant`): another tenant's ref
reads as one that does not exist. Each query filters on the owner and runs in a transaction
bound to the tenant, which row-level security enforces as well (`_tenant`). Retention and
`stats` see every tenant's outputs when the store has no tenant.

Retention as in the local store: `used_at` is set at save and refreshed for the outputs live
contexts still point to at each cleanup; older ones are deleted (their index entries with
them, by the search index's `drop_outputs`).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ...core._errors import OffloadError, PersistenceError
from ...core._tenant import Tenant
from .._tombstones import Tombstone
from ..seams import tell_saved
from ._engine import PostgresEngine
from ._names import db_name
from ._schema import CHUNK
from ._tenant import owner_named, transaction
from ._tombstones import deleted, record_tombstones

__all__ = ["REF", "PostgresOutputStore", "output_id", "range_params", "range_sql"]

logger = logging.getLogger("agentscope_ctx")

REF = re.compile(r"pg-output:([0-9a-f]{32})")
"""The form of a ref of this store."""
_CLEANUP_EVERY_SECONDS = 3600.0


_SUBSTRING = (
    "substring(data FROM greatest(%(off)s - start, 0)::integer + 1 "
    "FOR (least(%(end)s, start + len) - greatest(%(off)s, start))::integer)"
)
"""The bytes of an output chunk between ``%(off)s`` and ``%(end)s`` (of the output)."""
_COVERS = (
    "id = %(id)s AND n BETWEEN %(first)s AND %(last)s AND start < %(end)s AND start + len > %(off)s"
)
"""The output chunks of output ``%(id)s`` holding bytes ``%(off)s`` to ``%(end)s``."""


def range_sql(schema: str) -> str:
    """The chunks' bytes of a range of one output (`range_params`), in order: only the
    chunks covering them are fetched, and of those only the bytes asked for."""
    return f"SELECT start, {_SUBSTRING} FROM {schema}.output_chunks WHERE {_COVERS} ORDER BY n"


def range_params(params: dict[str, Any]) -> dict[str, Any]:
    """`params` (``id``, ``off``, ``end``) with the chunk numbers they cover."""
    off, end = int(params["off"]), int(params["end"])
    return {**params, "first": off // CHUNK, "last": max(end - 1, 0) // CHUNK}


def output_id(ref: str) -> str | None:
    """The id in `ref`, or `None` when `ref` is not of this store's form."""
    match = REF.fullmatch(ref.strip()) if isinstance(ref, str) else None
    return match.group(1) if match else None


class PostgresOutputStore:
    """Full tool outputs in the database (see the module docstring)."""

    def __init__(
        self,
        engine: PostgresEngine,
        retention_days: float,
        *,
        agent: str | None = None,
        session: str | None = None,
        on_saved: Callable[[str], None] | None = None,
        tenant: Tenant | None = None,
    ) -> None:
        """`agent`, `session`: the owner of what it saves; `tenant`: whose outputs it reads
        (`None`: everyone's)."""
        self.engine = engine
        self.retention_seconds = retention_days * 86_400
        self.agent = agent or ""
        self.session = session or ""
        self.tenant = tenant
        self.on_saved = on_saved
        self._last_cleanup: float | None = None

    def save(self, data: str | bytes) -> str:
        """Store `data` whole (one transaction) and return its ref.

        Raises:
            OffloadError: it could not be stored (scrubbed of the password).
        """
        payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        key = uuid.uuid4().hex
        rows = []
        newlines = 0
        view = memoryview(payload)
        for n, start in enumerate(range(0, len(payload), CHUNK)):
            part = view[start : start + CHUNK]
            rows.append((key, n, start, len(part), newlines, part))
            newlines += payload.count(b"\n", start, start + CHUNK)
        lines = newlines + (1 if payload and not payload.endswith(b"\n") else 0)
        s = self.engine.schema
        owner = (db_name(self.agent), db_name(self.session))  # as stored (`_names`)
        try:
            with transaction(self.engine, Tenant(self.agent, self.session)) as conn:
                conn.execute(
                    f"INSERT INTO {s}.outputs (id, size, lines, agent, session, used_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (key, len(payload), lines, *owner, time.time()),
                )
                with conn.cursor() as cursor:  # (COPY does not work under row-level security)
                    cursor.executemany(
                        f"INSERT INTO {s}.output_chunks (id, n, start, len, newlines_before, "
                        "data) VALUES (%s, %s, %s, %s, %s, %b)",
                        rows,
                    )
        except Exception as exc:
            error = self.engine.error("cannot save a tool output", exc)
            raise OffloadError(str(error)) from None
        ref = f"pg-output:{key}"
        tell_saved(self.on_saved, ref)
        return ref

    def owns(self, ref: str) -> bool:
        """Whether `ref` has this store's form."""
        return output_id(ref) is not None

    def holds(self, ref: str, excerpt: str) -> bool:
        """Whether `ref` is a stored output beginning with `excerpt`."""
        data = excerpt.encode("utf-8")
        try:
            return self.read_range(ref, 0, len(data)) == data
        except (KeyError, PersistenceError):
            return False

    def size(self, ref: str) -> int | None:
        """Bytes of the output, `None` when there is none."""
        row = self._meta(ref)
        return None if row is None else int(row[0])

    def line_count(self, ref: str) -> int:
        """Lines of the output.

        Raises:
            KeyError: no such output.
        """
        row = self._meta(ref)
        if row is None:
            raise KeyError(ref)
        return int(row[1])

    def read_range(self, ref: str, offset: int, size: int) -> bytes:
        """Up to `size` bytes from `offset`: only the chunks covering them are fetched, and of
        those only the bytes asked for.

        Raises:
            KeyError: no such output.
            PersistenceError: the database cannot be read.
        """
        key = self._id(ref)
        offset, size = max(offset, 0), max(size, 0)
        end = offset + size
        s = self.engine.schema
        own, mine = self._own()
        rows = self._fetch(
            f"SELECT (SELECT size FROM {s}.outputs WHERE id = %(id)s AND {own}), start, "
            f"{_SUBSTRING} FROM (SELECT 1) AS one LEFT JOIN {s}.output_chunks ON {_COVERS} "
            "ORDER BY n",
            range_params({"id": key, "off": offset, "end": end, **mine}),
        )
        if not rows or rows[0][0] is None:
            raise KeyError(ref)
        return b"".join(bytes(row[2]) for row in rows if row[2] is not None)

    def line_start(self, ref: str, line: int) -> int:
        """Byte offset where `line` begins: one chunk is read (the one holding the newline
        before it).

        Raises:
            KeyError: no such output.
        """
        key = self._id(ref)
        if line <= 1:
            if self._meta(ref) is None:
                raise KeyError(ref)
            return 0
        passed = line - 1
        if self._meta(ref) is None:
            raise KeyError(ref)
        rows = self._fetch(
            f"SELECT start, newlines_before, data FROM {self.engine.schema}.output_chunks "
            "WHERE id = %s AND newlines_before < %s ORDER BY newlines_before DESC, n DESC "
            "LIMIT 1",
            (key, passed),
        )
        if not rows:
            raise KeyError(ref)
        start, before, data = int(rows[0][0]), int(rows[0][1]), bytes(rows[0][2])
        at = -1
        for _ in range(passed - before):
            at = data.find(b"\n", at + 1)
            if at < 0:
                raise KeyError(f"{ref}: line {line} is past its end")
        return start + at + 1

    def read_saved(self, ref: str, *, chunk_bytes: int = CHUNK) -> Iterator[bytes] | None:
        """All its bytes, streamed in chunks of `chunk_bytes` (one query each: a 1 GB output
        is never held); `None` when there is no such output or its size cannot be read. A
        failure while reading is raised by the iterator."""
        try:
            size = self.size(ref)
        except (KeyError, PersistenceError):
            return None
        if size is None:
            return None
        return (self.read_range(ref, at, chunk_bytes) for at in range(0, size, chunk_bytes))

    def cleanup(self, referenced: Iterable[str], *, now: float | None = None) -> list[str]:
        """Refresh the outputs still referenced (their last use becomes the real time, as the
        local store's ``utime``); delete the others unused for longer than the retention
        period, counted back from `now`. Returns the refs deleted (a failure is logged:
        nothing deleted)."""
        now = time.time() if now is None else now
        self._last_cleanup = now
        keep = sorted({key for key in map(output_id, referenced) if key})
        s = self.engine.schema
        own, mine = self._own()
        try:
            with transaction(self.engine, self.tenant) as conn:
                if keep:
                    conn.execute(
                        f"UPDATE {s}.outputs SET used_at = %(now)s WHERE id = ANY(%(keep)s) "
                        f"AND {own}",
                        {"now": time.time(), "keep": keep, **mine},
                    )
                rows = conn.execute(
                    f"DELETE FROM {s}.outputs WHERE used_at < %(before)s "
                    f"AND NOT (id = ANY(%(keep)s)) AND {own} RETURNING id, agent, session, size",
                    {"before": now - self.retention_seconds, "keep": keep, **mine},
                ).fetchall()
                stones = [(f"pg-output:{row[0]}", row[1], row[2], row[3]) for row in rows]
                record_tombstones(conn, s, stones, at=now)  # a notice to one says so
        except Exception as exc:
            logger.warning("agentscope_ctx: %s", self.engine.error("cannot clean up", exc))
            return []
        return [f"pg-output:{row[0]}" for row in rows]

    def maybe_cleanup(self, referenced: Callable[[], Iterable[str]]) -> list[str]:
        """`cleanup`, at most once an hour."""
        now = time.time()
        if self._last_cleanup is not None and now - self._last_cleanup < _CLEANUP_EVERY_SECONDS:
            return []
        return self.cleanup(referenced(), now=now)

    def deleted(self, ref: str) -> Tombstone | None:
        """The tombstone of `ref`, deleted by retention, as this store's tenant may see it."""
        return deleted(self.engine, ref, self.tenant) if output_id(ref) else None

    def stats(self) -> tuple[int, int, float | None, float | None]:
        """Outputs stored, their bytes, and the newest and oldest last use (epoch seconds;
        `None` when there is none)."""
        own, mine = self._own()
        rows = self._fetch(
            f"SELECT count(*), coalesce(sum(size), 0), max(used_at), min(used_at) "
            f"FROM {self.engine.schema}.outputs WHERE {own}",
            mine,
        )
        count, size, newest, oldest = rows[0]
        return int(count), int(size), newest, oldest

    # -- internals -------------------------------------------------------------------------

    def _id(self, ref: str) -> str:
        key = output_id(ref)
        if key is None:
            raise KeyError(ref)
        return key

    def _meta(self, ref: str) -> tuple[Any, ...] | None:
        key = output_id(ref)
        if key is None:
            return None
        own, mine = self._own()
        rows = self._fetch(
            f"SELECT size, lines FROM {self.engine.schema}.outputs WHERE id = %(id)s AND {own}",
            {"id": key, **mine},
        )
        return rows[0] if rows else None

    def _own(self) -> tuple[str, dict[str, str]]:
        """`owner_sql` of the tenant, with named parameters."""
        return owner_named(self.tenant)

    def _fetch(self, sql: str, params: object) -> list[tuple[Any, ...]]:
        try:
            with transaction(self.engine, self.tenant) as conn:
                return list(conn.execute(sql, params).fetchall())
        except PersistenceError:
            raise
        except Exception as exc:
            raise self.engine.error("cannot read a tool output", exc) from None
