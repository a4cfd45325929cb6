"""Benchmark recall (DESIGN.md §10): the search index against the size of the history.

Run ``python -m benchmarks search`` (all benchmarks: ``python -m benchmarks``), or this module
directly to choose the sizes::

    python -m benchmarks.store.search --points 1000:10 10000:100 100000:1024
    python -m benchmarks.store.search --queries-only

Each point is MESSAGES:OUTPUT_MB: that many messages in ``dialog/`` (about 1 KB each, spread
over days) and that many MB of saved tool output in ``tool_result/`` (log files of 100 KB to
10 MB). The environment variable ``AGENTSCOPE_CTX_BENCH_SEARCH`` (e.g. ``"100000:1024"``)
sets the points of ``python -m benchmarks search``. For each point:

1. build: indexing the whole history from scratch (what a rebuild costs), in MB/s;
2. size: the index on disk, against the history's bytes;
3. search latency p50/p95 of `SearchIndex.search` as the agent calls it (catch-up check of
   every file included) over rare words, common words, phrases, prefixes, filtered and
   missing queries; and the catch-up check alone.

Then, at one size, the indexing cost of a saved output (100 KB, 1 MB, 10 MB) against the file
write itself (`ToolResultStore.save`: write + fsync). Then long queries (issue #19, item 9:
up to 100,000 CJK characters) over a CJK history, with the time another agent's save takes
while one runs; and a save (output + dialog record) and a search while another process holds
the index (a write transaction, or ``index/.lock`` with the index missing; issue #19, item
8). Numbers only: no target is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._search import INDEX_AT_SAVE_BYTES, Filters, SearchIndex, SearchResult
from agentscope_ctx.stores._tool_results import ToolResultStore

DEFAULT_POINTS = ((1_000, 10), (10_000, 100), (100_000, 300))
SAVE_SIZES = (100_000, 1_000_000, 10_000_000)
ENV = "AGENTSCOPE_CTX_BENCH_SEARCH"
_WORDS = "request worker retry config parser timeout cache token socket deploy queue".split()
_LEVELS = ("INFO", "INFO", "DEBUG", "WARNING", "ERROR")


def _log_line(rng: random.Random, i: int) -> str:
    return (
        f"2026-12-{rng.randint(1, 28):02d}T12:{rng.randint(0, 59):02d}:{i % 60:02d}Z "
        f"{rng.choice(_LEVELS)} worker-{rng.randint(1, 16)} {rng.choice(_WORDS)} "
        f"{rng.choice(_WORDS)} id={rng.getrandbits(40):010x} took {rng.random() * 900:.1f}ms "
        f"status={rng.choice((200, 200, 200, 404, 500))}"
    )


def build_log(size: int, seed: int, facts: Sequence[str] = ()) -> str:
    """About `size` bytes of log lines; `facts` planted at evenly spread lines."""
    rng = random.Random(seed)
    block = [_log_line(rng, i) for i in range(2_000)]
    line_bytes = sum(len(line) + 1 for line in block) / len(block)
    lines = [block[i % len(block)] for i in range(max(int(size / line_bytes), 1))]
    for k, fact in enumerate(facts):
        lines[(k + 1) * len(lines) // (len(facts) + 1)] += f" {fact}"
    return "\n".join(lines) + "\n"


def _messages(n: int, seed: int, facts: dict[int, str]) -> list[Msg]:
    rng = random.Random(seed)
    msgs: list[Msg] = []
    for i in range(n):
        day, minute = 1 + (i * 28) // max(n, 1), (i * 7) % 1440
        kind = i % 4
        if kind == 0:
            msg = Msg("user", f"please look at {rng.choice(_WORDS)} issue {i} " * 3, "user")
        elif kind == 1:
            call = {"command": f"grep -n {rng.choice(_WORDS)} /var/log/app{i % 9}.log"}
            block = {"type": "tool_use", "id": f"c{i}", "name": "run_shell", "input": call}
            msg = Msg("agent", [block], "assistant")
        elif kind == 2:
            out = "\n".join(_log_line(rng, j) for j in range(6))
            block = {"type": "tool_result", "id": f"c{i - 1}", "name": "run_shell", "output": out}
            msg = Msg("system", [block], "system")  # type: ignore[list-item]
        else:
            msg = Msg("agent", "The " + " ".join(rng.choices(_WORDS, k=120)), "assistant")
        if i in facts:
            msg.content = f"{facts[i]} " + (msg.content if isinstance(msg.content, str) else "")
        msg.timestamp = f"2026-12-{day:02d} {minute // 60:02d}:{minute % 60:02d}:00.000"
        msgs.append(msg)
    return msgs


async def build_history(root: Path, messages: int, output_mb: float) -> dict[str, Any]:
    """Write the history; returns the planted facts (query -> where) and the sizes."""
    facts_msgs = {i: f"ticket MSG{i}Q" for i in range(7, messages, max(messages // 12, 1))}
    dialog = DialogStore(root)
    msgs = _messages(messages, seed=messages, facts=facts_msgs)
    for at in range(0, len(msgs), 5_000):
        await dialog.append(msgs[at : at + 5_000])
    store = ToolResultStore(root, 7)
    rng = random.Random(1)
    left, k, facts_out = int(output_mb * 1e6), 0, []
    while left > 0:
        size = min(left, int(rng.choice((1e5, 3e5, 1e6, 3e6, 1e7))))
        fact = f"incident OUT{k}Z"
        await asyncio.to_thread(store.save, build_log(size, seed=k, facts=[fact]))
        facts_out.append(fact)
        left -= size
        k += 1
    dialog_bytes = sum(p.stat().st_size for p in (root / "dialog").glob("*.jsonl"))
    output_bytes = sum(p.stat().st_size for p in (root / "tool_result").glob("*.txt"))
    return {
        "facts": [f.split(" ", 1)[1] for f in [*facts_msgs.values(), *facts_out]],
        "dialog_bytes": dialog_bytes,
        "output_bytes": output_bytes,
        "output_files": k,
    }


def _index_bytes(root: Path) -> int:
    index = SearchIndex(root)
    index.db.run(lambda db: db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
    index.close()
    return sum(p.stat().st_size for p in (root / "index").rglob("*") if p.is_file())


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def _queries(facts: list[str]) -> list[tuple[str, str, Filters]]:
    rare = facts[:: max(len(facts) // 10, 1)][:10]
    queries = [("rare", f, Filters()) for f in rare]
    queries += [("rare_scoped", f, Filters(agent="nobody", role="tool")) for f in rare[:5]]
    queries += [("common", w, Filters()) for w in ("worker timeout", "retry", "status 500")]
    queries += [("phrase", q, Filters()) for q in ('"worker-3 retry"', '"took 1"')]
    queries += [("prefix", q, Filters()) for q in ("confi*", "sock*")]
    queries += [("miss", q, Filters()) for q in ("zzzqx", "nothing here at all")]
    return queries


def bench_point(root: Path, messages: int, output_mb: float) -> dict[str, Any]:
    history = asyncio.run(build_history(root, messages, output_mb))
    total = history["dialog_bytes"] + history["output_bytes"]
    index = SearchIndex(root)
    start = time.perf_counter()
    index.catch_up()
    build_s = time.perf_counter() - start
    found = sum(
        1 for fact in history["facts"] if index.search(fact, limit=1, catch_up_seconds=None).hits
    )
    latencies: dict[str, list[float]] = {}
    for _ in range(3):
        for kind, query, filters in _queries(history["facts"]):
            start = time.perf_counter()
            index.search(query, filters, limit=5)
            latencies.setdefault(kind, []).append(time.perf_counter() - start)
    check = []
    for _ in range(20):
        start = time.perf_counter()
        index.catch_up()
        check.append(time.perf_counter() - start)
    index.close()
    every = [t for values in latencies.values() for t in values]
    size = _index_bytes(root)
    return {
        "messages": messages,
        "output_mb": output_mb,
        "output_files": history["output_files"],
        "history_bytes": total,
        "dialog_bytes": history["dialog_bytes"],
        "output_bytes": history["output_bytes"],
        "build_s": build_s,
        "build_mb_per_s": total / 1e6 / build_s,
        "index_bytes": size,
        "index_ratio": size / total,
        "facts_found": f"{found}/{len(history['facts'])}",
        "search_p50_ms": _percentile(every, 0.5) * 1e3,
        "search_p95_ms": _percentile(every, 0.95) * 1e3,
        "by_kind_p50_ms": {k: statistics.median(v) * 1e3 for k, v in latencies.items()},
        "catch_up_check_ms": statistics.median(check) * 1e3,
    }


def bench_save(root: Path, sizes: Sequence[int]) -> dict[str, Any]:
    """Per saved output: the save (write + fsync), what indexing adds to it (the whole
    indexing up to `INDEX_AT_SAVE_BYTES`, else recording the owner), and the whole indexing
    (for a larger output, paid by the next search). Best of 3, interleaved."""
    index = SearchIndex(root)
    plain = ToolResultStore(root, 7)
    rows: dict[str, Any] = {}
    for size in sizes:
        text = build_log(size, seed=size)
        saves, at_save, whole = [], [], []
        for _ in range(3):
            start = time.perf_counter()
            path = plain.save(text)
            saved = time.perf_counter()
            index.output_saved(path, agent="bench")
            notified = time.perf_counter()
            index.catch_up()
            done = time.perf_counter()
            saves.append(saved - start)
            at_save.append(notified - saved)
            whole.append(done - saved)
        save_s, at_save_s, whole_s = min(saves), min(at_save), min(whole)
        rows[str(size)] = {
            "bytes": len(text.encode("utf-8")),
            "save_ms": save_s * 1e3,
            "at_save_ms": at_save_s * 1e3,
            "at_save_to_save": at_save_s / save_s,
            "indexed_at_save": size <= INDEX_AT_SAVE_BYTES,
            "index_ms": whole_s * 1e3,
            "index_to_save": whole_s / save_s,
            "index_mb_per_s": size / 1e6 / whole_s,
        }
    index.close()
    return rows


_CJK = "数据库连接失败用户请求超时配置缓存令牌队列部署重试解析器日志服务"
QUERY_SIZES = (1_000, 20_000, 100_000)


def bench_long_query(
    root: Path, sizes: Sequence[int] = QUERY_SIZES, lines: int = 20_000
) -> dict[str, Any]:
    """Search time of CJK queries of `sizes` characters (and of as many characters of
    space-separated words) over 4 x `lines` CJK lines (4 MB by default); and how long another
    agent's save (output + notification) takes while such a search runs in a thread (median
    of 5)."""
    rng = random.Random(9)
    index = SearchIndex(root)
    store = ToolResultStore(root, 7, on_saved=lambda p: index.output_saved(p, agent="a"))
    for _ in range(4):
        text = "\n".join("".join(rng.choice(_CJK) for _ in range(60)) for _ in range(lines))
        store.save(text + "\n")
    index.catch_up()
    other = ToolResultStore(root, 7, on_saved=lambda p: index.output_saved(p, agent="b"))
    rows: dict[str, Any] = {}
    for size in sizes:
        for kind, query in (
            ("cjk", "".join(rng.choice(_CJK) for _ in range(size))),
            ("words", " ".join(f"w{i}" for i in range(size // 6))[:size]),
        ):
            times, saves = [], []
            for _ in range(5):
                start = time.perf_counter()
                index.search(query, limit=5)
                times.append(time.perf_counter() - start)
                thread = threading.Thread(target=index.search, args=(query,))
                thread.start()
                start = time.perf_counter()
                other.save("another agent's output\n")
                saves.append(time.perf_counter() - start)
                thread.join()
            rows[f"{kind}:{size}"] = {
                "search_ms": statistics.median(times) * 1e3,
                "save_during_ms": statistics.median(saves) * 1e3,
            }
    index.close()
    return rows


_HOLDER = """
import fcntl, os, sqlite3, sys
index = os.path.join(sys.argv[1], "index")
if sys.argv[2] == "write":
    name = open(os.path.join(index, "current")).read().strip()
    db = sqlite3.connect(os.path.join(index, name), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
else:
    os.makedirs(index, exist_ok=True)
    fd = os.open(os.path.join(index, ".lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
print("READY", flush=True)
sys.stdin.read()
"""


def bench_busy(root: Path, search_seconds: float = 1.0) -> dict[str, Any]:
    """While another process holds the index (a write transaction; ``.lock`` with the index
    missing): a saved output, a dialog append, and a search given `search_seconds`."""
    rows: dict[str, Any] = {}
    for mode in ("write", "lock"):
        folder = root / mode
        index = SearchIndex(folder)
        store = ToolResultStore(folder, 7, on_saved=partial(index.output_saved, agent="a"))
        dialog = DialogStore(folder, record_fields={"agent": "a"}, on_append=index.dialog_appended)
        store.save("the history so far\n")
        index.close()
        if mode == "lock":
            shutil.rmtree(folder / "index")
        holder = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(folder), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == "READY"
        try:
            start = time.perf_counter()
            store.save("an output saved meanwhile\n")
            saved = time.perf_counter()
            asyncio.run(dialog.append([Msg("user", "a record appended meanwhile", "user")]))
            appended = time.perf_counter()
            result: SearchResult = index.search("meanwhile", catch_up_seconds=search_seconds)
            searched = time.perf_counter()
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait()
        after = index.search("meanwhile", limit=5)
        index.close()
        rows[mode] = {
            "save_ms": (saved - start) * 1e3,
            "append_ms": (appended - saved) * 1e3,
            "search_ms": (searched - appended) * 1e3,
            "search_busy": result.busy,
            "hits_during": len(result.hits),
            "hits_after": len(after.hits),
        }
    return rows


def _print(result: dict[str, Any]) -> None:
    if result["points"]:
        _print_points(result)
    if result["save"]:
        _print_save(result)
    _print_queries(result)


def _print_points(result: dict[str, Any]) -> None:
    print("search index against history size (build = indexing from scratch)")
    print(
        f"  {'messages':>9} {'output':>8} {'history':>9} {'build s':>8} {'MB/s':>6} "
        f"{'index':>9} {'ratio':>6} {'p50 ms':>7} {'p95 ms':>7} {'check ms':>8} found"
    )
    for row in result["points"].values():
        print(
            f"  {row['messages']:>9} {row['output_mb']:>6g}MB {row['history_bytes'] / 1e6:>7.1f}MB"
            f" {row['build_s']:>8.1f} {row['build_mb_per_s']:>6.1f}"
            f" {row['index_bytes'] / 1e6:>7.1f}MB {row['index_ratio']:>6.2f}"
            f" {row['search_p50_ms']:>7.1f} {row['search_p95_ms']:>7.1f}"
            f" {row['catch_up_check_ms']:>8.2f} {row['facts_found']}"
        )


def _print_save(result: dict[str, Any]) -> None:
    print("indexing a saved output, against saving it (write + fsync)")
    for size, row in result["save"].items():
        when = "at save" if row["indexed_at_save"] else "at the next search"
        print(
            f"  {int(size) / 1e6:>5g} MB: save {row['save_ms']:.1f} ms; added to the save "
            f"{row['at_save_ms']:.1f} ms ({row['at_save_to_save']:.1f}x); indexing "
            f"{row['index_ms']:.1f} ms ({row['index_to_save']:.1f}x, "
            f"{row['index_mb_per_s']:.1f} MB/s) {when}"
        )


def _print_queries(result: dict[str, Any]) -> None:
    if result.get("long_query"):
        print("long queries over CJK text (4 MB by default; median of 5)")
        for name, row in result["long_query"].items():
            kind, size = name.split(":")
            print(
                f"  {kind:>5} {int(size):>7} chars: search {row['search_ms']:.1f} ms; another "
                f"agent's save meanwhile {row['save_during_ms']:.1f} ms"
            )
    if result.get("busy"):
        print("while another process holds the index (the search may wait 1 s by default)")
        for mode, row in result["busy"].items():
            what = "a write transaction" if mode == "write" else ".lock, index missing"
            print(
                f"  {what:>21}: save {row['save_ms']:.1f} ms, dialog append "
                f"{row['append_ms']:.1f} ms, search {row['search_ms']:.0f} ms "
                f"(busy: {row['search_busy']}, {row['hits_during']} hits); once released, "
                f"{row['hits_after']} hits"
            )


def parse_points(text: str) -> list[tuple[int, float]]:
    """``"1000:10 100000:1024"`` -> [(1000, 10.0), (100000, 1024.0)]."""
    points = []
    for item in text.replace(",", " ").split():
        messages, _, mb = item.partition(":")
        points.append((int(messages), float(mb or 0)))
    return points


def main(
    points: Sequence[tuple[int, float]] | None = None,
    save_sizes: Sequence[int] = SAVE_SIZES,
    query_sizes: Sequence[int] = QUERY_SIZES,
    query_lines: int = 20_000,
    busy_wait: float = 1.0,
) -> dict[str, Any]:
    """Run the benchmark; returns the numbers (also printed)."""
    if points is None:
        points = parse_points(os.environ[ENV]) if os.environ.get(ENV) else DEFAULT_POINTS
    base = Path(tempfile.mkdtemp(prefix="bench_search_"))
    result: dict[str, Any] = {"points": {}, "save": {}, "long_query": {}, "busy": {}}
    try:
        for messages, output_mb in points:
            root = base / f"{messages}_{output_mb:g}"
            result["points"][f"{messages}:{output_mb:g}"] = bench_point(root, messages, output_mb)
            shutil.rmtree(root, ignore_errors=True)
        result["save"] = bench_save(base / "save", save_sizes)
        if query_sizes:
            result["long_query"] = bench_long_query(base / "query", query_sizes, query_lines)
            result["busy"] = bench_busy(base / "busy", busy_wait)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    _print(result)
    return result


def options(argv: Sequence[str]) -> dict[str, Any]:
    """`main`'s keyword arguments from the command line's options (this module's, and those
    after ``search`` in ``python -m benchmarks search ...``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", nargs="+", help="MESSAGES:OUTPUT_MB ...")
    parser.add_argument(
        "--queries-only", action="store_true", help="only long queries and a busy index"
    )
    args = parser.parse_args(argv)
    if args.queries_only:
        return {"points": [], "save_sizes": ()}
    return {"points": parse_points(" ".join(args.points)) if args.points else None}


if __name__ == "__main__":
    main(**options(sys.argv[1:]))
    sys.exit(0)
