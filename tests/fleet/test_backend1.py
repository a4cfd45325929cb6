"""AgentScope 1.x: `ContextMemory` over a memory two workers share, `RedisMemory` on a real
Redis server or `AsyncSQLAlchemyMemory` on SQLite (tests/agentscope1/test_backend.py has the in-process
replicas; tests/fleet/test_workers.py the processes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(reason_1x("ContextMemory over AgentScope 1.x memories"), allow_module_level=True)

from agentscope.message import Msg
from sqlalchemy.ext.asyncio import create_async_engine

from agentscope_ctx import ContextMemory
from agentscope_ctx.core.context._memory_backend import SHARED_MARKS
from agentscope_ctx.core.context._turns import HINT_MARK, current_turn
from tests.fleet.session import StateSpec
from tests.fleet.session1 import shared_memory


@pytest.fixture
async def backends(state_spec: StateSpec) -> AsyncIterator[tuple[Any, Any]]:
    """Two connections to one shared session (`state_spec`: Redis or SQLite), one per
    worker, as the fleet session's workers have them (`session1.shared_memory`)."""
    sql = state_spec.kind == "sql"
    engines = [create_async_engine(state_spec.url) if sql else None for _ in range(2)]
    pair = [shared_memory(state_spec, "s", engine) for engine in engines]
    yield pair[0], pair[1]
    for memory, engine in zip(pair, engines, strict=True):
        await memory.close()
        if engine is not None:
            await engine.dispose()


async def worker_b_replies(tmp_path: Path, backend: Any, answer: str) -> tuple[Any, Any, Any]:
    """Worker B: a new `ReActAgent` over the shared `backend`, a manager attached, replies to
    "and now?" with `answer`; returns the manager (to close), the agent and its model."""
    from agentscope_ctx import ContextConfig, ContextManager
    from tests.fleet.memory_agents import FakeChatModel, make_agent

    model = FakeChatModel([answer])
    manager = ContextManager(ContextConfig(working_dir=tmp_path / "ctx"))
    agent = make_agent(manager, model, "worker", memory=backend)
    agent.set_console_output_enabled(False)
    await agent(Msg("user", "and now?", "user"))
    return manager, agent, model


def test_the_hint_mark_is_the_one_shared() -> None:
    assert HINT_MARK in SHARED_MARKS


async def test_a_hint_left_by_a_killed_worker_is_a_hint_on_the_other(
    tmp_path: Path, backends: tuple[Any, Any]
) -> None:
    """Worker A added a hint (AgentScope deletes hints by mark after the model call) and was
    killed before; worker B loads the session. Before: B saw the hint without its mark, took
    it for the current user turn, and could never delete it."""
    a = ContextMemory(tmp_path, backend=backends[0])
    question = Msg("user", "scan the shards", "user")
    await a.add(question)
    await a.add(
        Msg("user", "<system-hint>answer in text now</system-hint>", "user"), marks=HINT_MARK
    )

    b = ContextMemory(tmp_path, backend=backends[1])
    await b.refresh()
    assert [marks for _, marks in b.content] == [[], [HINT_MARK]]
    assert current_turn(b.content) == question.id
    await b.delete_by_mark(HINT_MARK)  # what B's agent does after its next model call
    await a.refresh()
    assert [m.id for m in a.messages()] == [question.id]


async def test_a_tool_call_a_killed_worker_left_unanswered_leaves_the_context(
    tmp_path: Path, backends: tuple[Any, Any]
) -> None:
    """Worker A was killed between its model's tool call and the tool's result (found by the
    two-worker trials): the call was in the shared memory without a result. Before, worker
    B's next prompt carried it (a provider rejects that); now it goes to dialog/ (saved, so
    it stays searchable) before B's reply starts."""

    from agentscope_ctx.core.context._unanswered import unanswered
    from tests.support.fakes import tool_call

    a = ContextMemory(tmp_path, backend=backends[0])
    await a.add(Msg("user", "scan shard 7", "user"))
    call = Msg("worker", tool_call("scan", call_id="k7", n=7).content, "assistant")
    await a.add(call)  # ... and A was killed before the result

    manager, agent, model = await worker_b_replies(tmp_path, backends[1], "Nothing to scan.")
    sent = model.calls[0]["messages"]
    assert not any(m.get("tool_calls") for m in sent), sent
    assert not unanswered(manager.memory_of(agent).messages())
    assert call.id in manager.dialog.ids()
    assert call.id not in {m.id for m in await backends[0].get_memory(prepend_summary=False)}
    await manager.close()


async def test_an_unanswered_call_moved_to_the_dialog_keeps_the_conversations_order(
    tmp_path: Path, backends: tuple[Any, Any]
) -> None:
    """The dialog store keeps the conversation's order (core/compaction/_compaction.py: what stays is
    written with the older part). Worker A got one result and was killed after its next
    call; B moved the unanswered call to dialog/ at the start of its reply. Before, only the
    call went: the user turn, the first call and its result, still in memory, reached the
    dialog after it when compacted later (found by the two-worker trials' order check)."""

    from tests.support.fakes import tool_call

    a = ContextMemory(tmp_path, backend=backends[0])
    question = Msg("user", "scan shards 6 and 7", "user")
    first = Msg("worker", tool_call("scan", call_id="k6", n=6).content, "assistant")
    result = Msg(
        "system",
        [{"type": "tool_result", "id": "k6", "name": "scan", "output": "shard 6: ok"}],
        "system",
    )
    second = Msg("worker", tool_call("scan", call_id="k7", n=7).content, "assistant")
    for msg in (question, first, result, second):
        await a.add(msg)  # ... and A was killed before the second result

    manager, agent, _ = await worker_b_replies(tmp_path, backends[1], "Shard 6 is fine.")
    stored = [m.id for m in manager.dialog.read()[0]]
    assert stored == [question.id, first.id, result.id, second.id], stored
    live = [m.id for m in manager.memory_of(agent).messages()]
    assert live[:3] == [question.id, first.id, result.id]  # they stay: only the call left
    assert second.id not in live
    # compacted later, they are not written twice (the agent's store skips what it has: ids
    # are unique per owner, the agent and its session)
    dialog = manager._bindings[agent.id].pipeline.dialog
    await dialog.append(manager.memory_of(agent).messages()[:3])
    assert [m.id for m in manager.dialog.read()[0]] == stored
    await manager.close()
