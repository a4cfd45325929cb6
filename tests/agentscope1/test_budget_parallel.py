"""Issue 19, item 5: parallel tool calls (1.x `ReActAgent(parallel_tool_calls=True)`) at a
32k budget with the default settings: every prompt within the budget.

The tools and the compactor's model yield to the event loop a drawn number of times, so the
order in which parallel outputs land (before, during or after a compaction run by another
call's post-acting step) is drawn by Hypothesis and replayed deterministically.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(reason_1x("parallel tool calls of a 1.x ReActAgent"), allow_module_level=True)

from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg
from agentscope.model import ChatResponse
from agentscope.tool import Toolkit
from hypothesis import example, given
from hypothesis import strategies as st

from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
from tests.support.budget_configs import fetch_tool
from tests.support.fakes import FakeChatModel, text
from tests.support.react1 import react, session_examples, text_tools, tool_uses

COUNTER = TokenCounter("o200k_base")
BUDGET = 32_000
SUMMARY = (
    "## Goal\n- read the outputs\n## Constraints\n- none\n## Progress\n### Done\n- fetched\n"
    "### In progress\n- (none)\n### Blocked\n- (none)\n## Key Decisions\n- none\n"
    "## Next Steps\n- go on\n## Critical Context\n- the fetch outputs\n"
)

Call = tuple[int, int]
"""(output bytes, times the tool yields to the event loop before answering)"""

_call = st.tuples(st.sampled_from([1_500, 9_000, 30_000, 60_000]), st.integers(0, 40))
SESSIONS = st.lists(st.lists(_call, min_size=2, max_size=8), min_size=12, max_size=24)


def make_toolkit() -> Toolkit:
    return text_tools(fetch_tool("more words"))


def step(k: int, calls: list[Call]) -> ChatResponse:
    arguments = [
        {"n": k * 10 + j, "size": size, "yields": yields} for j, (size, yields) in enumerate(calls)
    ]
    return ChatResponse(content=tool_uses("fetch", k, arguments))


async def run_session(
    tmp: Path, steps: list[list[Call]], compactor_yields: int
) -> tuple[list[int], list[tuple[int, int]]]:
    """Tokens of every prompt the model was given in a parallel-tool-call session, and
    after each pipeline run, the loop guard's mark (0: not armed) and the prompt's size."""

    async def summarise(messages: list[dict[str, Any]]) -> str:
        for _ in range(compactor_yields):
            await asyncio.sleep(0)
        return SUMMARY

    # the defaults (the Summarizer off: it writes notes, never the prompt)
    config = ContextConfig(working_dir=tmp, max_input_tokens=BUDGET, summarizer={"enabled": False})
    model = FakeChatModel()
    agent = react(
        model,
        make_toolkit(),
        sys_prompt="You are a careful assistant.",
        max_iters=len(steps) + 2,
        parallel_tool_calls=True,
    )
    compactor = FakeChatModel(default=summarise, name="compactor")
    manager = ContextManager(config, compactor, OpenAIChatFormatter(), token_counter=COUNTER)
    manager.attach(agent)
    pipeline = manager._bindings[agent.id].pipeline
    run, guard = pipeline.run, []

    async def watched_run(**kwargs: Any) -> Any:
        report = await run(**kwargs)
        guard.append((pipeline.compaction._stalled_at or 0, report.tokens_after))
        return report

    pipeline.run = watched_run  # type: ignore[method-assign]
    try:
        for k, calls in enumerate(steps):
            model.enqueue(step(k, calls))
        model.enqueue(text("done"))
        await agent(Msg("user", "fetch all the pages", "user"))
    finally:
        await manager.close()
    sizes = [await COUNTER.count(c["messages"], tools=c["tools"]) for c in model.calls]
    return sizes, guard


def check_session(steps: list[list[Call]], compactor_yields: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sizes, guard = asyncio.run(run_session(Path(tmp), steps, compactor_yields))
    assert len(sizes) == len(steps) + 1
    assert max(sizes) <= BUDGET, sizes
    # The loop guard holds compaction off only for growth beyond a prompt the model was
    # given: never above the prompt a run ends with (outputs that landed during a
    # compaction, or cuts after it, once left it far above, and compaction off for good).
    assert all(mark <= tokens for mark, tokens in guard), guard


# Found before the fix (20 steps): a compaction in one call's post-acting step, while the
# other calls' outputs landed, armed the loop guard at 48,790 tokens (over the budget); the
# prompts after it were 6,700-25,000 tokens, and compaction stayed off.
PINNED: list[list[Call]] = [
    [(9000, 23), (60000, 40), (1500, 38)],
    [(60000, 16), (9000, 12)],
    [(60000, 34), (60000, 25), (9000, 14), (9000, 33), (60000, 0), (1500, 10), (1500, 19)],
    [
        (1500, 17),
        (60000, 38),
        (60000, 27),
        (60000, 36),
        (60000, 8),
        (30000, 6),
        (1500, 8),
        (60000, 13),
    ],
    [(60000, 40), (30000, 26), (60000, 36), (30000, 34)],
    [(60000, 37), (9000, 21), (1500, 17), (9000, 20), (1500, 13), (30000, 18)],
    [(1500, 30), (60000, 5)],
    [(1500, 26), (9000, 1), (30000, 27), (60000, 7)],
    [(1500, 24), (30000, 35)],
    [(9000, 2), (30000, 0), (1500, 6), (1500, 12)],
    [(30000, 39), (30000, 9), (1500, 21), (30000, 23), (9000, 24)],
    [(60000, 33), (60000, 38), (1500, 39), (30000, 27), (9000, 19)],
    [(30000, 33), (30000, 35), (30000, 0), (60000, 37), (30000, 1)],
    [(9000, 3), (30000, 29), (30000, 22), (30000, 31), (1500, 37)],
    [(1500, 23), (30000, 40)],
    [(30000, 37), (30000, 11), (30000, 11), (30000, 23), (30000, 19)],
    [
        (60000, 6),
        (1500, 36),
        (9000, 19),
        (9000, 17),
        (9000, 20),
        (9000, 27),
        (1500, 6),
        (30000, 21),
    ],
    [(9000, 28), (9000, 5), (30000, 13), (60000, 17), (9000, 7), (1500, 33), (9000, 20)],
    [
        (9000, 17),
        (30000, 5),
        (30000, 37),
        (9000, 26),
        (30000, 33),
        (30000, 29),
        (30000, 40),
        (60000, 18),
    ],
    [(60000, 2), (60000, 9), (9000, 0), (60000, 39), (60000, 35)],
]


# The default run: the pinned session and one drawn (each drawn session of 12-24 steps takes
# seconds); more drawn sessions under `-m slow`, beside the long ones.
@session_examples(1)
@given(steps=SESSIONS, compactor_yields=st.integers(0, 60))
@example(steps=PINNED, compactor_yields=30)
def test_parallel_tool_calls_hold_the_budget(
    steps: list[list[Call]], compactor_yields: int
) -> None:
    check_session(steps, compactor_yields)


@pytest.mark.slow
@session_examples(10)
@given(steps=SESSIONS, compactor_yields=st.integers(0, 60))
def test_parallel_tool_calls_hold_the_budget_more(
    steps: list[list[Call]], compactor_yields: int
) -> None:
    check_session(steps, compactor_yields)


LONG_SESSIONS = int(os.environ.get("BUDGET_LONG_SESSIONS", "40"))
"""Drawn sessions of 60-160 steps: 40 under `-m slow`; CI's slow run takes 10
(`BUDGET_LONG_SESSIONS=10`, `.ci/run`): at some 30 s a session under load, the 40 were half of
its slow step (1,115 of 2,275 s); each session crosses the budget's compaction many times."""


@pytest.mark.slow
@session_examples(LONG_SESSIONS)
@given(
    steps=st.lists(st.lists(_call, min_size=2, max_size=8), min_size=60, max_size=160),
    compactor_yields=st.integers(0, 60),
)
def test_parallel_tool_calls_hold_the_budget_long(
    steps: list[list[Call]], compactor_yields: int
) -> None:
    check_session(steps, compactor_yields)
