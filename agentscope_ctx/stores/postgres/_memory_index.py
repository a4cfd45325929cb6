"""The long-term memory in the fleet store's search index: `search_history` finds what an
agent's MEMORY.md and daily notes say, on every worker (table ``chunks``, see `_schema`).

A memory document's chunks are rows of kind ``memory`` and role ``memory``, its ref
(``pg-memory:NAME``) as their source and its agent as their ``agent``: a search scoped to an
agent finds that agent's memory only. A write marks its document not indexed (``indexed``
false, in the write's transaction) and indexes it right after, in a transaction of its own
(a failure there never fails the write); the search index's catch-up indexes what is left (a
write whose indexing failed, everything after a rebuild). Hidden documents (the
consolidation's record) are not indexed.
"""

from __future__ import annotations

import time
from typing import Any

from ...core.search._search_text import chunk_lines
from ._rows import chunk_row, insert_chunks
from ._tenant import Owner, maintenance

__all__ = ["MEMORY_REF", "catch_up_memory", "index_memory"]

MEMORY_REF = "pg-memory:"
"""How a memory document of the fleet store is named to an agent (``pg-memory:MEMORY.md``)."""


def index_memory(conn: Any, schema: str, agent: str, name: str) -> None:
    """Index the document as it is now (one transaction, as `agent`'s: any role may; waits
    for a writer of it)."""
    with maintenance(conn, (agent, None)):
        row = conn.execute(
            f"SELECT body, updated_at FROM {schema}.memory_docs "
            "WHERE agent = %s AND name = %s AND NOT indexed FOR UPDATE",
            (agent, name),
        ).fetchone()
        if row is not None:
            _index(conn, schema, agent, name, str(row[0]), row[1])


def catch_up_memory(
    conn: Any, schema: str, deadline: float | None, owner: Owner | None = None
) -> int:
    """Index the memory documents not indexed yet (`owner`'s agent's; `None`: every agent's),
    until `deadline`; the number left."""
    while deadline is None or time.monotonic() <= deadline:
        with maintenance(conn, owner):
            row = conn.execute(
                f"SELECT agent, name, body, updated_at FROM {schema}.memory_docs "
                "WHERE NOT indexed LIMIT 1 FOR UPDATE SKIP LOCKED"
            ).fetchone()
            if row is None:
                break
            _index(conn, schema, str(row[0]), str(row[1]), str(row[2]), row[3])
    with maintenance(conn, owner):
        left = conn.execute(
            f"SELECT count(*) FROM {schema}.memory_docs WHERE NOT indexed"
        ).fetchone()
    return int(left[0])


def _index(conn: Any, schema: str, agent: str, name: str, body: str, at: Any) -> None:
    source = f"{MEMORY_REF}{name}"
    conn.execute(
        f"DELETE FROM {schema}.chunks WHERE kind = 'memory' AND agent = %s AND source = %s",
        (agent, source),
    )
    if not name.startswith("."):
        stamp = at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        meta = (agent, None, "memory", None, None, stamp)
        rows = [chunk_row("memory", source, chunk, meta) for chunk in chunk_lines(body.split("\n"))]
        insert_chunks(conn, schema, rows)
    conn.execute(
        f"UPDATE {schema}.memory_docs SET indexed = true WHERE agent = %s AND name = %s",
        (agent, name),
    )
