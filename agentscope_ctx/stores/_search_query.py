"""The ranked query of the local search index (`_search`): BM25 over the FTS5 chunks with
the filters, ranking only the newest `MAX_RANKED` matches unless the filters need more."""

from __future__ import annotations

import sqlite3

__all__ = ["MAX_RANKED", "ranked_rows"]

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
