"""What the PostgreSQL search sends and gets back (`_search`): the ``tsvector`` and
``tsquery`` literals of our own tokens (`tsvector_text`, `query_text`: letters and digits
only, quoted, so nothing a user types is query syntax), text as the database can hold it
(`db_text`), the ranked query (`ranked_sql`) and its dialog hits placed in their days
(`day_rows`)."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from ...core._tenant import Tenant
from ...core.search._search_text import _TOKEN, Query, index_text
from ._tenant import owner_sql

__all__ = [
    "CANDIDATES",
    "MAX_LEXEME",
    "block_words",
    "chunks_text",
    "day_rows",
    "db_text",
    "exact_tokens",
    "lexemes",
    "query_needles",
    "query_text",
    "ranked_rows",
    "ranked_sql",
    "tsvector_text",
    "words_text",
]

MAX_LEXEME = 256
"""Characters of a token kept (PostgreSQL takes lexemes up to 2047 bytes)."""
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


def db_text(text: str) -> str:
    """`text` as the database can hold it (no NUL, no lone surrogate)."""
    return text if text.isascii() and "\x00" not in text else _BAD_CHARS.sub("\ufffd", text)


def _quote(token: str) -> str:
    return "'" + token[:MAX_LEXEME].replace("\\", "\\\\").replace("'", "''") + "'"


def lexemes(text: str) -> list[str]:
    """`_search_text.tokens(index_text(text))`, faster on text that folding leaves alone
    (most text: the combining marks are only looked for when NFKD changed something)."""
    text = index_text(text)
    if text.isascii():
        return _TOKEN.findall(text.lower())
    folded = text.casefold()
    decomposed = unicodedata.normalize("NFKD", folded)
    if decomposed != folded:
        decomposed = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _TOKEN.findall(decomposed)


def tsvector_text(text: str) -> str:
    """The ``tsvector`` literal of `text`: each token with its positions (from 1). Tokens
    hold letters and digits only (`_search_text.tokens`), so none needs escaping; a chunk
    (at most `CHUNK_CHARS` characters) never reaches the highest position."""
    positions: dict[str, list[str]] = {}
    for number, token in enumerate(lexemes(text), start=1):
        at = positions.get(token)
        if at is None:
            positions[token] = [str(number)]
        elif len(at) < 255:
            at.append(str(number))
    return " ".join(
        f"{_quote(token) if len(token) > MAX_LEXEME else chr(39) + token + chr(39)}:{','.join(at)}"
        for token, at in positions.items()
    )


def chunks_text(where: dict[str, list[int]]) -> str:
    """The ``tsvector`` literal of an output's block (`_blocks`): each token with the chunks
    it is in as its positions."""
    return " ".join(f"{_quote(word)}:{','.join(map(str, at))}" for word, at in where.items())


def query_needles(query: Query) -> list[tuple[list[str], bool]]:
    """Each term of `query` that has tokens: its tokens as the index keeps them (cut at
    `MAX_LEXEME`), and whether its last one is a prefix."""
    return [
        ([token[:MAX_LEXEME] for token in lexemes(text)], prefix)
        for text, prefix in query.terms
        if lexemes(text)
    ]


def exact_tokens(tokens: list[str], prefix: bool) -> list[str]:
    """The tokens of a term that are whole words: all but the last of a prefix term."""
    return tokens[:-1] if prefix else tokens


def block_words(query: Query) -> list[str]:
    """The tokens of `query` whose chunks a block's row gives (`ranked_sql`): its terms'
    `exact_tokens` (a prefix is not a token)."""
    needles = query_needles(query)
    return list(
        dict.fromkeys(w for tokens, prefix in needles for w in exact_tokens(tokens, prefix))
    )


def words_text(query: Query) -> str:
    """The ``tsvector`` literal of the tokens of `query`, without positions."""
    words = dict.fromkeys(token for text, _ in query.terms for token in lexemes(text))
    return " ".join(_quote(word) for word in words)


def query_text(query: Query, *, every: bool = True, loose: bool = False) -> str:
    """The ``tsquery`` literal of `query`: each term a phrase of its tokens (`loose`: all of
    them, anywhere), all or any."""
    parts = []
    for text, prefix in query.terms:
        words = [_quote(token) for token in lexemes(text)]
        if not words:
            continue
        if prefix:
            words[-1] += ":*"
        parts.append("(" + (" & " if loose else " <-> ").join(words) + ")")
    return (" & " if every else " | ").join(parts)


CANDIDATES = 500
"""Chunks a search ranks at most: the newest that match (and pass the filters), taken from
the GIN index and the owner's index (`ranked_rows`), then ranked: a dialog chunk by
``ts_rank``, an output's block as if it held the query's words once."""

_FILTERS = {
    "agent": "(c.agent IS NULL OR c.agent = %(agent)s)",
    "session": "c.session = %(session)s",
    "t_agent": "c.agent = %(t_agent)s",
    "t_session": "c.session = %(t_session)s",
    "role": "c.role = %(role)s",
    "tool": "strpos(',' || c.tool || ',', ',' || %(tool)s || ',') > 0",
    "since": "replace(c.ts, 'T', ' ') >= %(since)s",
    "until": "replace(c.ts, 'T', ' ') <= %(until)s || '~'",
}
"""The condition of each filter, in the query only when it is given (a plan the server can
fit to it: the owner columns then lead the ``(agent, session, id)`` index)."""


def ranked_sql(schema: str, given: set[str], phrase: bool = False) -> str:
    """The ranked query: the newest `CANDIDATES` chunks that match ``%(match)s`` and the
    filters `given` (names of `_FILTERS`), the best ``%(limit)s`` of them by ``ts_rank``
    (then the newest), their text and owners read for those only (an output's block: where
    its text is, and the chunks it holds each of the query's words ``%(words)s`` in:
    `_blocks.expand`). With a `phrase`, a block (its tokens' positions are its chunks, not
    their places) matches ``%(loose)s``, the query with each phrase as all its words
    (`query_text`), and its chunks are checked for the phrase when read back.

    A block is ranked as a row holding the query's words once would be (``%(words_only)s``,
    `words_text`), without reading its tokens: they are some 45 KB a block, and reading those
    of the 500 candidates took most of a search (15-20 ms at 100k messages)."""
    match = "c.terms @@ %(match)s::tsquery"
    if phrase:  # the GIN index finds the loose matches, the phrase is checked in the row
        match = "c.terms @@ %(loose)s::tsquery AND (c.byte_start IS NOT NULL OR " + match + ")"
    where = " AND ".join([match, *(sql for k, sql in _FILTERS.items() if k in given)])
    return f"""
WITH q AS (SELECT %(match)s::tsquery AS query,
    ts_rank(%(words_only)s::tsvector, %(match)s::tsquery) AS block_rank),
cand AS MATERIALIZED (
    SELECT c.id, CASE WHEN c.byte_start IS NULL THEN c.terms END AS terms, c.ts
    FROM {schema}.chunks AS c WHERE {where}
    ORDER BY c.id DESC LIMIT {int(CANDIDATES)}),
best AS (
    SELECT cand.id, coalesce(ts_rank(cand.terms, q.query), q.block_rank) AS rank, cand.ts
    FROM cand, q
    ORDER BY rank DESC, cand.ts DESC NULLS LAST, cand.id DESC LIMIT %(limit)s)
SELECT -best.rank, c.body, c.start_line, c.line_offset, c.source, c.kind,
    1, 0, c.agent, c.role, c.tool, c.args, c.ts, c.byte_start, c.byte_end, c.byte_skip,
    c.chunk_count, CASE WHEN c.byte_start IS NOT NULL
        THEN ts_filter(setweight(c.terms, 'A', %(words)s::text[]), '{{a}}')::text END
FROM best JOIN {schema}.chunks AS c ON c.id = best.id
ORDER BY best.rank DESC, best.ts DESC NULLS LAST, best.id DESC
"""


def ranked_rows(
    conn: Any, schema: str, params: dict[str, Any], query: Query, every: bool
) -> list[Any]:
    """The rows of `ranked_sql` for `query` (every term, or any) under the filters of
    `params` (`_FILTERS`' names, `None` for none, and ``limit``).

    Planned for this search's words (not prepared), without index scans: a plan that walks
    an index newest first tests each row's tokens as it goes, and a block's are some 45 KB
    out of line, a cost the server does not count. It walked the whole store's chunks newest
    first for a word its statistics called common, testing the tokens of every tenant's
    blocks before the owner (a tenant's search at 100k messages and 1 GB: 200-300 ms). A
    bitmap plan narrows by the GIN index or the owner's index first: no other owner's tokens
    are read (unless a bitmap outgrows ``work_mem``), though a word in most rows may still
    have the owner's own rows tested (a prefix of a hundred words: 75 ms at 100k messages)."""
    phrase = query_text(query, loose=True) != query_text(query)
    sql = ranked_sql(schema, {k for k, v in params.items() if v is not None}, phrase)
    match = {
        "match": query_text(query, every=every),
        "loose": query_text(query, every=every, loose=True),
        "words": block_words(query),
        "words_only": words_text(query),
    }
    conn.execute("SET LOCAL enable_indexscan = off")  # (a failed query ends the transaction)
    rows = list(conn.execute(sql, {**params, **match}, prepare=False).fetchall())
    conn.execute("RESET enable_indexscan")
    return rows


_LINES_SQL = """
SELECT h.seq, h.day, (
    SELECT sum(CASE WHEN g.last_seq <= h.seq THEN g.lines WHEN g.first_seq > h.seq THEN 0
        ELSE (SELECT e.line FROM {s}.dialog AS e WHERE e.agent = g.agent AND e.day = g.day
              AND e.session = g.session AND e.seq <= h.seq ORDER BY e.seq DESC LIMIT 1) END)
    FROM {s}.dialog_days AS g WHERE g.day = h.day AND {own}) AS line, h.record
FROM {s}.dialog AS h WHERE h.seq = ANY(%s)
"""
"""Each hit's record and its line in its day as the tenant reads it: the sum, over the day's
owners in the tenant's scope (``dialog_days``), of their records up to the hit (each record's
line in its owner's day is stored, `_schema._LINES`): an owner's whole day when it ended
before, else the line of its last record up to the hit, one index probe. The day's rows are
never counted (a count took 9 ms for one session's 10k messages of a day; an operator's,
over every tenant's 100k, 104 ms)."""


def day_rows(
    conn: Any, schema: str, rows: list[Any], tenant: Tenant | None = None
) -> tuple[list[tuple[Any, ...]], dict[int, str]]:
    """`rows` of `ranked_sql` with each dialog hit pointing into its day
    (``pg-dialog:YYYY-MM-DD``, the record's line in it, and its seq where a day file has a
    byte offset), and the JSON line of each record by seq (where the hit's text starts in
    it is its ``line_offset``). Lines are counted in the day as `tenant` reads it."""
    seqs = sorted({int(row[4].split(":", 1)[1]) for row in rows if row[5] == "dialog"})
    if not seqs:
        return [tuple(row) for row in rows], {}
    own, params = owner_sql(tenant, "g")
    found = conn.execute(_LINES_SQL.format(s=schema, own=own), (*params, seqs)).fetchall()
    where = {
        int(seq): (f"pg-dialog:{day.isoformat()}", int(n))
        for seq, day, n, _ in found
        if n is not None
    }
    out = []
    for row in rows:
        seq = int(row[4].split(":", 1)[1]) if row[5] == "dialog" else None
        if seq is not None and seq in where:
            ref, line = where[seq]
            row = (*row[:4], ref, row[5], line, seq, *row[8:])
        out.append(tuple(row))
    return out, {int(seq): record for seq, _, _, record in found}
