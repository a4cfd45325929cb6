"""The ranked query of the local search index (`_search`): BM25 top-k over the Tantivy chunks
(`_search_tantivy`), with every filter inside the query, so that the top k are cut from what
the caller may see, then joined to their ``docs`` rows.

The query is built from our tokens with Tantivy's query objects (never its query parser): a
word is a term, a quoted phrase a phrase of its tokens, ``word*`` a prefix: one term of the
``prefixes`` field (`PREFIX_CHARS` characters at most), and for a longer one that term and
Tantivy's regex over the words (few start with it), every match scored alike, as the regex
scores them; a phrase of CJK characters also asks for their pairs (`cjk_pairs`).

The tenant boundary (`core._tenant`): a record of the caller's agent key (in its session, for
the ``session`` scope); memory files too for the ``agent`` scope; everything for ``shared``
(and for no tenant: the operator's view). A saved output must also carry the tenant's tags in
its file name (``tool_result/<agent tag>-<session tag>-...``, the ``tags`` field): whoever
the index was told owns it (a dialog record naming the file, after a rebuild), its name says
whose it is. For the ``session`` scope the boundary is the tenant's era keys (`_keys`, which
also rank its newest matches first: `_newest`); for the others, clauses on the owner fields
and tags (`_filters`). Each hit is checked again on its ``docs`` row (`sees`)."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterator
from functools import partial
from itertools import groupby
from typing import Any

import tantivy

from ..core._tenant import Tenant
from ..core.search._search_text import Query
from ._search_db import IndexConnection
from ._search_guard import tantivy_errors
from ._search_tantivy import (
    DOC_SHIFT,
    ERA_CHUNKS,
    NONE,
    PREFIX_CHARS,
    advise_maps,
    cjk_pairs,
    era_key,
    era_term,
    newest_era,
    output_tags,
    own_tags,
    owner_value,
    query_tokens,
    ts_digits,
)
from ._search_text_batch import chunk_text

__all__ = ["CANDIDATES", "newest_first", "ranked_rows", "sees", "tenant_params"]

ADVISE_BYTES = 8 << 20
"""New segment files a reload maps past which their maps are advised (`_reload`): a smaller
file costs at most its size read ahead on a cold page."""
CANDIDATES = 500
"""Matches a tenant's search (``session`` scope) ranks at least, when it has more: those in
the newest eras of its own chunks (`ERA_CHUNKS` each) that hold so many, as PostgreSQL ranks
the newest 500 (`_search_sql`). Such a search costs what those eras hold, not all of its
history: see `_newest`."""

_MUST, _SHOULD = tantivy.Occur.Must, tantivy.Occur.Should


def _term(schema: tantivy.Schema, name: str, value: str, scored: bool = False) -> tantivy.Query:
    """The chunks holding the term `value` of the field `name`; read for its BM25 score when
    `scored` (its frequencies), else only which chunks (the bindings' default reads its
    positions too: a page of them per segment, from the disk when cold)."""
    return tantivy.Query.term_query(schema, name, value, "freq" if scored else "basic")


def _any(queries: list[tantivy.Query]) -> tantivy.Query:
    return (
        queries[0]
        if len(queries) == 1
        else tantivy.Query.boolean_query([(_SHOULD, q) for q in queries])
    )


def _all(queries: list[tantivy.Query]) -> tantivy.Query:
    return (
        queries[0]
        if len(queries) == 1
        else tantivy.Query.boolean_query([(_MUST, q) for q in queries])
    )


def _text_query(schema: tantivy.Schema, query: Query, every: bool) -> tantivy.Query | None:
    parts: list[tantivy.Query] = []
    for text, prefix in query.terms:
        words: list[str | tuple[int, str]] = list(query_tokens(text))
        if not words:
            continue
        if prefix and len(words) == 1:
            parts.append(_prefix(schema, str(words[0])))
        elif prefix:
            parts.append(tantivy.Query.phrase_prefix_query(schema, "terms", words))
        elif len(words) == 1:
            parts.append(_term(schema, "terms", str(words[0]), scored=True))
        else:
            phrase = tantivy.Query.phrase_query(schema, "terms", words)
            pairs = [_term(schema, "pairs", pair) for pair in cjk_pairs(list(map(str, words)))]
            unscored = [tantivy.Query.const_score_query(pair, 0.0) for pair in pairs]
            parts.append(_all([phrase, *unscored]))  # the pairs lead (`cjk_pairs`)
    if not parts:
        return None
    return _all(parts) if every else _any(parts)


def _prefix(schema: tantivy.Schema, word: str) -> tantivy.Query:
    """The chunks holding a word that starts with `word`, scored alike (1.0)."""
    short = _term(schema, "prefixes", word[:PREFIX_CHARS])
    if len(word) <= PREFIX_CHARS:
        return tantivy.Query.const_score_query(short, 1.0)
    # our tokens are letters and digits: no regex syntax
    regex = tantivy.Query.regex_query(schema, "terms", f"{word}.*")
    return tantivy.Query.const_score_query(_all([short, regex]), 1.0)


def _filters(
    db: sqlite3.Connection, schema: tantivy.Schema, p: dict[str, Any], keyed: bool
) -> list[tantivy.Query] | None:
    """The filter clauses of `p` (`None`: nothing can match); none of the tenant's when it
    is `keyed` (``session`` scope: its eras' keys are its boundary, `_keys`)."""
    out: list[tantivy.Query] = []
    if p.get("agent"):
        out.append(_any([_term(schema, "agent", "=" + p["agent"]), _term(schema, "agent", NONE)]))
    if p.get("session") is not None:
        out.append(_term(schema, "session", owner_value(p["session"])))
    if p.get("t_agent") is not None and not keyed:
        owned = [_term(schema, "agent", "=" + p["t_agent"])]
        if p["t_session"] is not None:
            sessions = [_term(schema, "session", "=" + p["t_session"])]
            if not p["t_session"]:
                sessions.append(_term(schema, "session", NONE))
            owned.append(_any(sessions))
        seen = [_all(owned)]
        if p["t_memory"]:
            seen.append(_term(schema, "kind", "memory"))
        tags = [_term(schema, "kind", "tool_result"), _term(schema, "tags", "a:" + p["t_atag"])]
        if p["t_session"] is not None:
            tags.append(_term(schema, "tags", "s:" + p["t_stag"]))
        kinds = [_term(schema, "kind", "dialog"), _term(schema, "kind", "memory"), _all(tags)]
        out += [_any(seen), _any(kinds)]
    if p.get("role"):
        out.append(_term(schema, "role", "=" + p["role"]))
    if p.get("tool"):
        ids = [
            row[0]
            for row in db.execute(
                "SELECT id FROM docs WHERE instr(',' || tool || ',', ',' || ? || ',') > 0",
                (p["tool"],),
            )
        ]
        if not ids:
            return None
        out.append(tantivy.Query.term_set_query(schema, "doc", ids))
    low, high = ts_digits(p.get("since")), ts_digits(p.get("until"), "9")
    if p.get("since") or p.get("until"):
        if (p.get("since") and low is None) or (p.get("until") and high is None):
            return None
        out.append(tantivy.Query.range_query(schema, "ts", tantivy.FieldType.Unsigned, low, high))
    return out


def _rarest(searcher: tantivy.Searcher, query: Query, every: bool) -> int:
    """At most how many chunks match `query`: its rarest term's (summed over its terms,
    unless `every`), by the chunks each term of the index is in."""
    counts = []
    for text, prefix in query.terms:
        words = query_tokens(text)
        if not words:
            continue
        found = [searcher.doc_freq("terms", w) for w in (words[:-1] if prefix else words)]
        found += [searcher.doc_freq("pairs", pair) for pair in cjk_pairs(words)]
        if prefix:
            found.append(searcher.doc_freq("prefixes", words[-1][:PREFIX_CHARS]))
        counts.append(min(found))
    return (min(counts) if every else sum(counts)) if counts else 0


def _keys(p: dict[str, Any]) -> list[str]:
    """The era keys (`era_key`) of every chunk the tenant of `p` may see when its scope is
    ``session``: those of its owners (itself; also no session when its session is empty:
    their records and the outputs named by their own tags, `chunk_era_key`). None for the
    other scopes, for no tenant, and for a tenant whose tags are not its owners' own (an
    owner whose stored text differs from the tenant's: a lone surrogate), whose boundary is
    then put to the index by its clauses (`_filters`)."""
    agent, session = p.get("t_agent"), p.get("t_session")
    if agent is None or session is None:
        return []
    owners = [(agent, session), *([(agent, None)] if not session else [])]
    if any(own_tags(a, s) != (p["t_atag"], p["t_stag"]) for a, s in owners):
        return []
    return [era_key(a, s) for a, s in owners]


def _eras(schema: tantivy.Schema, eras: list[tuple[str, int]], span: int) -> tantivy.Query:
    """The chunks of the newest `span` eras of each key of `eras` (key, its newest era); of a
    key whose eras are all in the span, by its ``key`` term: one posting list, not one per
    era (a union of them costs more the more eras its key has)."""
    terms: list[tantivy.Query] = []
    for key, newest in eras:
        if span > newest:
            terms.append(_term(schema, "key", key))
        else:
            terms += [
                _term(schema, "era", era_term(key, k)) for k in range(newest - span + 1, newest + 1)
            ]
    return _any(terms)


def _newest(
    searcher: tantivy.Searcher,
    schema: tantivy.Schema,
    query: tantivy.Query,
    fetch: int,
    rarest: Callable[[], int],
    keys: list[str],
) -> list[tuple[float, Any]]:
    """The best `fetch` hits of `query`; with era `keys` (a tenant's: `_keys`), only among
    its chunks, and among the matches in the newest eras of those holding `CANDIDATES` of
    them (all of them, when fewer match).

    Tantivy intersects a query's clauses led by the one with the fewest postings and scores
    each chunk it lands on; it skips postings by their best scores (block-max WAND) only in
    a disjunction. So a word in most chunks, a prefix or a phrase of common characters cost a
    tenant every chunk of its own, all its history, and more with its boundary as clauses
    (owner, kind, the tags of an output) tested at each. Its newest eras (a few ``era``
    terms) lead the intersection instead: sized from the query's `rarest` term to hold some
    `CANDIDATES` matches, then widened from what they held, until they hold that many or
    are all its eras. When fewer than twice `CANDIDATES` matches are expected, all its eras
    are searched at once."""
    if not keys:
        return searcher.search(query, fetch, count=False).hits
    eras = [(key, era) for key in keys if (era := newest_era(searcher, key)) >= 0]
    newest = max((era for _, era in eras), default=-1)
    if newest < 0:
        return []
    total = max(searcher.num_docs, 1)
    matches = rarest() if newest else 0
    own = sum(era + 1 for _, era in eras) * ERA_CHUNKS
    if matches * own < 2 * CANDIDATES * total:  # few expected: all of its eras at once
        span = newest + 1
    else:
        span = math.ceil(1.25 * CANDIDATES * total / max(matches * ERA_CHUNKS, 1))
    while True:
        window = tantivy.Query.const_score_query(_eras(schema, eras, span), 0.0)
        windowed = tantivy.Query.boolean_query([(_MUST, query), (_MUST, window)])
        if span > newest:
            return searcher.search(windowed, fetch, count=False).hits
        result = searcher.search(windowed, fetch, count=True)
        held = int(getattr(result, "count", 0) or 0)  # not in the bindings' stub
        if held >= CANDIDATES:
            return result.hits
        grown = math.ceil(1.25 * span * CANDIDATES / held) if held else 8 * span
        span = max(2 * span, grown)


_ROWS = (
    "SELECT id, path, kind, line, byte_offset, agent, role, tool, args, ts, session"
    " FROM docs WHERE id IN"
)


def sees(p: dict[str, Any], path: str, kind: str, agent: str | None, session: str | None) -> bool:
    """Whether the tenant of `p` may see a chunk of the doc (`path`, `kind`, owned by
    `agent` in `session`): its boundary as `_filters` and `_keys` put it to the index, tested
    again on each hit's metadata row, so that a chunk the index gave a wrong owner, era or
    tag is never shown to another tenant."""
    if p.get("t_agent") is None:
        return True
    own, in_session = p["t_session"], session if session is not None else ""
    seen = agent == p["t_agent"] and (own is None or in_session == own)
    if not seen and not (p["t_memory"] and kind == "memory"):
        return False
    if kind != "tool_result":
        return True
    atag, stag = output_tags(path)
    return atag == p["t_atag"] and (own is None or stag == p["t_stag"])


def ranked_rows(
    db: sqlite3.Connection, query: Query, every: bool, params: dict[str, Any], fetch: int
) -> Iterator[tuple[Any, ...]]:
    """The best `fetch` chunks of `query` (all its terms, or any: `every`) under the filters
    of `params`, best first, newest first on ties, as rows of (score, body, start_line,
    line_offset, path, kind, line, byte_offset, agent, role, tool, args, ts); the score is
    BM25 negated (lower is better). Tantivy's top k is found at once; the ``docs`` rows of a
    score's ties are read together (by their ``rowid`` fast fields: they order the ties by
    time), each chunk's stored fields and text as its row is taken: a search showing 5 hits
    reads some 5-10 chunks, not `fetch`, which matters most when the index's pages are cold.

    Raises:
        TextIndexError: the text index cannot be read (also while the rows are taken).
    """
    assert isinstance(db, IndexConnection)
    index = db.index
    with tantivy_errors(db.text.index_dir):
        _reload(db)
        schema = index.schema
        text = _text_query(schema, query, every)
        keys = _keys(params)
        filters = _filters(db, schema, params, bool(keys))
        if text is None or filters is None:
            return iter(())
        unscored = [(_MUST, tantivy.Query.const_score_query(f, 0.0)) for f in filters]
        q = tantivy.Query.boolean_query([(_MUST, text), *unscored]) if filters else text
        searcher = index.searcher()
        rarest = partial(_rarest, searcher, query, every)
        found = _newest(searcher, schema, q, fetch, rarest, keys)
    return _rows(db, searcher, found, params)


def _rows(
    db: IndexConnection,
    searcher: tantivy.Searcher,
    found: list[tuple[float, Any]],
    params: dict[str, Any],
) -> Iterator[tuple[Any, ...]]:
    """`ranked_rows`' rows of the hits `found` (best first): their ``rowid`` fast fields at
    once, then a score at a time the ties' ``docs`` rows, which order them, then each chunk's
    stored fields as its row is taken (a row the tenant of `params` may not see is left out:
    `sees`). Chunks of one length score alike: before, a search showing 5 hits read all 28
    tied chunks from the doc store (on a cold index, 60-94 pages of it)."""
    with tantivy_errors(db.text.index_dir):  # at once: the bindings open every segment's column
        rowids = [int(r or 0) for r in searcher.fast_field_values("rowid", [a for _, a in found])]
    hits = [(score, rowid, address) for (score, address), rowid in zip(found, rowids, strict=True)]
    for score, group in groupby(hits, key=lambda hit: hit[0]):
        tied = [(rowid, address) for _, rowid, address in group]
        ids = sorted({rowid >> DOC_SHIFT for rowid, _ in tied})
        rows = {}
        for at in range(0, len(ids), 500):
            part = ids[at : at + 500]
            marks = ",".join("?" * len(part))
            rows.update({r[0]: r for r in db.execute(f"{_ROWS} ({marks})", part)})
        ties = [
            (rows[rowid >> DOC_SHIFT], rowid, address)
            for rowid, address in tied
            if rowid >> DOC_SHIFT in rows
        ]
        ties.sort(key=lambda tie: (newest_first(tie[0][9]), tie[1]), reverse=True)
        for row, _, address in ties:
            if not sees(params, row[1], row[2], row[5], row[10]):
                continue
            with tantivy_errors(db.text.index_dir):
                doc = searcher.doc(address)
            if row[1] != doc.get_first("path"):  # a stale chunk (see the module)
                continue
            start, offset = doc.get_first("start_line") or 0, doc.get_first("line_offset") or 0
            yield (-float(score), chunk_text(doc, db.root), start, offset, *row[1:10])


def _reload(db: IndexConnection) -> None:
    """Take the commits made since the last search (another process's too): reload the reader
    when the index's ``meta.json``, which Tantivy replaces at each commit, is not the one read
    last (12 us to read; a reload costs 0.1-0.2 ms, growing with the segments), and advise the
    maps of its segments for random access (`advise_maps`) when it mapped `ADVISE_BYTES` of
    new files (a merged segment; the small one of each commit is not worth reading the
    process's maps: 16-46 ms with ten handles' segments mapped, issue 46 item 11); first
    check that none of the files it maps was damaged since (`_search_guard.MappedFiles`: a
    truncated one would kill the process at its first read).

    Raises:
        TextIndexError: the text index cannot be read, or a file of it was damaged.
    """
    mapped = db.text.mapped
    if mapped.check(db.index) and mapped.added >= ADVISE_BYTES:
        advise_maps(db.text.index_dir)


def newest_first(ts: object) -> str:
    """The key of a time in a sort in reverse that puts later times first, a time before a
    longer one it begins, and no time first of all (the sentinel ``U+10FFFF`` ends each)."""
    return str(ts or "").replace("T", " ") + "\U0010ffff"


def tenant_params(tenant: Tenant | None, storable: Callable[[str], str] = str) -> dict[str, object]:
    """The ``t_*`` parameters of the query for `tenant` (`storable`: as the index keeps text)."""
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
