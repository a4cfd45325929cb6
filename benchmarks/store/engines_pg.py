"""PostgreSQL search candidates side by side (DESIGN.md §16): the history of `bench_engines`
(bench_store's messages and log outputs, chunked as the stores chunk them, our tokens) loaded
into a table per candidate (``COPY``, 2,000 chunks a transaction, the index kept up as
the store keeps it), then the size of each part against the history's bytes, the load rate,
and the top-k query time (p50/p95) over bench_store's queries.

Run ``python -m benchmarks.store.engines_pg --mb 20`` (``--only today,rum``: some only).
Candidates (``rum*`` skipped where the ``rum`` extension is not installed):

- ``v2``: the fleet store's ``chunks`` of schema 2: the text, a ``tsvector`` with
  positions, GIN; ``today``: the same lz4-compressed (schema 3);
- ``strip``: the text and a ``tsvector`` without positions (``strip``: a phrase is then
  all its words, checked against the text);
- ``nobody_strip`` / ``nobody_pos``: no text (read back from the stores for the hits) and a
  ``tsvector`` without / with positions, GIN;
- ``nobody_strip_late``: as ``nobody_strip``, GIN made after the load (what a rebuild could
  do), and ``nobody_strip_nofu``: GIN with ``fastupdate = off``;
- ``blocks32`` / ``blocks64``: a row per 32 / 64 KB block of an output (its chunks' text
  read back from the stores for the hits only; a ``tsvector`` without positions, lz4) and a
  row per chunk of a message (the text and positions, lz4), GIN (schema 4);
- ``rum`` / ``rum_nobody``: RUM (``rum_tsvector_ops``) on the ``tsvector`` with positions,
  with / without the text, ranked in index order (``ORDER BY terms <=> query LIMIT k``).

GIN candidates answer the store's plan (`_search_sql.ranked_sql`): the newest
`CANDIDATES` matches, ranked by ``ts_rank``. Numbers only."""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentscope_ctx.core.search._search_text import chunk_lines, parse_query
from agentscope_ctx.stores.postgres._search_sql import (
    CANDIDATES,
    lexemes,
    query_text,
    tsvector_text,
)
from benchmarks.store.engines import corpus
from benchmarks.store.stores import _output, _pct, _queries, _text

K = 28  # the rows the store asks for a top-5 search (4 * limit + 8)
GIN = "gin (terms)"
RUM = "rum (terms rum_tsvector_ops)"
CANDIDATE_TABLES: dict[str, tuple[bool, bool, str]] = {
    # name: (the text stored, positions kept, the index: its USING clause, "" = after)
    "v2": (True, True, GIN),
    "today": (True, True, GIN),
    "strip": (True, False, GIN),
    "nobody_strip": (False, False, GIN),
    "nobody_pos": (False, True, GIN),
    "nobody_strip_late": (False, False, ""),
    "nobody_strip_nofu": (False, False, "gin (terms) WITH (fastupdate = off)"),
    "blocks32": (True, True, GIN),
    "blocks64": (True, True, GIN),
    "rum": (True, True, RUM),
    "rum_nobody": (False, True, RUM),
}


def blocks(mb: float, block_bytes: int, seed: int = 7) -> Iterator[tuple[str, bool]]:
    """`corpus(mb)` as schema 4 keeps it: (text, whether it is an output's block); an
    output's chunks joined into blocks of about `block_bytes`, a message's chunks apart."""
    rng = random.Random(seed)
    left = int(mb * (1 << 20))
    while left > 0:
        if rng.random() < 0.5:
            texts = [_text(rng, 30) for _ in range(40)]
            left -= sum(len(t.encode()) + 60 for t in texts)
            for text in texts:
                yield from ((c.text, False) for c in chunk_lines(text.split("\n")))
        else:
            out = _output(rng, 200_000)
            left -= len(out.encode())
            block: list[str] = []
            size = 0
            for c in chunk_lines(out.split("\n")):
                block.append(c.text)
                size += len(c.text) + 1
                if size >= block_bytes:
                    yield "\n".join(block), True
                    block, size = [], 0
            if block:
                yield "\n".join(block), True


def _load(conn: Any, name: str, chunks: list[str], mb: float) -> float:
    """Make `name`'s table, load `chunks` into it (``blocks*``: the `mb` MB of `corpus` cut
    in blocks); the seconds the load took."""
    body, positions, index = CANDIDATE_TABLES[name]
    s = f"bench_pg_{name}"
    rows: list[tuple[str, bool]] = [(c, False) for c in chunks]
    if name.startswith("blocks"):
        rows = list(blocks(mb, int(name[6:]) << 10))
    conn.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
    conn.execute(f"CREATE SCHEMA {s}")
    conn.execute(
        f"CREATE TABLE {s}.c (id bigint PRIMARY KEY, agent text, session text, "
        f"{'body text, ' if body else ''}terms tsvector)"
    )
    if name == "today" or name.startswith("blocks"):  # schema 3, 4 (`_schema`)
        conn.execute(
            f"ALTER TABLE {s}.c ALTER COLUMN terms SET COMPRESSION lz4, "
            "ALTER COLUMN body SET COMPRESSION lz4"
        )
    if index:
        conn.execute(f"CREATE INDEX ci ON {s}.c USING {index}")
    columns = f"id, agent, session, {'body, ' if body else ''}terms"
    start = time.perf_counter()
    for at in range(0, len(rows), 2_000):
        with conn.transaction(), conn.cursor().copy(f"COPY {s}.c ({columns}) FROM STDIN") as cp:
            for k, (chunk, block) in enumerate(rows[at : at + 2_000]):
                strip = block or not positions
                terms = " ".join(set(lexemes(chunk))) if strip else tsvector_text(chunk)
                owner = ("bench", f"s{(at + k) % 10}")
                text = "" if block else chunk
                cp.write_row((at + k + 1, *owner, *((text,) if body else ()), terms))
    if not index:
        conn.execute(f"CREATE INDEX ci ON {s}.c USING {GIN}")
    took = time.perf_counter() - start
    conn.execute(f"VACUUM ANALYZE {s}.c")
    return took


def _search(conn: Any, name: str, match: str) -> None:
    s = f"bench_pg_{name}"
    if name.startswith("rum"):
        conn.execute(
            f"SELECT id FROM {s}.c WHERE terms @@ %s::tsquery "
            "ORDER BY terms <=> %s::tsquery LIMIT %s",
            (match, match, K),
            prepare=False,
        ).fetchall()
        return
    conn.execute(
        f"SELECT id FROM (SELECT id, terms FROM {s}.c WHERE terms @@ %s::tsquery "
        f"ORDER BY id DESC LIMIT {CANDIDATES}) AS x ORDER BY ts_rank(terms, %s::tsquery) DESC "
        "LIMIT %s",
        (match, match, K),
        prepare=False,
    ).fetchall()


def run(mb: float, only: list[str] | None = None) -> dict[str, Any]:
    from benchmarks.store.engines import _postgres

    chunks = list(corpus(mb))
    history = sum(len(c.encode()) for c in chunks)
    queries = _queries(random.Random(7)) * 3
    pg = _postgres()
    if pg is None:
        return {}
    server, conn = pg
    rum = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'rum'").fetchone()
    if rum:
        conn.execute("CREATE EXTENSION IF NOT EXISTS rum")
    results: dict[str, Any] = {"history_bytes": history, "chunks": len(chunks)}
    print(f"history {history / 2**20:.1f} MB in {len(chunks)} chunks; top-{K}, p50/p95 ms")
    try:
        for name in only or list(CANDIDATE_TABLES):
            if name.startswith("rum") and not rum:
                print(f"{name} skipped: the rum extension is not installed")
                continue
            took = _load(conn, name, chunks, mb)
            t = f"'bench_pg_{name}.c'"
            heap, total, index = conn.execute(
                f"SELECT pg_relation_size({t}), pg_total_relation_size({t}), "
                f"pg_relation_size('bench_pg_{name}.ci')"
            ).fetchone()
            times = []
            for q in queries:
                match = query_text(parse_query(q))
                if not CANDIDATE_TABLES[name][1] or name.startswith(
                    "blocks"
                ):  # no positions: a phrase is all its words
                    match = match.replace("<->", "&")
                start = time.perf_counter()
                _search(conn, name, match)
                times.append(time.perf_counter() - start)
            row = {
                "total": round(total / history, 2),
                "heap": round(heap / history, 2),
                "toast_and_pk": round((total - heap - index) / history, 2),
                "index": round(index / history, 2),
                "load_mb_s": round(history / 2**20 / took, 1),
                "p50_ms": round(_pct(times, 0.5) * 1e3, 1),
                "p95_ms": round(_pct(times, 0.95) * 1e3, 1),
            }
            results[name] = row
            print(
                f"{name:<18} total {row['total']:.2f}x (heap {row['heap']:.2f}, toast+pk "
                f"{row['toast_and_pk']:.2f}, index {row['index']:.2f})  load "
                f"{row['load_mb_s']:>4} MB/s  search {row['p50_ms']}/{row['p95_ms']}",
                flush=True,
            )
            conn.execute(f"DROP SCHEMA bench_pg_{name} CASCADE")
    finally:
        conn.close()
        server.stop()
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--only", default="", help="candidates, comma-separated")
    args = parser.parse_args()
    run(args.mb, [n for n in args.only.split(",") if n] or None)
