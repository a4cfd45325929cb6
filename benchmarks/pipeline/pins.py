"""Benchmark pinned messages that share a tool-call id (issue 29, item 6).

Run ``python -m benchmarks pins`` (or ``python -m benchmarks.pipeline.pins``); `main()` returns
the numbers as a dict. Line-neutral core: runs on 1.x and 2.x alike.

A user turn, then 200, 400, 800 pinned calls and results that all carry one call id (a
provider that reuses its ids), over `pin_max_share`: every pin is dropped, so every pin asks
for its unit. For each size:

1. ``before``: the walk `protected` used to make (from each pin over every message of each call
   id it meets: cubic), `walked_pins` below, timed once; ``after``: `protected` as it is
   (the units found once, union-find), the best of 3.
2. ``pipeline``: one whole `ContextPipeline.run` over those messages (which asks for the pins
   several times), the best of 3; and the same run over 400 unpinned messages for scale.

Growth is each time over the time at the previous size (2x the messages): ~2 is linear, ~8
cubic. Numbers only: nothing here asserts a time limit.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core.context._pins import PIN_MARK, is_pinned, protected
from agentscope_ctx.core.tokens._tokens import TokenCounter
from benchmarks.pipeline.step import ENCODING, _make_pipeline

SIZES = (200, 400, 800)
UNPINNED = 400
COUNTER = TokenCounter(ENCODING)


def walked_pins(
    msgs: Sequence[Msg], counts: Mapping[str, int], max_tokens: int
) -> tuple[set[str], int]:
    """`protected` as it was before issue 29 item 6 (a walk from each pin over the messages
    sharing a call): the "before" here, and the tests' reference on small inputs."""

    def ids(msg: Msg) -> set[str]:
        blocks = msg.content if isinstance(msg.content, list) else []
        return {str(b["id"]) for b in blocks if b.get("type") in ("tool_use", "tool_result")}

    by_call: dict[str, list[Msg]] = {}
    for msg in msgs:
        for call_id in ids(msg):
            by_call.setdefault(call_id, []).append(msg)
    kept: set[str] = set()
    used = dropped = 0
    for msg in reversed(msgs):
        if not is_pinned(msg) or msg.id in kept:
            continue
        group = {msg.id: msg}
        todo = [msg]
        while todo:
            for call_id in ids(todo.pop()):
                for other in by_call.get(call_id, []):
                    if other.id not in group:
                        group[other.id] = other
                        todo.append(other)
        cost = sum(counts.get(m_id, 0) for m_id in group if m_id not in kept)
        if used + cost > max_tokens:
            dropped += 1
            continue
        kept.update(group)
        used += cost
    return kept, dropped


def shared_calls(n: int, *, pinned: bool = True, make: Callable[..., Msg] = Msg) -> list[Msg]:
    """A user turn, then `n` calls and results (pinned or not) all carrying the call id
    ``same``: one unit of `n` messages. `make` builds each message (a `Msg` by default)."""
    marks = {PIN_MARK: True} if pinned else {}
    msgs: list[Msg] = [make("user", "go", "user")]
    for i in range(n // 2):
        use = {"type": "tool_use", "id": "same", "name": "shell", "input": {"cmd": f"ls {i}"}}
        out = [{"type": "text", "text": f"output {i}\n" * 20}]
        res = {"type": "tool_result", "id": "same", "name": "shell", "output": out}
        msgs.append(make("bot", [use], "assistant", metadata=dict(marks)))
        msgs.append(make("system", [res], "system", metadata=dict(marks)))
    return msgs


def _timed(run: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


async def _pipeline_seconds(msgs: list[Msg], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        tmp = Path(tempfile.mkdtemp(prefix="bench-pins-"))
        try:
            pipe, memory = _make_pipeline(tmp, 4_000, COUNTER)
            await memory.add([Msg.from_dict(m.to_dict()) for m in msgs])  # fresh each time
            start = time.perf_counter()
            await pipe.run()
            best = min(best, time.perf_counter() - start)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return best


def main(sizes: Sequence[int] = SIZES, unpinned: int = UNPINNED) -> dict[str, Any]:
    rows: dict[str, dict[str, float]] = {}
    print(f"pinned calls sharing one call id, over pin_max_share (sizes {list(sizes)})")
    print(f"{'pinned':>7} {'before s':>9} {'after ms':>9} {'pipeline ms':>12}  growth b/a/p")
    previous: dict[str, float] | None = None
    for n in sizes:
        msgs = shared_calls(n)
        counts = {str(m.id): 50 for m in msgs}
        before = _timed(lambda: walked_pins(msgs, counts, 1_000), 1)  # noqa: B023
        after = _timed(lambda: protected(msgs, counts, 1_000), 3)  # noqa: B023
        whole = asyncio.run(_pipeline_seconds(msgs))
        row = {"before_s": before, "after_s": after, "pipeline_s": whole}
        growth = (
            "/".join(f"{row[k] / previous[k]:.1f}" for k in row) if previous is not None else "-"
        )
        print(f"{n:>7} {before:>9.2f} {after * 1e3:>9.2f} {whole * 1e3:>12.1f}  {growth}")
        rows[str(n)] = {k: round(v, 6) for k, v in row.items()}
        previous = row
    plain = asyncio.run(_pipeline_seconds(shared_calls(unpinned, pinned=False)))
    print(f"{unpinned} unpinned: pipeline {plain * 1e3:.1f} ms")
    return {"sizes": rows, "unpinned": {"messages": unpinned, "pipeline_s": round(plain, 5)}}


if __name__ == "__main__":
    main()
