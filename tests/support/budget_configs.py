"""The configurations the small-budget properties draw, shared by both lines' tests
(tests/core/test_budget_small.py on 1.x, tests/agentscope2/test_budget.py on 2.x): settings as a user may
write them, some of them refused at load; and the `fetch` tool of the parallel-call sessions
(tests/agentscope1/test_budget_parallel.py, tests/agentscope2/test_budget.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import hypothesis
from hypothesis import currently_in_test_context
from hypothesis import strategies as st

_limit = st.sampled_from([1_024, 1_500, 4_096, 32_768])


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    """Settings as a user may write them (some of them refused)."""
    recent = draw(_limit)
    trigger = draw(st.sampled_from([0.5, 0.6, 0.75, 0.9, 1.0]))
    return {
        "max_input_tokens": draw(st.integers(1_000, 6_000)),
        "compact_trigger_ratio": trigger,
        "keep_recent_ratio": draw(st.sampled_from([0.1, 0.25, 0.4])),
        "memory_max_tokens": draw(st.sampled_from([0, 300, 2_000])),
        "tool_result": {
            "recent_n": draw(st.integers(0, 5)),
            "recent_max_bytes": recent,
            "old_max_bytes": min(draw(_limit), recent),
            "mask_after": draw(st.none() | st.integers(0, 10)),
            "recent_max_share": draw(st.none() | st.sampled_from([0.05, 0.15, 0.5, 1.0])),
        },
        "compactor": {"max_input_tokens": draw(st.none() | st.sampled_from([1_000, 100_000]))},
        "recall": {
            "enabled": draw(st.booleans()),
            "eviction_index_max_chars": draw(st.sampled_from([200, 1_200, 6_000])),
        },
    }


def note_outcome(outcome: str) -> None:
    """How a config ended, for `--hypothesis-show-statistics` (within a Hypothesis test)."""
    if currently_in_test_context():
        hypothesis.event(outcome)


AT_1000 = {
    "max_input_tokens": 1_000,
    "compact_trigger_ratio": 0.5,
    "keep_recent_ratio": 0.1,
    "memory_max_tokens": 0,
    "tool_result": {
        "recent_n": 0,
        "recent_max_bytes": 1_024,
        "old_max_bytes": 1_024,
        "mask_after": None,
        "recent_max_share": None,
    },
    "compactor": {"max_input_tokens": None},
    "recall": {"enabled": False, "eviction_index_max_chars": 200},
}


def fetch_tool(words: str) -> Callable[[int, int, int], Awaitable[str]]:
    """The `fetch` tool of a parallel-call session: page `n` of `size` bytes (lines ending in
    `words`), after yielding to the event loop `yields` times (how long it takes)."""

    async def fetch(n: int, size: int, yields: int) -> str:
        """Fetch a page.

        Args:
            n (int): which page.
            size (int): its size in bytes.
            yields (int): how long it takes.
        """
        for _ in range(yields):
            await asyncio.sleep(0)
        return "".join(f"line {i} of page {n}: words {i * 7} {words}\n" for i in range(size // 40))

    return fetch
