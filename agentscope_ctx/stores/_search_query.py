"""The ranked query of the local search index (`_search`): BM25 over the FTS5 chunks with
the filters, ranking only the newest `MAX_RANKED` matches unless the filters need more.

The tenant boundary (`core._tenant`) is the clause on ``:t_agent``/``:t_session``: a record of
the caller's agent key (in its session, for the ``session`` scope); memory files too for the
``agent`` scope; everything for ``shared`` (and for no tenant: the operator's view). A saved
output must also carry the tenant's tags in its file name (``tool_result/<agent tag>-<session
tag>-...``): whoever the index was told owns it (a dialog record naming the file, after a
rebuild), its name says whose it is."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from ..core._tenant import Tenant

__all__ = ["MAX_RANKED", "ranked_rows", "tenant_params"]

MAX_RANKED = 5_000
"""A query matching more chunks ranks the most recently indexed ones (ranking costs some
microseconds per match); if the filters then leave too few hits, it ranks them all."""
_QUERY = """
SELECT bm25(chunks), chunks.body, chunks.start_line, chunks.line_offset, d.path, d.kind,
    d.line, d.byte_offset, d.agent, d.role, d.tool, d.args, d.ts
FROM chunks JOIN docs AS d ON d.id = (chunks.rowid >> 24)
WHERE chunks MATCH :match AND chunks.rowid >= :low
    AND (:agent IS NULL OR d.agent IS NULL OR d.agent = :agent)
    AND (:session IS NULL OR d.session = :session)
    AND (:t_agent IS NULL
        OR (d.agent = :t_agent AND (:t_session IS NULL OR coalesce(d.session, '') = :t_session))
        OR (:t_memory AND d.kind = 'memory'))
    AND (:t_agent IS NULL OR d.kind != 'tool_result'
        OR (substr(d.path, 13, 16) = :t_atag
            AND (:t_session IS NULL OR substr(d.path, 30, 16) = :t_stag)))
    AND (:role IS NULL OR d.role = :role)
    AND (:tool IS NULL OR instr(',' || d.tool || ',', ',' || :tool || ',') > 0)
    AND (:since IS NULL OR replace(d.ts, 'T', ' ') >= :since)
    AND (:until IS NULL OR replace(d.ts, 'T', ' ') <= :until || '~')
ORDER BY bm25(chunks), d.ts DESC, chunks.rowid DESC
LIMIT :limit
"""


def ranked_rows(
    db: sqlite3.Connection, match: str, params: dict[str, object], limit: int
) -> list[tuple[object, ...]]:
    """The rows of `_QUERY` for `match`; only the `MAX_RANKED` newest matches when there are
    more (all of them if the filters leave fewer than `limit` rows)."""
    bound = db.execute(
        "SELECT rowid FROM chunks WHERE chunks MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
        (match, MAX_RANKED),
    ).fetchone()
    low = 0 if bound is None else int(bound[0]) + 1
    rows = db.execute(_QUERY, {**params, "match": match, "low": low}).fetchall()
    if low and len(rows) < limit:
        rows = db.execute(_QUERY, {**params, "match": match, "low": 0}).fetchall()
    return rows


def tenant_params(tenant: Tenant | None, storable: Callable[[str], str] = str) -> dict[str, object]:
    """The ``t_*`` parameters of `_QUERY` for `tenant` (`storable`: as the index keeps text)."""
    if tenant is None or tenant.scope == "shared":
        return {
            "t_agent": None,
            "t_session": None,
            "t_memory": False,
            "t_atag": None,
            "t_stag": None,
        }
    atag, stag = tenant.tags
    return {
        "t_agent": storable(tenant.agent),
        "t_session": storable(tenant.session) if tenant.scope == "session" else None,
        "t_memory": tenant.scope == "agent",
        "t_atag": atag,
        "t_stag": stag,
    }
