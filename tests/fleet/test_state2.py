"""AgentScope 2.x: a session's state saved by one worker into AgentScope's app storage
(`RedisStorage` on a real Redis server, `AsyncSQLAlchemyStorage` on SQLite) and loaded by
another resumes exactly: the other worker's memory holds the same messages (cut the same,
pins and hints marked the same), the same summary, the same calibration, and shows the same
prompt; a run of the pipeline there changes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X

if IS_1X:
    pytest.skip(
        "AgentScope 2.x app storage (tests/fleet/test_backend1.py is the 1.x side)",
        allow_module_level=True,
    )

from agentscope.message import UserMsg

from agentscope_ctx.agentscope2 import ContextManager
from tests.fleet.script import USER_TEXT, user_id
from tests.fleet.session import USER, Spec, StateSpec, make_config
from tests.fleet.session2 import AGENT, create_session, make_agent, script


def _snapshot(manager: ContextManager, agent: Any) -> dict[str, Any]:
    binding = manager.bind(agent)
    memory = binding.memory
    summary = memory.summary_message()
    return {
        "messages": [
            (
                msg.id,
                json.dumps(msg.content, sort_keys=True, ensure_ascii=False),
                msg.metadata,
                marks,
            )
            for msg, marks in memory.content
        ],
        "summary": memory.compact_summary,
        "shown summary": None if summary is None else summary.content,
        "calibration": dict(memory.calibration),
        "state summary": agent.state.summary,
    }


def _parts(usage: Any) -> tuple[int, ...]:
    return (
        usage.system_prompt,
        usage.summary,
        usage.messages,
        usage.tool_results,
        usage.message_count,
    )


async def test_a_state_saved_by_one_worker_resumes_exactly_on_another(
    tmp_path: Path, state_spec: StateSpec
) -> None:
    spec = Spec(
        store={"working_dir": str(tmp_path / "ctx")},
        files=str(tmp_path / "files"),
        state=state_spec,
        turns=4,
        steps=5,
    )
    spec.session_id = await create_session(spec)
    compacted = pinned = 0
    for turn in range(spec.turns):
        async with state_spec.open() as storage:  # worker A: a reply, then the app's save
            state = (await storage.get_session(USER, AGENT, spec.session_id)).state
            manager_a = ContextManager(make_config(spec))
            agent_a = make_agent(manager_a, state, script(turn, spec.steps), Path(spec.files))
            await agent_a.reply(
                UserMsg(name="user", content=USER_TEXT.format(turn=turn), id=user_id(turn))
            )
            if turn == 1:
                await manager_a.pin(agent_a, user_id(1))
            usage_a = await manager_a.context_usage(agent_a)
            seen_a = _snapshot(manager_a, agent_a)
            await storage.update_session_state(USER, AGENT, spec.session_id, agent_a.state)
            await manager_a.close()
        async with state_spec.open() as storage:  # worker B: a new manager, the loaded state
            state = (await storage.get_session(USER, AGENT, spec.session_id)).state
            manager_b = ContextManager(make_config(spec))
            agent_b = make_agent(manager_b, state, script(turn, spec.steps), Path(spec.files))
            usage_b = await manager_b.context_usage(agent_b)
            assert _snapshot(manager_b, agent_b) == seen_a, f"turn {turn}"
            # the same prompt, but for the tools its first reply installs and the provider's
            # last report (statistics of the process)
            assert _parts(usage_b) == _parts(usage_a), f"turn {turn}"
            await manager_b.run(manager_b.bind(agent_b))  # the pipeline again: nothing to do
            assert _snapshot(manager_b, agent_b)["messages"] == seen_a["messages"]
            await manager_b.close()
        compacted += bool(seen_a["summary"])
        pinned += any(meta.get("agentscope_ctx.pinned") for _, _, meta, _ in seen_a["messages"])
        assert seen_a["calibration"], "the provider's usage reached the calibration"
    assert compacted >= 2 and pinned >= 1  # the session compacted, and kept a pinned turn


async def test_an_agent_made_with_the_middleware_is_attached_before_its_first_reply(
    tmp_path: Path,
) -> None:
    """The app builds `Agent(..., state=loaded, middlewares=[...])` for each run: a worker may
    ask for the usage, pin or compact before the agent replied (before: "not attached")."""
    spec = Spec(
        store={"working_dir": str(tmp_path / "ctx")},
        files=str(tmp_path / "files"),
        state=StateSpec("sql"),
    )
    from agentscope.state import AgentState

    state = AgentState(context=[UserMsg(name="user", content="keep this", id="u0")])
    manager = ContextManager(make_config(spec))
    agent = make_agent(manager, state, script(0, 1), Path(spec.files))
    usage = await manager.context_usage(agent)
    assert usage.message_count == 1
    await manager.pin(agent, "u0")
    assert agent.state.context[0].metadata["agentscope_ctx.pinned"] is True
    await manager.close()


async def test_a_worker_keeps_nothing_of_the_agents_of_past_runs(tmp_path: Path) -> None:
    """The app makes a new `Agent` for every chat run, and a worker's manager serves them
    all: once a run's agent is gone, its binding (and the copy of the context its memory
    holds) must go too. Before, every run's agent and memory stayed in the manager."""
    import gc
    import weakref

    from agentscope.state import AgentState

    spec = Spec(
        store={"working_dir": str(tmp_path / "ctx")},
        files=str(tmp_path / "files"),
        state=StateSpec("sql"),
    )
    from tests.fleet.script import write_files

    write_files(Path(spec.files), 3, 2)
    manager = ContextManager(make_config(spec))
    state = AgentState()
    gone = []
    for turn in range(3):
        agent = make_agent(manager, state, script(turn, 2), Path(spec.files))
        await agent.reply(
            UserMsg(name="user", content=USER_TEXT.format(turn=turn), id=user_id(turn))
        )
        state = agent.state
        gone.append(weakref.ref(agent))
        del agent
    gc.collect()
    assert [ref() for ref in gone] == [None, None, None]
    assert manager.memories() == []
    await manager.close()
