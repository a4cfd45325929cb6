"""Benchmark `agentscope_ctx.TokenCounter`: cold vs cached history counts, raw throughput.

Run ``python benchmarks/pipeline/tokens.py``; `main()` returns the numbers as a dict.

1. A deterministic 500-message agent history (~150K tokens): user and assistant text, tool
   calls and their results (code, logs, HTML), counted cold, then again unchanged (warm).
2. `count_text` vs tiktoken's own `encode_ordinary` on the same 10 MB text: our overhead.
3. How the warm recount grows with the history (100, 500, 2000 messages).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from typing import Any

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core.tokens._tokens import TokenCounter, _encode_len

WORDS = (
    "the agent reads a file and then calls the tool again because the test failed with an "
    "error in parse config while the user asked to keep the output short and exact"
).split()
CODE_NAMES = ["config", "parser", "result", "items", "path", "buffer", "retry", "token"]


def _prose(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    return " ".join(words).capitalize() + "."


def _code(rng: random.Random, n_lines: int) -> str:
    lines = []
    for i in range(n_lines):
        a, b = rng.choice(CODE_NAMES), rng.choice(CODE_NAMES)
        lines.append(f"    {a}_{i} = {b}.get({rng.randint(0, 999)!r}, default=None)  # {a}")
    return "def handler(request):\n" + "\n".join(lines) + "\n    return None\n"


def _log(rng: random.Random, n_lines: int) -> str:
    levels = ["INFO", "DEBUG", "WARNING", "ERROR"]
    return "\n".join(
        f"2026-01-{rng.randint(1, 28):02d} 12:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} "
        f"{rng.choice(levels)} worker-{rng.randint(1, 8)} request id={rng.getrandbits(48):012x} "
        f"took {rng.random() * 900:.1f}ms status={rng.choice([200, 200, 404, 500])}"
        for _ in range(n_lines)
    )


def _html(rng: random.Random, n_rows: int) -> str:
    rows = "".join(
        f'<tr class="row-{i}"><td>{rng.choice(WORDS)}</td><td>{rng.randint(0, 10**6)}</td></tr>\n'
        for i in range(n_rows)
    )
    return f"<html><body><table>\n{rows}</table></body></html>"


def build_history(n_messages: int, seed: int = 0) -> list[Msg]:
    """A deterministic agent history: ~300 tokens per message on average."""
    rng = random.Random(seed)
    msgs: list[Msg] = []
    while len(msgs) < n_messages:
        kind = rng.random()
        if kind < 0.15:
            msgs.append(Msg("user", _prose(rng, rng.randint(10, 120)), "user"))
        elif kind < 0.3:
            msgs.append(Msg("agent", _prose(rng, rng.randint(20, 200)), "assistant"))
        else:
            call_id = f"call_{rng.getrandbits(64):016x}"
            tool, output = rng.choice(
                [
                    ("read_file", _code(rng, rng.randint(5, 60))),
                    ("run_shell", _log(rng, rng.randint(5, 40))),
                    ("fetch_url", _html(rng, rng.randint(5, 50))),
                ]
            )
            arguments = {"path": f"src/{rng.choice(CODE_NAMES)}.py", "limit": rng.randint(1, 500)}
            use = {"type": "tool_use", "id": call_id, "name": tool, "input": arguments}
            result = {"type": "tool_result", "id": call_id, "name": tool, "output": output}
            msgs.append(Msg("agent", [{"type": "text", "text": "Checking."}, use], "assistant"))
            msgs.append(Msg("system", [result], "system"))
    return msgs[:n_messages]


async def _timed(coro_factory: Any, repeat: int = 1) -> tuple[float, Any]:
    """Median seconds of `repeat` runs, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = await coro_factory()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


async def _run() -> dict[str, Any]:
    counter = TokenCounter("o200k_base")
    history = build_history(500)
    cold_s, tokens = await _timed(lambda: TokenCounter("o200k_base").count_msgs(history), 3)
    await counter.count_msgs(history)
    warm_s, warm_tokens = await _timed(lambda: counter.count_msgs(history), repeat=7)
    assert warm_tokens == tokens

    text: list[str] = []
    rng = random.Random(1)
    while sum(len(part) for part in text) < 10_000_000:
        text += [_code(rng, 40), _log(rng, 30), _html(rng, 30), _prose(rng, 200)]
    big = "\n".join(text)
    mb = len(big.encode()) / 1e6
    ours_s, _ = await _timed(lambda: counter.count_text(big))
    encoder = counter._encoder
    raw_s = chunked_s = 0.0
    if encoder is not None:
        start = time.perf_counter()
        encoder.encode_ordinary(big)
        raw_s = time.perf_counter() - start
        start = time.perf_counter()
        _encode_len(encoder, big)  # what count_text runs, minus the worker thread
        chunked_s = time.perf_counter() - start

    scaling = {}
    for n in (100, 500, 2000):
        msgs = build_history(n, seed=n)
        scaled = TokenCounter("o200k_base")
        cold, _ = await _timed(lambda msgs=msgs, c=scaled: c.count_msgs(msgs))
        warm, _ = await _timed(lambda msgs=msgs, c=scaled: c.count_msgs(msgs), repeat=7)
        scaling[n] = {
            "cold_ms": cold * 1e3,
            "warm_ms": warm * 1e3,
            "warm_us_per_msg": warm / n * 1e6,
        }

    return {
        "backend": counter.backend,
        "history_messages": len(history),
        "history_tokens": tokens,
        "cold_ms": cold_s * 1e3,
        "warm_ms": warm_s * 1e3,
        "warm_speedup": cold_s / warm_s,
        "text_mb": mb,
        "count_text_mb_per_s": mb / ours_s,
        "encode_ordinary_mb_per_s": mb / raw_s if raw_s else None,
        "count_text_overhead": ours_s / raw_s if raw_s else None,
        "chunked_in_loop_mb_per_s": mb / chunked_s if chunked_s else None,
        "warm_scaling": scaling,
        "cache_info": counter.cache_info(),
    }


def main() -> dict[str, Any]:
    """Run the benchmark, print a report and return the numbers."""
    result = asyncio.run(_run())
    in_loop = result["chunked_in_loop_mb_per_s"] or 0
    print(f"backend: {result['backend']}")
    print(
        f"history: {result['history_messages']} messages, {result['history_tokens']:,} tokens\n"
        f"  cold count_msgs: {result['cold_ms']:8.2f} ms (median of 3 new counters)\n"
        f"  warm count_msgs: {result['warm_ms']:8.2f} ms (median of 7)\n"
        f"  speedup:         {result['warm_speedup']:8.1f}x (target >= 50x)"
    )
    print(
        f"throughput on {result['text_mb']:.1f} MB: count_text {result['count_text_mb_per_s']:.2f}"
        f" MB/s, encode_ordinary {result['encode_ordinary_mb_per_s'] or 0:.2f} MB/s,"
        f" overhead x{result['count_text_overhead'] or 0:.2f}\n"
        f"  (the same chunked encoding on the main thread: {in_loop:.2f} MB/s;"
        " tiktoken is slower in a worker thread)"
    )
    print("warm recount by history size:")
    for n, row in result["warm_scaling"].items():
        print(
            f"  {n:5d} msgs: cold {row['cold_ms']:8.2f} ms, warm {row['warm_ms']:7.3f} ms"
            f" ({row['warm_us_per_msg']:.2f} us/msg)"
        )
    return result


if __name__ == "__main__":
    main()
