"""Benchmark: indexing a saved output of one long line against the same text as short lines
(issue 46 item 10), at 12, 24 and 48 MB.

Run ``python -m benchmarks.store.one_line`` (``--sizes 12 24 48``, ``--shapes one-line
lines``). For each size and shape: a local store with that output saved, its whole index
built (`SearchIndex.catch_up`, as the background does), timed; then each row's growth from
the size before it (a linear cost doubles when the size doubles). Numbers only: no time is
asserted (tests/stores/test_search_long_line.py pins the chunking by counts).
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from agentscope_ctx.stores._search import SearchIndex
from agentscope_ctx.stores._tool_results import ToolResultStore

from .._table import print_table

SIZES_MB = (12, 24, 48)
SHAPES = ("one-line", "lines")
_WORDS_PER_LINE = 12


def _text(mb: int, shape: str, seed: int = 46) -> str:
    """`mb` MB of words (3,000 distinct, as in a log or a JSON dump), on one line or
    `_WORDS_PER_LINE` to a line."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocabulary = ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(3000)]
    words, size = [], 0
    while size < mb << 20:
        word = rng.choice(vocabulary)
        words.append(word)
        size += len(word) + 1
    if shape == "one-line":
        return " ".join(words)
    return "\n".join(
        " ".join(words[k : k + _WORDS_PER_LINE]) for k in range(0, len(words), _WORDS_PER_LINE)
    )


def index_seconds(mb: int, shape: str) -> float:
    """Seconds to index a store holding one saved output of `mb` MB of `shape`."""
    root = Path(tempfile.mkdtemp(prefix="agentscope-ctx-one-line-"))
    try:
        ToolResultStore(root, 7, owner=("bench", "s")).save(_text(mb, shape))
        index = SearchIndex(root)
        start = time.perf_counter()
        index.catch_up()
        seconds = time.perf_counter() - start
        index.close()
        return seconds
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(sizes: tuple[int, ...] = SIZES_MB, shapes: tuple[str, ...] = SHAPES) -> dict[str, dict]:
    """Time each shape at each size; print the table; return {shape: {mb: seconds}}."""
    times: dict[str, dict[int, float]] = {}
    rows = []
    for shape in shapes:
        times[shape] = {}
        before: tuple[int, float] | None = None
        for mb in sizes:
            seconds = times[shape][mb] = index_seconds(mb, shape)
            growth = ""
            if before is not None:
                ratio = seconds / before[1]
                growth = f"{ratio:.2f}x for {mb / before[0]:.1f}x the size"
            rows.append(
                f"{shape:<9} {mb:>5} MB {seconds:>9.1f} s {mb / seconds:>7.2f} MB/s  {growth}"
            )
            before = (mb, seconds)
    print_table(f"{'shape':<9} {'size':>8} {'index':>11} {'speed':>12}  growth", rows)
    return {shape: {str(mb): s for mb, s in by.items()} for shape, by in times.items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES_MB), help="MB")
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    args = parser.parse_args()
    main(tuple(args.sizes), tuple(args.shapes))
