"""Issue 46 item 17: what a manager keeps per agent is released with the agent. A 2.x app
makes an agent per turn for the session's manager (a 1.x app attaches and detaches one): the
recorder of each pipeline's runs for the session viewer goes with its pipeline."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from pathlib import Path

from agentscope_ctx import ContextConfig, ContextManager
from tests.support.agent_line import Line
from tests.support.lines import IS_1X

TURNS = 30


async def _turn(line: Line, manager: ContextManager, n: int) -> None:
    """One turn of a fresh agent on `manager` (1.x: attached, then detached)."""
    model = line.fake_model(default=f"turn {n} done")
    if IS_1X:
        from agentscope.message import Msg

        from tests.support.react1 import react

        agent = react(model)
        manager.attach(agent)
        await agent(Msg("user", f"turn {n}", "user"))
        manager.detach(agent)
        return
    from agentscope.agent import Agent
    from agentscope.message import UserMsg

    agent = Agent(
        name="coder", system_prompt="You help.", model=model, middlewares=[manager.middleware()]
    )
    async for _ in agent.reply_stream(UserMsg(name="user", content=f"turn {n}")):
        pass


async def _settled(done: Callable[[], bool]) -> None:
    """Collect the garbage until `done()`: the turns' async generators, which hold their
    agents' frames, are closed by tasks the loop runs once the collector finds them (a
    yield to the loop each round, never a wait on the clock; 10 rounds at most)."""
    for _ in range(10):
        gc.collect()
        if done():
            return
        await asyncio.sleep(0)  # the loop runs the aclose() tasks of the collected ones


async def test_a_pipeline_per_turn_leaves_no_step_recorder_behind(
    tmp_path: Path, line: Line
) -> None:
    manager = ContextManager(
        ContextConfig(working_dir=tmp_path / "w", summarizer={"enabled": False})
    )
    try:
        for n in range(TURNS):
            await _turn(line, manager, n)
        await _settled(lambda: len(manager._steps) <= 1)
        assert len(manager._steps) <= 1, len(manager._steps)  # (not one per turn)
    finally:
        await manager.close()
