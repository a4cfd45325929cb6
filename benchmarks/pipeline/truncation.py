"""Benchmark the two-stage truncation of tool output (DESIGN.md §4).

Run ``python benchmarks/pipeline/truncation.py`` (or ``python -m benchmarks.pipeline.truncation``);
`main()` returns the numbers as a dict.

1. First truncation: `offload_text(text, 32768, store)` on a 100 KB, 1 MB, 10 MB and 100 MB
   log/HTML output (multi-line, some non-ASCII), against just writing the same bytes to a
   file (``write(text.encode())`` + fsync, as `ToolResultStore.save` does). Target: at most
   3x the write alone.
2. Peak extra memory of that call (tracemalloc, the input string excluded), as a multiple of
   the tool output's UTF-8 size. Target: at most 3x.
3. Second truncation: `retruncate` of the resulting excerpt to `old_max_bytes` (4096).
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from agentscope_ctx.core.truncation._offload import offload_text
from agentscope_ctx.core.truncation._truncation import retruncate, utf8_len
from agentscope_ctx.stores._tool_results import ToolResultStore
from benchmarks._table import human

RECENT_MAX_BYTES = 32_768
OLD_MAX_BYTES = 4_096
SIZES = (100_000, 1_000_000, 10_000_000, 100_000_000)
TARGET_TIME_RATIO = 3.0
TARGET_MEMORY_RATIO = 3.0

_WORDS = ["request", "worker", "retry", "config", "parser", "timeout", "cache", "token"]
_NON_ASCII = ["données", "größe", "naïve", "配置文件", "错误", "ошибка", "→", "µs"]


def _block(rng: random.Random, target_bytes: int) -> str:
    """About `target_bytes` of mixed log and HTML lines, some with non-ASCII text."""
    lines: list[str] = []
    size = 0
    levels = ["INFO", "DEBUG", "WARNING", "ERROR"]
    while size < target_bytes:
        r = rng.random()
        if r < 0.6:
            line = (
                f"2026-01-{rng.randint(1, 28):02d}T12:{rng.randint(0, 59):02d}:"
                f"{rng.randint(0, 59):02d}Z {rng.choice(levels)} worker-{rng.randint(1, 8)} "
                f"{rng.choice(_WORDS)} id={rng.getrandbits(48):012x} "
                f"took {rng.random() * 900:.1f}ms status={rng.choice([200, 200, 404, 500])}"
            )
        elif r < 0.9:
            line = (
                f'<tr class="row-{rng.randint(0, 9999)}"><td>{rng.choice(_WORDS)}</td>'
                f"<td>{rng.randint(0, 10**6)}</td><td>{rng.choice(_WORDS)}</td></tr>"
            )
        else:
            line = (
                f"WARNING {rng.choice(_NON_ASCII)}: {rng.choice(_NON_ASCII)} "
                f"{rng.choice(_WORDS)} {rng.choice(_NON_ASCII)} ({rng.randint(0, 999)})"
            )
        lines.append(line)
        size += len(line.encode("utf-8")) + 1
    return "\n".join(lines) + "\n"


def build_output(size: int, seed: int = 0) -> str:
    """A realistic tool output of about `size` UTF-8 bytes: a ~256 KB block of log/HTML lines,
    repeated (cheap to build at 100 MB), cut at a line end, with an unfinished last line."""
    block = _block(random.Random(seed), min(size, 256_000))
    reps = size // utf8_len(block) + 1
    text = block * reps
    raw_cut = text.encode("utf-8")[:size].decode("utf-8", errors="ignore")
    return raw_cut


def _write_only(text: str, path: Path) -> None:
    with open(path, "wb") as file:
        file.write(text.encode("utf-8"))
        file.flush()
        os.fsync(file.fileno())


async def _best(fn: Callable[[], Awaitable[Any]], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = await fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def _clear(directory: Path) -> None:
    for entry in directory.iterdir():
        entry.unlink()


async def _bench_size(size: int, root: Path, repeat: int) -> dict[str, Any]:
    text = build_output(size, seed=size)
    n_bytes = utf8_len(text)
    store = ToolResultStore(root / "ctx", retention_days=1)
    write_dir = root / "write"
    write_dir.mkdir(exist_ok=True)

    async def write() -> None:
        await asyncio.to_thread(_write_only, text, write_dir / "out.txt")

    # Interleave, so that both see the same disk/cache conditions; best of `repeat`.
    first_times, write_times = [], []
    excerpt = ""
    for _ in range(repeat):
        start = time.perf_counter()
        excerpt = await offload_text(text, RECENT_MAX_BYTES, store)
        first_times.append(time.perf_counter() - start)
        _clear(store.dir)
        t, _ = await _best(write, 1)
        write_times.append(t)
    first_s, write_s = min(first_times), min(write_times)

    # Peak extra memory, in a separate run (tracemalloc slows allocation down).
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        out = await offload_text(text, RECENT_MAX_BYTES, store)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    _clear(store.dir)
    peak_extra = max(peak - base, 0)

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        _write_only(text, write_dir / "out.txt")
        _, write_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    write_peak_extra = max(write_peak - base, 0)
    del out

    # Second truncation of the excerpt (constant size: it never sees the full text).
    loops = 200
    start = time.perf_counter()
    for _ in range(loops):
        old = retruncate(excerpt, max_bytes=OLD_MAX_BYTES)
    retruncate_s = (time.perf_counter() - start) / loops

    time_ratio = first_s / write_s if write_s else float("inf")
    memory_ratio = peak_extra / n_bytes
    return {
        "bytes": n_bytes,
        "chars": len(text),
        "runs": repeat,
        "first_ms": first_s * 1e3,
        "write_ms": write_s * 1e3,
        "time_ratio": time_ratio,
        "first_mb_per_s": n_bytes / 1e6 / first_s,
        "peak_extra_bytes": peak_extra,
        "memory_ratio": memory_ratio,
        "write_peak_extra_bytes": write_peak_extra,
        "excerpt_bytes": utf8_len(excerpt),
        "retruncate_us": retruncate_s * 1e6,
        "retruncated_bytes": utf8_len(old),
        "meets_time_target": time_ratio <= TARGET_TIME_RATIO,
        "meets_memory_target": memory_ratio <= TARGET_MEMORY_RATIO,
    }


def _repeat_for(size: int) -> int:
    if size <= 1_000_000:
        return 7
    if size <= 10_000_000:
        return 3
    return 2


async def _run(sizes: Sequence[int]) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="bench_truncation_"))
    rows: dict[str, Any] = {}
    try:
        for size in sizes:
            rows[str(size)] = await _bench_size(size, root, _repeat_for(size))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "recent_max_bytes": RECENT_MAX_BYTES,
        "old_max_bytes": OLD_MAX_BYTES,
        "target_time_ratio": TARGET_TIME_RATIO,
        "target_memory_ratio": TARGET_MEMORY_RATIO,
        "sizes": rows,
    }


def report(result: dict[str, Any]) -> None:
    """Print the table for `result` (as returned by `run`)."""
    print(
        f"first truncation: offload_text(text, {result['recent_max_bytes']}, store) vs "
        "write+fsync of the same bytes"
    )
    print(
        f"targets: time <= {result['target_time_ratio']:.0f}x write, "
        f"peak extra memory <= {result['target_memory_ratio']:.0f}x tool output size"
    )
    header = (
        f"{'output':>8} {'runs':>4} {'first ms':>10} {'write ms':>10} {'ratio':>6} {'ok':>3}"
        f" {'MB/s':>7} {'peak extra':>11} {'x out':>6} {'ok':>3} {'write peak':>11}"
        f" {'retrunc us':>10}"
    )
    print(
        "(peak extra = tracemalloc peak during the call, input excluded; 'write peak' is the"
        " same for the write alone)"
    )
    print(header)
    print("-" * len(header))
    previous: dict[str, Any] | None = None
    for row in result["sizes"].values():
        print(
            f"{human(row['bytes']):>8} {row['runs']:>4} {row['first_ms']:10.2f}"
            f" {row['write_ms']:10.2f} {row['time_ratio']:6.2f}"
            f" {'yes' if row['meets_time_target'] else 'NO':>3}"
            f" {row['first_mb_per_s']:7.0f} {human(row['peak_extra_bytes']):>11}"
            f" {row['memory_ratio']:6.2f} {'yes' if row['meets_memory_target'] else 'NO':>3}"
            f" {human(row['write_peak_extra_bytes']):>11} {row['retruncate_us']:10.1f}"
        )
        previous = row
    rows = list(result["sizes"].values())
    if len(rows) >= 2 and previous is not None:
        a, b = rows[0], rows[-1]
        print(
            f"growth {human(a['bytes'])} -> {human(b['bytes'])} "
            f"(x{b['bytes'] / a['bytes']:.0f} bytes): first truncation "
            f"x{b['first_ms'] / a['first_ms']:.1f} time, write x{b['write_ms'] / a['write_ms']:.1f}"
            f"; retruncate x{b['retruncate_us'] / a['retruncate_us']:.2f} (works on the "
            f"{human(a['excerpt_bytes'])} excerpt only -> {human(a['retruncated_bytes'])})"
        )


def run(sizes: Sequence[int] = SIZES) -> dict[str, Any]:
    """Measure without printing."""
    return asyncio.run(_run(sizes))


def main(sizes: Sequence[int] = SIZES) -> dict[str, Any]:
    """Run the benchmark, print a report and return the numbers."""
    result = run(sizes)
    report(result)
    return result


if __name__ == "__main__":
    main()
