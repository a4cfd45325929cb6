"""AgentScope 1.x on the fleet store: the tool calls a killed worker left unanswered in the
shared memory are moved to the dialog, and the warning that says so names the day they went
to. Before, it printed the store's pattern, ``moved from the shared memory to
pg-dialog:YYYY-MM-DD``, not the day (the PostgreSQL dialog store names its days that way in
`dialog_dir`). On a real server."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(reason_1x("ContextMemory over AgentScope 1.x memories"), allow_module_level=True)

from agentscope.message import Msg
from sqlalchemy.ext.asyncio import create_async_engine

from agentscope_ctx import ContextManager, ContextMemory
from agentscope_ctx.stores._dialog_record import date_prefix
from tests.fleet.memory_agents import FakeChatModel, make_agent
from tests.fleet.pg_config import PgStore
from tests.fleet.session import state_at
from tests.fleet.session1 import shared_memory
from tests.support.fakes import tool_call


async def test_the_unanswered_calls_moved_to_the_fleet_dialog_are_said_to_go_to_their_day(
    tmp_path: Path, pg_store: PgStore, caplog: pytest.LogCaptureFixture
) -> None:
    state = state_at("sql", tmp_path)
    engines = [create_async_engine(state.url) for _ in range(2)]
    a_memory, b_memory = (shared_memory(state, "s", engine) for engine in engines)
    manager = ContextManager(pg_store.config(tmp_path / "b"))
    try:
        a = ContextMemory(tmp_path / "a", backend=a_memory)
        await a.add(Msg("user", "scan shard 7", "user"))
        call = Msg("worker", tool_call("scan", call_id="k7", n=7).content, "assistant")
        await a.add(call)  # ... and worker A was killed before the result

        agent = make_agent(manager, FakeChatModel(["Nothing to scan."]), "worker", memory=b_memory)
        agent.set_console_output_enabled(False)
        with caplog.at_level(logging.WARNING, logger="agentscope_ctx"):
            await agent(Msg("user", "and now?", "user"))
        assert call.id in manager.dialog.ids()
        told = [r.getMessage() for r in caplog.records if "left unanswered" in r.message]
        assert len(told) == 1, told
        assert told[0].endswith(
            f"moved from the shared memory to pg-dialog:{date_prefix(call.timestamp)}"
        )
    finally:
        await manager.close()
        for memory in (a_memory, b_memory):
            await memory.close()
        for engine in engines:
            await engine.dispose()
