"""A 2.x agent state whose saved calibration is corrupt (issue 29, item 4): whatever the
values in `middle_context` (infinite, NaN, zero, negative, huge, of the wrong type), a real
2.x `Agent` resumed from it keeps the budget on every prompt and answers a later turn
(`agentscope_ctx/core/tokens/_calibration_state.py`, loaded by `agentscope2/_mirror.py`)."""

from __future__ import annotations

import asyncio
import math
import tempfile
from pathlib import Path
from typing import Any

from agentscope.agent import Agent
from agentscope.message import AssistantMsg, Msg, UserMsg
from agentscope.model import ChatResponse
from agentscope.state import AgentState
from hypothesis import example, given, settings

from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
from tests.support.corrupt_calibration import CALIBRATION, ISSUE_CASES
from tests.support.fakes import FakeChatModel, text

BUDGET = 6_000
COUNTER = TokenCounter()


def _history() -> list[Msg]:
    """About 8,000 tokens of an earlier session (over the 6,000 budget)."""
    msgs: list[Msg] = []
    for i in range(16):
        line = f"report {i}: the nightly job on host-{i} finished, status ok, 420 rows. "
        msgs.append(UserMsg("user", f"Summarise report {i}: " + line * 12))
        msgs.append(AssistantMsg("clerk", f"Report {i} is fine: " + line * 6))
    return msgs


async def _resume(root: Path, calibration: object) -> None:
    sent: list[int] = []

    async def answer(messages: list[Msg]) -> ChatResponse:
        formatted = await model.formatter.format(messages)
        sent.append(await COUNTER.count(formatted, model.calls[-1]["tools"]))
        return text(f"answer {len(sent)}")

    model = FakeChatModel(default=answer)
    config = ContextConfig(
        working_dir=str(root / "ctx"),
        max_input_tokens=BUDGET,
        summarizer={"enabled": False},  # type: ignore[arg-type]
    )
    manager = ContextManager(config, model=FakeChatModel(default="## Goal\n- the reports"))
    state = AgentState(
        context=_history(), middle_context={"agentscope_ctx": {"calibration": calibration}}
    )
    agent = Agent(
        name="clerk",
        system_prompt="You summarise reports.",
        model=model,
        middlewares=[manager.middleware()],
        state=state,
    )
    try:
        first = await agent.reply(UserMsg("user", "Anything failed last night?"))
        later = await agent.reply(UserMsg("user", "And the night before?"))
    finally:
        await manager.close()
    assert first.get_text_content() == "answer 1"
    assert later.get_text_content() == "answer 2"
    assert sent and max(sent) <= BUDGET, sent
    kept: Any = agent.state.middle_context["agentscope_ctx"].get("calibration", {})
    assert all(isinstance(v, float) and math.isfinite(v) for v in kept.values()), kept


def _pinned(test: Any) -> Any:
    for case in reversed(ISSUE_CASES):
        test = example(calibration=case)(test)
    return test


@settings(max_examples=8, deadline=None)
@given(calibration=CALIBRATION)
@_pinned
def test_i29_04_a_corrupt_saved_calibration_keeps_the_budget_and_recovers(
    calibration: object,
) -> None:
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(_resume(Path(root), calibration))
