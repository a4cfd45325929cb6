"""The PostgreSQL search's time per owner filter (issue 30): a store of `--chunks` messages
(one index chunk each, all of one day) of 2 agents over 10 sessions, appended 10 at a time
per owner (common and rare words, a phrase, CJK, a word common in other sessions only);
then each query shape under each owner filter (the agent's tenant, session only, agent
only, none) timed: the ranked query and its hits placed in their day (`day_rows`), p50 /
p95 over the shapes and repeats, and the plan of the slowest with ``--explain``.

    python -m benchmarks.store.pg_session_plan --chunks 100000
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.search._search_text import parse_query
from agentscope_ctx.stores.postgres._schema import ensure
from agentscope_ctx.stores.postgres._search_sql import (
    day_rows,
    query_text,
    ranked_sql,
    tsvector_text,
)
from agentscope_ctx.stores.postgres._tenant import bind

SCHEMA = "plan_bench"
SESSIONS = [f"s{n}" for n in range(10)]
AGENTS = ["alpha", "beta"]
RUN = 10
"""Messages in a row of one owner (the store benchmark appends 10 at a time per session)."""
QUERIES = {
    "common": "error",
    "two common": "error timeout",
    "rare": "zebracorn",
    "phrase": '"timeout error"',
    "absent": "nowherefound",
    "absent + common": "error nowherefound",
    "cjk": "数据库",
    "prefix": "conne*",
    "common elsewhere": "skewword",
}
FILTERS = {
    "tenant (agent + session)": "tenant",
    "session only": "session",
    "agent only": "agent",
    "none": "none",
}


def _words(rng: random.Random) -> list[str]:
    common = ["error", "timeout", "request", "file", "value", "return", "import", "line"]
    vocab = common + [f"w{n}" for n in range(5000)]
    weights = [50.0] * len(common) + [1.0 / (1 + n) ** 0.8 for n in range(5000)]
    return rng.choices(vocab, weights, k=20000)


def build(conn: Any, chunks: int, seed: int = 7) -> None:
    """`chunks` rows in `SCHEMA.chunks`, owners interleaved; ANALYZE at the end."""
    rng = random.Random(seed)
    pool = _words(rng)
    conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    ensure(conn, SCHEMA)
    conn.execute("SELECT set_config('agentscope_ctx.scope', 'all', false)")
    dialog = []  # one message per chunk, all of one day (seq n + 1)
    with conn.cursor().copy(
        f"COPY {SCHEMA}.chunks (kind, source, start_line, line_offset, body, terms, agent, "
        "session, role, ts) FROM STDIN"
    ) as copy:
        for n in range(chunks):
            start = rng.randrange(len(pool) - 120)
            words = pool[start : start + 120] * 2
            if rng.random() < 0.0005:
                words[rng.randrange(120)] = "zebracorn"
            if rng.random() < 0.01:
                words[rng.randrange(120)] = "连接数据库失败"
            if rng.random() < 0.02:
                words[rng.randrange(120)] = "connection"
            run = n // RUN  # an append: a run of one owner's messages
            agent, session = AGENTS[run % 2], SESSIONS[(run * 7) % 10]
            if session < "s4" and rng.random() < 0.1:  # common in sessions s0-s3 only
                words[rng.randrange(120)] = "skewword"
            body = " ".join(words)
            copy.write_row(
                (
                    "dialog",
                    f"pg-dialog:{n + 1}",
                    1,
                    0,
                    body,
                    tsvector_text(body),
                    agent,
                    session,
                    "tool",
                    f"2026-01-01T00:00:{n % 60:02d}",
                )
            )
            dialog.append((f"m{n}", agent, session, "2026-01-01", _record(body), True))
    with conn.cursor().copy(
        f"COPY {SCHEMA}.dialog (msg_id, agent, session, day, record, indexed) FROM STDIN"
    ) as copy:
        for row in dialog:
            copy.write_row(row)
    conn.execute(f"ANALYZE {SCHEMA}.chunks")
    conn.execute(f"ANALYZE {SCHEMA}.dialog")


def _record(body: str) -> str:
    return json.dumps({"id": "m", "name": "user", "role": "user", "content": body})


def _params(kind: str) -> tuple[dict[str, Any], Tenant | None]:
    base: dict[str, Any] = {"limit": 28}
    if kind == "tenant":
        return {**base, "t_agent": "alpha", "t_session": "s4"}, Tenant.of("alpha", "s4")
    if kind == "session":
        return {**base, "session": "s4"}, None
    if kind == "agent":
        return {**base, "agent": "alpha"}, None
    return base, None


def run(conn: Any, repeats: int, explain: bool) -> dict[str, tuple[float, float]]:
    """p50 / p95 ms per owner filter over every query shape and `repeats`."""
    out = {}
    for label, kind in FILTERS.items():
        params, tenant = _params(kind)
        sql = ranked_sql(SCHEMA, {k for k in params if k != "limit"})
        times: list[tuple[float, str]] = []
        for qname, query in QUERIES.items():
            match = query_text(parse_query(query))
            for _ in range(repeats):
                with conn.transaction():
                    bind(conn, tenant)
                    began = time.perf_counter()
                    rows = conn.execute(sql, {**params, "match": match}, prepare=False).fetchall()
                    day_rows(conn, SCHEMA, rows, tenant)
                    times.append(((time.perf_counter() - began) * 1000, qname))
        ms = sorted(t for t, _ in times)
        p50, p95 = statistics.median(ms), ms[int(0.95 * (len(ms) - 1))]
        out[label] = (p50, p95)
        worst = max(times)
        print(
            f"{label:26} p50 {p50:8.1f} ms  p95 {p95:8.1f} ms  worst {worst[0]:8.1f} ({worst[1]})"
        )
        if explain:
            match = query_text(parse_query(QUERIES[worst[1]]))
            with conn.transaction():
                bind(conn, tenant)
                plan = conn.execute(
                    f"EXPLAIN (ANALYZE, BUFFERS) {sql}", {**params, "match": match}, prepare=False
                ).fetchall()
            print("\n".join("    " + row[0] for row in plan))
    return out


def main() -> None:
    import psycopg

    from tests.fleet.postgres_server import PASSWORD, PostgresServer

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--chunks", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--explain", action="store_true")
    args = ap.parse_args()
    server = PostgresServer.start()
    try:
        with psycopg.connect(server.dsn, password=PASSWORD, autocommit=True) as conn:
            began = time.perf_counter()
            build(conn, args.chunks)
            print(f"built {args.chunks} chunks in {time.perf_counter() - began:.0f} s")
            run(conn, args.repeats, args.explain)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
