"""Search engine candidates side by side (DESIGN.md §16, issue 30): the same history, chunked
as the stores chunk it (`_search_text.chunk_lines`, our tokens), indexed by each candidate;
the index size against the history's bytes, the indexing rate, and the top-5 query time
(p50/p95) over bench_store's queries (rare and common words, phrases, prefixes, CJK).

Run ``python -m benchmarks.store.engines --mb 100`` (``--mb``: MB of history, 10 by default).
Candidates (each skipped when its library is missing):

- ``fts5_today``: the local index's table today (the chunk text stored in FTS5, detail=full);
- ``fts5_contentless+zlib``: a contentless FTS5 table (detail=full: phrases) and the chunk
  text zlib-compressed beside it, read back for the hits only;
- ``fts5_contentless_column+zlib``: the same with ``detail=column`` (no positions: a phrase
  is then all its words, checked against the text);
- ``tantivy``: Tantivy's Python bindings, our tokens (whitespace tokenizer), positions, the
  chunk text not stored (zlib beside it, as above: counted);
- ``pg_gin_today``: PostgreSQL, the fleet store's table today (text, a ``tsvector`` of our
  tokens with positions, GIN), ranked by ``ts_rank``;
- ``pg_gin_zlib``: the same without the text (zlib ``bytea`` beside the ``tsvector``).

PostgreSQL runs on a private server (``tests/fleet/postgres_server``), skipped without one.

Every candidate answers ``ORDER BY rank LIMIT k`` (top-k by BM25). Numbers only."""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentscope_ctx.core.search._search_text import chunk_lines, index_text, parse_query, tokens
from benchmarks.store.stores import _output, _pct, _queries, _text

K = 5


def corpus(mb: float, seed: int = 7) -> Iterator[str]:
    """Chunks of a history like bench_store's: half dialog messages, half log outputs."""
    rng = random.Random(seed)
    left = int(mb * (1 << 20))
    while left > 0:
        if rng.random() < 0.5:
            texts = [_text(rng, 30) for _ in range(40)]
            left -= sum(len(t.encode()) + 60 for t in texts)  # a record's JSON around it
            for text in texts:
                yield from (c.text for c in chunk_lines(text.split("\n")))
        else:
            out = _output(rng, 200_000)
            left -= len(out.encode())
            yield from (c.text for c in chunk_lines(out.split("\n")))


def _fts_query(text: str) -> str:
    return parse_query(text).fts()


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Fts5:
    def __init__(self, root: Path, detail: str | None, contentless: bool) -> None:
        self.db = sqlite3.connect(root / "fts.sqlite3", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        opts = ["tokenize='unicode61 remove_diacritics 2'"]
        if contentless:
            opts.append("content=''")
        if detail:
            opts.append(f"detail={detail}")
        self.db.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, {', '.join(opts)})")
        self.contentless, self.detail, self.root = contentless, detail, root
        if contentless:
            self.db.execute("CREATE TABLE z(id INTEGER PRIMARY KEY, body BLOB)")

    def add(self, rows: list[tuple[int, str]]) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", rows)
        if self.contentless:
            self.db.executemany(
                "INSERT INTO z VALUES (?, ?)", ((i, zlib.compress(b.encode(), 6)) for i, b in rows)
            )
        self.db.execute("COMMIT")

    def finish(self) -> int:
        self.db.execute("INSERT INTO t(t) VALUES ('optimize')")
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.db.execute("VACUUM")
        return _size(self.root)

    def search(self, text: str) -> list[str]:
        query = parse_query(text)
        match = query.fts()
        if self.detail == "column":  # no phrases: every word, the phrase checked after
            match = query.fts().replace('" "', '" AND "')
        try:
            rows = self.db.execute(
                "SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank LIMIT ?", (match, K * 4)
            ).fetchall()
        except sqlite3.OperationalError:
            return []
        if not self.contentless:
            ids = [r[0] for r in rows]
            return [
                self.db.execute("SELECT body FROM t WHERE rowid = ?", (i,)).fetchone()[0]
                for i in ids[:K]
            ]
        out = []
        for (i,) in rows:
            z = self.db.execute("SELECT body FROM z WHERE id = ?", (i,)).fetchone()[0]
            out.append(zlib.decompress(z).decode())
            if len(out) >= K:
                break
        return out


class Tantivy:
    def __init__(self, root: Path) -> None:
        import tantivy

        self.tantivy = tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("body", stored=False, tokenizer_name="whitespace")
        builder.add_integer_field("id", stored=False, fast=True)
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema, path=str(root))
        self.writer = self.index.writer(heap_size=64_000_000, num_threads=1)
        self.z = sqlite3.connect(root / "z.sqlite3", isolation_level=None)
        self.z.execute("CREATE TABLE z(id INTEGER PRIMARY KEY, body BLOB)")
        self.root = root

    def add(self, rows: list[tuple[int, str]]) -> None:
        for i, body in rows:
            self.writer.add_document(
                self.tantivy.Document(id=i, body=" ".join(tokens(index_text(body))))
            )
        self.z.execute("BEGIN")
        self.z.executemany(
            "INSERT INTO z VALUES (?, ?)", ((i, zlib.compress(b.encode(), 6)) for i, b in rows)
        )
        self.z.execute("COMMIT")

    def finish(self) -> int:
        self.writer.commit()
        self.writer.wait_merging_threads()
        self.index.reload()
        self.z.execute("VACUUM")
        return _size(self.root)

    def search(self, text: str) -> list[str]:
        t, query = self.tantivy, parse_query(text)
        parts = []
        for term, prefix in query.terms:
            words = tokens(index_text(term))
            if not words:
                continue
            if prefix:
                last = t.Query.regex_query(self.schema, "body", words[-1] + ".*")
                parts.append(last if len(words) == 1 else t.Query.all_query())
            elif len(words) == 1:
                parts.append(t.Query.term_query(self.schema, "body", words[0]))
            else:
                parts.append(t.Query.phrase_query(self.schema, "body", words))
        if not parts:
            return []
        q = t.Query.boolean_query([(t.Occur.Must, p) for p in parts])
        hits = self.index.searcher().search(q, K).hits
        return [str(addr) for _, addr in hits]


class PgGin:
    def __init__(self, conn: Any, schema: str, body: bool) -> None:
        self.conn, self.s, self.body = conn, schema, body
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
        text = "body text" if body else "z bytea"
        conn.execute(f"CREATE TABLE {schema}.c (id bigint PRIMARY KEY, {text}, terms tsvector)")
        conn.execute(f"CREATE INDEX ON {schema}.c USING gin (terms)")

    def add(self, rows: list[tuple[int, str]]) -> None:
        from agentscope_ctx.stores.postgres._search_sql import tsvector_text

        values = [
            (i, b if self.body else zlib.compress(b.encode(), 6), tsvector_text(b)) for i, b in rows
        ]
        with self.conn.transaction(), self.conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {self.s}.c VALUES (%s, %s, %s::tsvector)",
                values,
            )

    def finish(self) -> int:
        self.conn.execute(f"VACUUM ANALYZE {self.s}.c")
        row = self.conn.execute(f"SELECT pg_total_relation_size('{self.s}.c')").fetchone()
        return int(row[0])

    def search(self, text: str) -> list[str]:
        from agentscope_ctx.stores.postgres._search_sql import query_text

        match = query_text(parse_query(text))
        if not match:
            return []
        col = "body" if self.body else "z"
        rows = self.conn.execute(
            f"SELECT {col} FROM {self.s}.c WHERE terms @@ %s::tsquery "
            "ORDER BY ts_rank(terms, %s::tsquery) DESC LIMIT %s",
            (match, match, K * 4),
        ).fetchall()
        if self.body:
            return [r[0] for r in rows[:K]]
        return [zlib.decompress(r[0]).decode() for r in rows[:K]]


def _postgres() -> tuple[Any, Any] | None:
    """A private PostgreSQL server and a connection to it, or None."""
    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        import psycopg

        from tests.fleet.postgres_server import PASSWORD, PostgresServer, why_unavailable
    except ImportError as exc:
        print(f"postgres skipped: {exc}")
        return None
    why = why_unavailable()
    if why:
        print(f"postgres skipped: {why}")
        return None
    server = PostgresServer.start(durable=True)
    conn = psycopg.connect(server.dsn, password=PASSWORD, autocommit=True)
    return server, conn


def run(mb: float, *, postgres: bool = True) -> dict[str, Any]:
    chunks = list(corpus(mb))
    history = sum(len(c.encode()) for c in chunks)
    rng = random.Random(7)
    queries = _queries(rng) * 3
    makers: dict[str, Callable[[Path], Any]] = {
        "fts5_today": lambda r: Fts5(r, None, contentless=False),
        "fts5_contentless+zlib": lambda r: Fts5(r, None, contentless=True),
        "fts5_contentless_column+zlib": lambda r: Fts5(r, "column", contentless=True),
    }
    try:
        import tantivy  # noqa: F401

        makers["tantivy"] = Tantivy
    except ImportError:
        print("tantivy skipped: not installed (pip install tantivy)")
    pg = _postgres() if postgres else None
    if pg is not None:
        makers["pg_gin_today"] = lambda r: PgGin(pg[1], "bench_engine_today", body=True)
        makers["pg_gin_zlib"] = lambda r: PgGin(pg[1], "bench_engine_zlib", body=False)
    results: dict[str, Any] = {"history_bytes": history, "chunks": len(chunks)}
    print(f"history {history / 2**20:.1f} MB in {len(chunks)} chunks; top-{K}, p50/p95 ms")
    for name, make in makers.items():
        root = Path(tempfile.mkdtemp(prefix="bench-engine-"))
        try:
            engine = make(root)
            start = time.perf_counter()
            for at in range(0, len(chunks), 2_000):
                engine.add([(at + k + 1, c) for k, c in enumerate(chunks[at : at + 2_000])])
            size = engine.finish()
            build = time.perf_counter() - start
            times = []
            for q in queries:
                t0 = time.perf_counter()
                engine.search(q)
                times.append(time.perf_counter() - t0)
            row = {
                "index_ratio": round(size / history, 3),
                "build_mb_s": round(history / 2**20 / build, 1),
                "p50_ms": round(_pct(times, 0.5) * 1e3, 2),
                "p95_ms": round(_pct(times, 0.95) * 1e3, 2),
            }
        finally:
            shutil.rmtree(root, ignore_errors=True)
        results[name] = row
        print(
            f"{name:<30} index {row['index_ratio']:.2f}x  build {row['build_mb_s']:>5} MB/s  "
            f"search {row['p50_ms']:>6}/{row['p95_ms']:<6}"
        )
    if pg is not None:
        pg[1].close()
        pg[0].stop()
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    run(args.mb, postgres=not args.no_postgres)
