"""The core's steady step (a tool call and its result added, then a pipeline run; nothing
compacts) does the same work whatever the history: it looks at the new messages, not at
every message for a pin or an output kept whole (the adapter's step, with the steps file:
tests/agentscope2/test_mirror_steady.py)."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

from agentscope_ctx.core.tokens._tokens import TokenCounter
from benchmarks.pipeline.step import ENCODING, _make_pipeline, build_history, tool_pair


async def _calls_per_step(root: Path, history: int) -> int:
    """The most Python calls of one steady step after `history` messages."""
    pipeline, memory = _make_pipeline(root, 10_000_000, TokenCounter(ENCODING))
    await memory.add(build_history(history, seed=1))
    await pipeline.run()
    rng = random.Random(2)
    most = 0
    for _ in range(4):
        pair = tool_pair(rng)
        calls = 0

        def count(frame: Any, event: str, arg: Any) -> None:
            nonlocal calls
            if event in ("call", "c_call"):
                calls += 1

        sys.setprofile(count)
        try:
            await memory.add(pair)
            report = await pipeline.run()
        finally:
            sys.setprofile(None)
        assert report.compacted == 0
        most = max(most, calls)
    return most


async def test_a_steady_pipeline_step_does_not_grow_with_the_history(tmp_path: Path) -> None:
    """Issue 33: each step passed over every message for the pins (their union-find, even
    with no pin) and the outputs kept whole: 56,823 calls at 1,200 messages against 2,851 at
    30. Counted in calls, not time: the same at 1,200 messages as at 30."""
    small = await _calls_per_step(tmp_path / "small", 30)
    large = await _calls_per_step(tmp_path / "large", 1_200)
    assert large <= small * 1.1, (small, large)
