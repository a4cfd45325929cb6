"""A query matched and scored on the tail of the local search index (`_search_tail`: the
chunks the files hold that the text index has not committed yet), in memory, by the rules
the text index follows (`_search_query`), so that a chunk is a hit in the tail exactly when
it would be one indexed:

- its tokens are the text index's (`_search_tantivy.query_tokens`: its analyzer, in Rust);
- a word is a token; a quoted phrase its tokens in a row (a phrase of CJK characters holds
  their pairs too: no more is asked); ``word*`` a token that starts with it (the index's
  ``prefixes`` term, and its regex ``word.*`` past `PREFIX_CHARS`: the same tokens); a
  phrase ending in ``word*`` its tokens in a row, the last one so;
- the filters and the tenant boundary are those of a hit's ``docs`` row (`_search_query.sees`,
  which puts the boundary to each indexed hit too, and `_filters`' other clauses).

The score is Tantivy's BM25 (k1 1.2, b 0.75): a word's and a phrase's (the sum of its words'
idf, its count for the frequency), a prefix's 1.0, the rest 0; each term's document frequency
and the number of chunks are the committed index's (`tantivy.Searcher.doc_freq`,
``num_docs``) plus the tail's own, so a tail hit ranks among the indexed ones as it will once
it is committed. The average chunk length is the tail's (the bindings do not expose the
index's); a length is the token count (Tantivy rounds it to one of 256 values): the scores
differ a little from the index's, the hits not at all. Tantivy's phrase of a prefix takes the
first 50 words of the index that start so; the tail takes every such word."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.search._search_text import Query
from ._search_query import newest_first, sees
from ._search_tantivy import query_tokens, ts_digits

__all__ = ["TailChunk", "tail_rows"]

K1, B = 1.2, 0.75


@dataclass
class TailChunk:
    """A chunk of the tail: its ``ranked_rows`` row after the score (body, start_line,
    line_offset, path, kind, line, byte_offset, agent, role, tool, args, ts), its session,
    and its tokens."""

    row: tuple[Any, ...]
    session: str | None
    tokens: list[str]


def _count(tokens: list[str], words: list[str], prefix: bool) -> int:
    """How many times `words` are in `tokens` in a row (the last one as a prefix: `prefix`)."""
    n, last = len(words), words[-1]
    if n == 1:
        if prefix:
            return sum(t.startswith(last) for t in tokens)
        return tokens.count(last)
    found = 0
    for at in range(len(tokens) - n + 1):
        if tokens[at : at + n - 1] == words[:-1]:
            tail = tokens[at + n - 1]
            found += tail.startswith(last) if prefix else tail == last
    return found


def _filtered(p: dict[str, Any], c: TailChunk) -> bool:
    """Whether the chunk `c` passes the filters of `p` (the clauses of `_filters`)."""
    _, _, _, path, kind, _, _, agent, role, tool, _, ts = c.row
    if not sees(p, path, kind, agent, c.session):
        return False
    if p.get("agent") and agent not in (p["agent"], None):
        return False
    if p.get("session") is not None and c.session != p["session"]:
        return False
    if p.get("role") and role != p["role"]:
        return False
    if p.get("tool") and p["tool"] not in (tool or "").split(","):
        return False
    if p.get("since") or p.get("until"):
        low, high, at = ts_digits(p.get("since")), ts_digits(p.get("until"), "9"), ts_digits(ts)
        if (p.get("since") and low is None) or (p.get("until") and high is None) or at is None:
            return False
        return (low is None or at >= low) and (high is None or at <= high)
    return True


def tail_rows(
    chunks: Sequence[TailChunk],
    query: Query,
    every: bool,
    params: dict[str, Any],
    doc_freq: Callable[[str], int],
    indexed: int,
) -> list[tuple[Any, ...]]:
    """The chunks of `chunks` matching `query` (all its terms, or any: `every`) under the
    filters of `params`, as `ranked_rows`' rows (the score BM25 negated), best first, newest
    first on ties; `doc_freq(word)` and `indexed` are the committed index's chunks holding
    `word` and all of its chunks."""
    terms = [(w, prefix) for text, prefix in query.terms if (w := query_tokens(text))]
    if not terms or not chunks:
        return []
    total = indexed + len(chunks)
    average = sum(len(c.tokens) for c in chunks) / len(chunks) or 1.0
    idf: dict[str, float] = {}

    def weight(word: str) -> float:
        if word not in idf:
            n = doc_freq(word) + sum(word in c.tokens for c in chunks)
            idf[word] = math.log(1 + (total - n + 0.5) / (n + 0.5))
        return idf[word]

    rows = []
    for c in reversed(chunks):  # the later written first among ties, as the index orders them
        if not _filtered(params, c):
            continue
        score, matched = 0.0, 0
        for words, prefix in terms:
            found = _count(c.tokens, words, prefix)
            if not found:
                continue
            matched += 1
            if prefix and len(words) == 1:
                score += 1.0
                continue
            scored = words[:-1] if prefix else words
            norm = K1 * (1 - B + B * len(c.tokens) / average)
            score += sum(map(weight, scored)) * (K1 + 1) * found / (found + norm)
        if matched == len(terms) or (matched and not every):
            rows.append((-score, *c.row))
    rows.sort(key=lambda row: newest_first(row[12]), reverse=True)  # ties: newest first
    rows.sort(key=lambda row: row[0])
    return rows
