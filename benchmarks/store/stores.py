"""Benchmark the storage seams (DESIGN.md §11): the local store (files + a Tantivy index) against
the PostgreSQL fleet store, on this machine.

Run ``python -m benchmarks store`` (10,000 messages and 100 MB of saved outputs), or this
module to choose the sizes::

    python -m benchmarks.store.stores                       # 10000:100
    python -m benchmarks.store.stores --large               # 10000:100 and 100000:1024
    python -m benchmarks.store.stores --points 1000:10 100000:1024 --sessions 10 --big-mb 100
    python -m benchmarks.store.stores --large --stores postgres   # one store only

Each point is MESSAGES:OUTPUT_MB. The environment variable ``AGENTSCOPE_CTX_BENCH_STORE``
(e.g. ``"100000:1024"``) sets the points of ``python -m benchmarks store``; ``--large`` there
too. PostgreSQL is a private server started for the run (``tests/fleet/postgres_server``, fsync
on, a unix socket: no network cost), skipped when its binaries or psycopg are missing.

For each store and point, through the seams as the agent uses them (`stores.factory`: each
save tells the search index), the history spread over `SESSIONS` sessions of one store (each
its own stores, as workers are, sharing the backing):

1. save: a dialog append of 10 messages (about 250 bytes each; the index is told), and an
   output save (outputs of OUTPUT_MB / 100 each, indexed at save up to 8 MB): p50/p95 ms;
2. ranged read: `read_file`'s continuation read of a saved output from a random line
   (`seams.excerpt`, 32 KB): p50/p95 ms;
3. search: `search` as the agent searches (its tenant: agent ``bench`` in session ``s1``, which
   owns a tenth of the messages and of the outputs: the sessions append in turn, and the
   outputs are saved by each session in turn; before 2026-12-05 every output was saved by the
   session whose turn it was when one was due, always ``s9``, so the tenant saw none) of rare
   words, common words, phrases, prefixes and CJK, with the
   catch-up check: p50/p95 ms, with no indexing beside them (every session's background
   indexing idle); measured when a tenth of the history is stored and at the end,
   so the table shows how the cost grows with history size (on PostgreSQL after an
   ``ANALYZE`` of the index table, which autovacuum makes within a minute of a load);
4. size: the search index (local: ``index/``, the SQLite metadata and the Tantivy text
   index; PostgreSQL's ``chunks`` table with its GIN index) and the whole store, and their
   ratio (``index/history``); with the p95 growth from a tenth of the history to all of it;
   Locally also cold: 17 first-time searches, each after the index's files were dropped from
   the page cache (``posix_fadvise(DONTNEED)``; pages this process still maps stay), with
   the MB each read from the disk;
5. big output: one more output of ``--big-mb`` MB (100 by default; 0: none) with a word on
   its last line, then the first search (the default catch-up):
   its time, whether it found the word and what it said was left, and how long the
   background indexing took to finish it;
6. rebuild: the index dropped and made again from the stores (``--no-rebuild`` skips it).

``--live`` (issue 46, item 11) times search with the indexing live instead: `--handles`
handles of the store save in turn and the next `--searches` of them search after each save,
no indexing idled (`benchmarks.store.live`): p50/p95/p99 at a tenth of each point and at
all of it, the growth between them, the load averages beside them::

    python -m benchmarks store --live --points 10000:100 --stores local

Numbers only: no target is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.core.truncation._truncation import Position
from agentscope_ctx.stores.factory import Stores, open_stores
from agentscope_ctx.stores.seams import excerpt

DEFAULT_POINTS = ((10_000, 100),)
LARGE_POINTS = ((10_000, 100), (100_000, 1_024))
ENV = "AGENTSCOPE_CTX_BENCH_STORE"
APPEND_BATCH = 10
SESSIONS = 10
BIG_MB = 100
READS = 200
ROOT = Path(__file__).resolve().parents[2]
_WORDS = [f"w{n:04d}" for n in range(3_000)] + (
    "request worker retry config parser timeout cache token socket deploy queue".split()
)
_CJK = "数据库迁移计划部署集群日志错误超时缓存队列"


AS_AGENT = Filters(tenant=Tenant.of("bench", "s1"))
"""The filters of the agent's own searches (DESIGN.md §15: its tenant)."""


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ms(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(_pct(values, 0.5) * 1000, 2),
        "p95_ms": round(_pct(values, 0.95) * 1000, 2),
    }


def _text(rng: random.Random, words: int) -> str:
    out = " ".join(rng.choice(_WORDS) for _ in range(words))
    if rng.random() < 0.1:
        out += " " + "".join(rng.choice(_CJK) for _ in range(8))
    return out


def _output(rng: random.Random, size: int) -> str:
    lines, total = [], 0
    while total < size:
        line = f"{total:012d} {rng.choice(('INFO', 'WARN', 'ERROR'))} " + _text(rng, 12)
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def _queries(rng: random.Random) -> list[str]:
    rare = [rng.choice(_WORDS[:3_000]) for _ in range(10)]
    return [
        *rare,
        "deploy", "timeout queue",
        f'"{rare[0]} {rare[1]}"', "w01*", "数据库", "ERROR timeout",
        f"{rare[2]} nonexistentword",
    ]  # fmt: skip


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _sizes(kind: str, stores: Stores, work: Path) -> dict[str, int]:
    if kind == "local":
        return {
            "index_bytes": _dir_size(work / "index"),
            "store_bytes": _dir_size(work / "dialog") + _dir_size(work / "tool_result"),
        }
    engine = stores.search.engine  # type: ignore[attr-defined]
    s = engine.schema
    with engine.connection() as conn:
        index = conn.execute(f"SELECT pg_total_relation_size('{s}.chunks')").fetchone()[0]
        store = conn.execute(
            f"SELECT pg_total_relation_size('{s}.dialog') + pg_total_relation_size('{s}.outputs')"
            f" + pg_total_relation_size('{s}.output_chunks')"
        ).fetchone()[0]
    return {"index_bytes": int(index), "store_bytes": int(store)}


def _big_output(kind: str, stores: Stores, rng: random.Random, size_mb: int) -> dict[str, Any]:
    """Save a `size_mb` output ending in a unique word; time the first search for it."""
    text = _output(rng, size_mb << 20) + "bigoutputendword\n"
    start = time.perf_counter()
    stores.outputs.save(text)
    save_s = time.perf_counter() - start
    del text
    start = time.perf_counter()
    first = stores.search.search("bigoutputendword", limit=1)
    first_s = time.perf_counter() - start
    waited = time.perf_counter()
    while not stores.search.search("bigoutputendword", limit=1, catch_up_seconds=0).hits:
        if time.perf_counter() - waited > 600:
            break
        time.sleep(0.2)
    return {
        "mb": size_mb,
        "save_s": round(save_s, 2),
        "first_search_ms": round(first_s * 1000, 1),
        "first_found": bool(first.hits),
        "first_pending": first.pending,
        "indexed_whole_after_s": round(time.perf_counter() - waited, 1),
    }


def _run_point(
    kind: str,
    config: ContextConfig,
    messages: int,
    output_mb: int,
    *,
    rebuild: bool = True,
    sessions: int = SESSIONS,
    big_mb: int = BIG_MB,
) -> dict[str, Any]:
    rng = random.Random(7)
    opened = [open_stores(config, agent="bench", session=f"s{k}") for k in range(sessions)]
    stores = opened[0]
    work = Path(config.working_dir)
    output_bytes = output_mb << 20
    outputs_n = 100
    each = max(output_bytes // outputs_n, 1)
    appends: list[float] = []
    saves: list[float] = []
    refs: list[tuple[Stores, str, int]] = []
    searches: dict[str, dict[str, float]] = {}
    session_searches: dict[str, dict[str, float]] = {}
    checkpoint = max(messages // 10, APPEND_BATCH)
    stored = 0
    queries = _queries(rng)

    async def fill() -> None:
        nonlocal stored
        next_output = 0
        while stored < messages:
            batch = []
            for _ in range(APPEND_BATCH):
                msg = Msg("user", _text(rng, 30), "user")
                batch.append(msg)
            session = opened[(stored // APPEND_BATCH) % sessions]
            appends.append(await _atimed(session.dialog.append(batch)))
            stored += len(batch)
            due = stored * outputs_n // messages
            while next_output < min(due, outputs_n):
                text = _output(rng, each)
                saver = opened[next_output % sessions]  # the outputs spread over the sessions
                start = time.perf_counter()
                ref = saver.outputs.save(text)
                saves.append(time.perf_counter() - start)
                refs.append((saver, ref, text.count("\n")))
                next_output += 1
            if stored == checkpoint or stored >= messages:
                stores.search.catch_up()
                _idle(opened)
                if kind == "postgres":  # what autovacuum does within a minute of the load
                    engine = stores.search.engine  # type: ignore[attr-defined]
                    with engine.connection() as conn:
                        conn.execute(f"ANALYZE {engine.schema}.chunks")
                times = [
                    _timed(
                        lambda q=q: stores.search.search(
                            q, AS_AGENT, limit=5, catch_up_seconds=10.0
                        )
                    )
                    for q in queries * 3
                ]
                searches[f"{stored}"] = _ms(times)
                mine = Filters(session="s1")  # one session's search, as a tenant's
                times = [
                    _timed(lambda q=q, f=mine: stores.search.search(q, f, limit=5)) for q in queries
                ]
                session_searches[f"{stored}"] = _ms(times)

    asyncio.run(fill())
    cold = _cold(stores, work, queries) if kind == "local" else {}
    reads = []
    for _ in range(READS):
        saver, ref, lines = rng.choice(refs)
        line = rng.randint(1, max(lines, 1))
        reads.append(
            _timed(lambda s=saver, r=ref, n=line: excerpt(s.outputs, r, Position(n), 32_768))
        )
    big = _big_output(kind, stores, rng, big_mb) if big_mb else {}
    rebuild_s = float("nan")
    if rebuild:
        start = time.perf_counter()
        stores.search.rebuild()
        rebuild_s = time.perf_counter() - start
    result = {
        "messages": messages,
        "output_mb": output_mb,
        "append_10_msgs": _ms(appends),
        "output_save": {**_ms(saves), "output_bytes": each},
        "ranged_read": _ms(reads),
        "sessions": sessions,
        "search_at": searches,
        "session_search_at": session_searches,
        "cold_search": cold,
        "big_output": big,
        "rebuild_s": round(rebuild_s, 1),
        **_sizes(kind, stores, work),
    }
    first, last = min(searches, key=int), max(searches, key=int)
    result["p95_growth"] = round(
        searches[last]["p95_ms"] / max(searches[first]["p95_ms"], 1e-3), 2
    )  # from a tenth of the history to all of it
    result["index_ratio"] = round(result["index_bytes"] / max(result["store_bytes"], 1), 3)
    for one in opened:
        one.close()
    return result


def _cold(stores: Stores, work: Path, queries: Sequence[str]) -> dict[str, Any]:
    """17 first-time searches of rare words (not in `queries`), each after the index's files
    were dropped from the page cache (what this process still maps stays): p50/p95 ms and the
    median MB read from the disk (``ru_inblock``); empty where there is no ``posix_fadvise``."""
    if not hasattr(os, "posix_fadvise"):
        return {}
    files = [p for p in (work / "index").rglob("*") if p.is_file()]
    words = [w for w in random.Random(11).sample(_WORDS[:3_000], 60) if w not in queries][:17]
    times, read = [], []
    for word in words:
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_inblock
        times.append(_timed(lambda w=word: stores.search.search(w, AS_AGENT, limit=5)))
        read.append((resource.getrusage(resource.RUSAGE_SELF).ru_inblock - before) * 512)
    return {**_ms(times), "read_mb_p50": round(sorted(read)[len(read) // 2] / 2**20, 2)}


def _idle(opened: Sequence[Stores], limit: float = 600.0) -> None:
    """Wait until no session's background indexing runs: the searches are timed alone, on the
    history the catch-up before them indexed (the other sessions' threads, started by their
    last saves, would otherwise still be running their steps beside the first searches)."""
    start = time.perf_counter()
    while any(one.search.background.running() for one in opened):  # type: ignore[attr-defined]
        if time.perf_counter() - start > limit:
            return
        time.sleep(0.05)


async def _atimed(awaitable: Any) -> float:
    start = time.perf_counter()
    await awaitable
    return time.perf_counter() - start


def _print(kind: str, row: dict[str, Any]) -> None:
    search = row["search_at"]
    first, last = min(search, key=int), max(search, key=int)
    print(
        f"{kind:<9}{row['messages']:>8} msgs {row['output_mb']:>5} MB | "
        f"append {row['append_10_msgs']['p50_ms']:>6.1f}/{row['append_10_msgs']['p95_ms']:<7.1f}"
        f"save {row['output_save']['p50_ms']:>7.1f}/{row['output_save']['p95_ms']:<7.1f}"
        f"read {row['ranged_read']['p50_ms']:>5.1f}/{row['ranged_read']['p95_ms']:<6.1f}"
        f"search@{first} {search[first]['p50_ms']:>5.1f}/{search[first]['p95_ms']:<6.1f}"
        f"search@{last} {search[last]['p50_ms']:>5.1f}/{search[last]['p95_ms']:<6.1f}"
        f"p95 growth {row['p95_growth']:.2f}x "
        f"index {row['index_bytes'] / 2**20:>7.1f} MB store {row['store_bytes'] / 2**20:>7.1f} MB "
        f"(index/history {row['index_ratio']:.2f}x) rebuild {row['rebuild_s']} s"
    )
    mine = row["session_search_at"][last]
    big, cold = row["big_output"], row["cold_search"]
    print(
        f"{'':<9}{row['sessions']} sessions; one session's search@{last} "
        f"{mine['p50_ms']:.1f}/{mine['p95_ms']:.1f}"
        + (
            f"; cold (the index out of the page cache) {cold['p50_ms']:.1f}/{cold['p95_ms']:.1f}"
            f" reading {cold['read_mb_p50']} MB each"
            if cold
            else ""
        )
        + (
            f"; after a {big['mb']} MB output (saved in {big['save_s']} s) the first search "
            f"took {big['first_search_ms']:.0f} ms (found: {big['first_found']}, "
            f"left: {big['first_pending']}), indexed whole in the background "
            f"{big['indexed_whole_after_s']} s later"
            if big
            else ""
        )
    )


def each_point(
    points: Sequence[tuple[int, int]], stores: Sequence[str], prefix: str, skipped: dict[str, Any]
) -> Iterator[tuple[str, int, int, ContextConfig]]:
    """`(kind, messages, output_mb, config)` of every point on every store of `stores`, each
    in a fresh working dir (removed after it) or PostgreSQL schema (``{prefix}_{messages}_
    {output_mb}``) of one server started for the run (its password through the environment,
    as a user gives it); PostgreSQL is skipped, and why put in `skipped`, where no server runs.
    """
    sys.path.insert(0, str(ROOT))
    from tests.fleet.postgres_server import PASSWORD, PostgresServer, why_unavailable

    why = why_unavailable()
    server = None if why or "postgres" not in stores else PostgresServer.start(durable=True)
    try:
        for messages, output_mb in points:
            for kind in stores:
                store: dict[str, Any] = {"kind": kind}
                if kind == "postgres":
                    if server is None:
                        skipped["postgres"] = why
                        print(f"postgres skipped: {why}")
                        continue
                    os.environ["AGENTSCOPE_CTX_BENCH_PGPASSWORD"] = PASSWORD
                    store.update(
                        dsn=server.dsn,
                        password_env="AGENTSCOPE_CTX_BENCH_PGPASSWORD",
                        schema_name=f"{prefix}_{messages}_{output_mb}",
                    )
                work = Path(tempfile.mkdtemp(prefix=f"bench-{prefix}-"))
                try:
                    yield kind, messages, output_mb, ContextConfig(working_dir=work, store=store)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
    finally:
        if server is not None:
            server.stop()


def main(
    points: Sequence[tuple[int, int]] | None = None,
    *,
    large: bool = False,
    rebuild: bool = True,
    sessions: int = SESSIONS,
    big_mb: int = BIG_MB,
    stores: Sequence[str] = ("local", "postgres"),
    live: bool = False,
    handles: int = 10,
    searches: int = 2,
) -> dict[str, Any]:
    """Run every point on `stores` (both by default); print the table and return the
    numbers. `live`: search while `handles` handles save (`benchmarks.store.live`)."""
    if live:
        from benchmarks.store import live as live_bench

        env = os.environ.get(ENV)
        chosen = points or ([tuple(map(int, p.split(":"))) for p in env.split()] if env else None)
        return live_bench.main(chosen, handles=handles, searches=searches, stores=stores)  # type: ignore[arg-type]
    if points is None:
        env = os.environ.get(ENV)
        points = (
            [tuple(map(int, p.split(":"))) for p in env.split()]  # type: ignore[misc]
            if env
            else (LARGE_POINTS if large else DEFAULT_POINTS)
        )
    results: dict[str, Any] = {"points": {}, "skipped": {}}
    print("p50/p95 in ms; append = 10 messages; read = read_file's 32 KB excerpt from a line")
    for kind, messages, output_mb, config in each_point(
        points, stores, "bench", results["skipped"]
    ):
        row = _run_point(
            kind, config, messages, output_mb, rebuild=rebuild, sessions=sessions, big_mb=big_mb
        )
        results["points"][f"{kind}:{messages}:{output_mb}"] = row
        _print(kind, row)
    return results


def options(argv: Sequence[str]) -> dict[str, Any]:
    """`main`'s keyword arguments from the command line's options (this module's, and those
    after ``store`` in ``python -m benchmarks store ...``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", nargs="*", metavar="MESSAGES:OUTPUT_MB")
    parser.add_argument("--large", action="store_true", help="10000:100 and 100000:1024")
    parser.add_argument("--no-rebuild", action="store_true", help="skip timing a rebuild")
    parser.add_argument("--sessions", type=int, default=SESSIONS, help="sessions of the store")
    parser.add_argument("--big-mb", type=int, default=BIG_MB, help="the big output (0: none)")
    parser.add_argument(
        "--stores", nargs="+", choices=("local", "postgres"), default=("local", "postgres")
    )
    parser.add_argument(
        "--live", action="store_true", help="search while other handles save (indexing live)"
    )
    parser.add_argument("--handles", type=int, default=10, help="--live: handles of the store")
    parser.add_argument("--searches", type=int, default=2, help="--live: searches per save")
    args = parser.parse_args(argv)
    chosen = [tuple(map(int, p.split(":"))) for p in args.points] if args.points else None
    if args.live:
        return {
            "points": chosen,
            "live": True,
            "handles": args.handles,
            "searches": args.searches,
            "stores": args.stores,
        }
    return {
        "points": chosen,
        "large": args.large,
        "rebuild": not args.no_rebuild,
        "sessions": args.sessions,
        "big_mb": args.big_mb,
        "stores": args.stores,
    }


if __name__ == "__main__":
    main(**options(sys.argv[1:]))
