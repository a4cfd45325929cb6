"""Issue 46 item 17: what a manager keeps per agent is released with the agent, and what a
process does for every manager is done once. A 2.x app makes an agent per turn for the
session's manager (a 1.x app attaches and detaches one): the recorder of each pipeline's runs
for the session viewer goes with its pipeline. A manager per session (the 1.x pattern, a
hand-wired 2.x service) no longer means a cleanup of the store per session."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


async def test_new_managers_clean_a_store_up_once_an_hour_off_the_event_loop(
    tmp_path: Path, line: Line
) -> None:
    """Each new manager ran the cleanup of saved outputs (a query over every tenant on the
    fleet store) at its first pipeline run, on the event loop: a thousand sessions, a
    thousand cleanups. Now once an hour per process and store, in a worker thread, sparing
    what every live manager points to."""
    config = ContextConfig(working_dir=tmp_path / "w", summarizer={"enabled": False})
    first = line.session(config, line.fake_model(default="ok"), [])
    await first.turn("hello")  # the store's first cleanup in this process
    expired = tmp_path / "w" / "tool_result" / ("0123456789abcdef" * 2 + ".txt")
    expired.parent.mkdir(parents=True, exist_ok=True)
    expired.write_text("nobody points here\n")
    eight_days_ago = time.time() - 8 * 86_400
    os.utime(expired, (eight_days_ago, eight_days_ago))
    for n in range(10):  # ten sessions, a manager each, within the hour
        session = line.session(config, line.fake_model(default="ok"), [])
        await session.turn(f"turn {n}")
        await session.close()
    assert expired.exists()  # none of them cleaned the store up again

    from agentscope_ctx.services._cleanup import forget

    forget()  # an hour has passed
    later = line.session(config, line.fake_model(default="ok"), [])
    threads: list[threading.Thread] = []
    real = later.manager.store.cleanup

    def cleanup(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread())
        return real(*args, **kwargs)

    later.manager.store.cleanup = cleanup  # type: ignore[method-assign]
    await later.turn("later")
    await later.close()
    await first.close()
    assert not expired.exists()  # expired and unreferenced: deleted by the hourly run
    assert len(threads) == 1 and threads[0] is not threading.main_thread()
