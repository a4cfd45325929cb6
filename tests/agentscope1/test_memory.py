"""ContextMemory: the MemoryBase API, the summary message, and state round trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("ContextMemory as a 1.x MemoryBase, saved by AgentScope 1.x sessions"),
        allow_module_level=True,
    )

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.memory import AsyncSQLAlchemyMemory, InMemoryMemory
from agentscope.message import Msg, TextBlock, ToolResultBlock, ToolUseBlock
from agentscope.session import JSONSession
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import create_async_engine

from agentscope_ctx import ContextConfig, ContextManager, ContextMemory
from agentscope_ctx.core.context._memory import SUMMARY_MARK
from tests.support.fakes import FakeChatModel


def msgs(n: int) -> list[Msg]:
    return [
        Msg("user" if i % 2 == 0 else "bot", f"message {i}", "user" if i % 2 == 0 else "assistant")
        for i in range(n)
    ]


async def test_memory_base_api(tmp_path: Path) -> None:
    memory = ContextMemory(tmp_path)
    a, b, c = msgs(3)
    await memory.add(a)
    await memory.add([b, c], marks="hint")
    await memory.add(a)  # duplicate id: ignored
    assert await memory.size() == 3
    assert [m.id for m in await memory.get_memory(mark="hint")] == [b.id, c.id]
    assert [m.id for m in await memory.get_memory(exclude_mark="hint")] == [a.id]
    assert await memory.update_messages_mark("seen", msg_ids=[a.id]) == 1
    assert await memory.update_messages_mark("kept", old_mark="hint") == 2
    assert [m.id for m in await memory.get_memory(mark="kept")] == [b.id, c.id]
    assert await memory.update_messages_mark(None, old_mark="kept") == 2
    assert await memory.delete_by_mark("seen") == 1
    assert await memory.delete([b.id]) == 1
    assert [m.id for m in await memory.get_memory()] == [c.id]
    await memory.clear()
    assert await memory.size() == 0


async def test_summary_is_first_message_with_dialog_guide(tmp_path: Path) -> None:
    memory = ContextMemory(tmp_path)
    await memory.add(msgs(2))
    assert len(await memory.get_memory()) == 2
    await memory.update_compressed_summary("## Goal\nfix the parser")
    first, *rest = await memory.get_memory()
    text = first.get_text_content() or ""
    assert "## Goal\nfix the parser" in text
    assert str(tmp_path / "dialog") in text and "YYYY-MM-DD.jsonl" in text
    assert "newest" in text
    assert len(rest) == 2
    assert (await memory.get_memory())[0] is first  # same object: its token count is cached
    assert len(await memory.get_memory(prepend_summary=False)) == 2
    zh = ContextMemory(tmp_path, language="zh")
    await zh.update_compressed_summary("摘要")
    assert "从最新的文件开始" in ((await zh.get_memory())[0].get_text_content() or "")


pieces = st.sampled_from(["text", "中文 😀", "a\r\nb", "", "<<<TRUNCATED>>>"])


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(pieces, max_size=12),
    summary=pieces,
    marks=st.lists(st.sampled_from(["hint", "x"]), max_size=2),
)
def test_state_dict_round_trip(texts: list[str], summary: str, marks: list[str]) -> None:
    import asyncio

    async def run() -> None:
        memory = ContextMemory(".")
        for i, t in enumerate(texts):
            if i % 3 == 2:
                content = [
                    ToolUseBlock(type="tool_use", id=f"t{i}", name="shell", input={"cmd": t}),
                ]
                await memory.add(Msg("bot", content, "assistant"), marks=marks)
                result = ToolResultBlock(
                    type="tool_result",
                    id=f"t{i}",
                    name="shell",
                    output=[TextBlock(type="text", text=t)],
                )
                await memory.add(Msg("system", [result], "system"))
            else:
                await memory.add(Msg("user", t, "user"), marks=marks)
        await memory.update_compressed_summary(summary)
        memory.calibration["m"] = 1.25
        restored = ContextMemory(".")
        restored.load_state_dict(memory.state_dict())
        assert restored.state_dict() == memory.state_dict()
        assert restored.compact_summary == summary

    asyncio.run(run())


async def test_session_round_trip_through_json_session(tmp_path: Path) -> None:
    def agent() -> ReActAgent:
        a = ReActAgent(
            name="a", sys_prompt="s", model=FakeChatModel(), formatter=OpenAIChatFormatter()
        )
        a.set_console_output_enabled(False)
        return a

    config = ContextConfig(working_dir=tmp_path / "ctx")
    first = agent()
    memory = ContextManager(config).attach(first)
    await memory.add(msgs(4))
    await memory.update_compressed_summary("## Goal\nkeep me")
    session = JSONSession(save_dir=str(tmp_path / "sessions"))
    await session.save_session_state("s1", agent=first)

    second = agent()
    restored = ContextManager(config).attach(second)
    await session.load_session_state("s1", agent=second)
    assert restored.compact_summary == "## Goal\nkeep me"
    assert [m.id for m in restored.messages()] == [m.id for m in memory.messages()]


async def test_attach_keeps_existing_messages_and_detach_restores(tmp_path: Path) -> None:
    agent = ReActAgent(
        name="a", sys_prompt="s", model=FakeChatModel(), formatter=OpenAIChatFormatter()
    )
    await agent.memory.add(msgs(3), marks="old")
    before = [m.id for m in await agent.memory.get_memory()]
    manager = ContextManager(ContextConfig(working_dir=tmp_path))
    memory = manager.attach(agent)
    assert agent.memory is memory
    assert [m.id for m in memory.messages()] == before
    assert await memory.size() == 3 and len(await memory.get_memory(mark="old")) == 3
    assert "read_file" in agent.toolkit.tools
    assert "agentscope_ctx.pre_reasoning" in agent._instance_pre_reasoning_hooks
    assert manager.attach(agent) is memory  # twice: nothing doubled
    assert len(agent.toolkit._middlewares) == 1
    await memory.add(msgs(1))
    manager.detach(agent)
    assert agent.memory is not memory
    assert "read_file" not in agent.toolkit.tools
    assert agent.toolkit._middlewares == []
    assert "agentscope_ctx.pre_reasoning" not in agent._instance_pre_reasoning_hooks
    assert len(await agent.memory.get_memory()) == 4


async def test_atomic_session_keeps_the_previous_state_when_a_save_fails(tmp_path: Path) -> None:
    from agentscope_ctx import AtomicJSONSession

    memory = ContextMemory(tmp_path)
    await memory.add(msgs(2))
    session = AtomicJSONSession(save_dir=str(tmp_path / "s"))
    await session.save_session_state("one", memory=memory)

    class Broken(ContextMemory):
        def state_dict(self) -> dict:
            return {"content": [[{"id": "x"}, []]], "bad": object()}  # not JSON

    try:
        await session.save_session_state("one", memory=Broken(tmp_path))
    except TypeError:
        pass
    restored = ContextMemory(tmp_path)
    await session.load_session_state("one", memory=restored)
    assert [m.id for m in restored.messages()] == [m.id for m in memory.messages()]


# -- saved state (issue 11, item 18) ---------------------------------------------------------
# Ported from AgentScope 1.0.21's tests/memory_test.py: `InMemoryMemoryTest.test_serialization`
# (no backend) and `ShortTermMemoryTest._test_serialization`, the check that its
# `AsyncSQLAlchemyMemory` and `RedisMemory` pass (with a backend: the state holds the summary
# only, the backend holding the messages).


def in_memory_state(summary: str, msg: Msg | None) -> dict[str, Any]:
    """The state of AgentScope's `InMemoryMemory` holding `msg`, as its test spells it out."""
    content = (
        [
            [
                {
                    "id": msg.id,
                    "name": msg.name,
                    "role": msg.role,
                    "content": msg.content,
                    "metadata": msg.metadata,
                    "timestamp": msg.timestamp,
                },
                [],
            ]
        ]
        if msg is not None
        else []
    )
    return {"_compressed_summary": summary, "content": content}


async def test_i11_18_state_dict_as_agentscope_in_memory_memory(tmp_path: Path) -> None:
    memory = ContextMemory(tmp_path)
    msg = Msg("user", "1", "user")
    await memory.add(msg)
    assert memory.state_dict() == in_memory_state("", msg)  # no empty "calibration"

    await memory.update_compressed_summary("Hello World!")
    state_dict = memory.state_dict()
    assert state_dict == in_memory_state("Hello World!", msg)

    await memory.update_compressed_summary("")
    await memory.clear()
    assert memory.state_dict() == in_memory_state("", None)

    memory.load_state_dict(state_dict)
    assert memory.state_dict() == in_memory_state("Hello World!", msg)

    memory.calibration["m"] = 1.25  # once there is one, it is saved
    assert memory.state_dict() == {
        **in_memory_state("Hello World!", msg),
        "calibration": {"m": 1.25},
    }


async def test_i11_18_state_dict_with_a_backend_as_agentscope_sqlalchemy_memory() -> None:
    engine = create_async_engine("sqlite+aiosqlite:///:memory:")
    backend = AsyncSQLAlchemyMemory(engine, session_id="session_1", user_id="user_1")
    try:
        memory = ContextMemory(backend=backend)
        await memory.add(msgs(3))  # held by the backend, not repeated in the state
        assert memory.state_dict() == {"_compressed_summary": ""}

        await memory.update_compressed_summary("Hi there!")
        state_dict = memory.state_dict()
        assert state_dict == {"_compressed_summary": "Hi there!"}

        await memory.update_compressed_summary("")
        assert memory.state_dict() == {"_compressed_summary": ""}

        memory.load_state_dict(state_dict)
        assert memory.state_dict() == {"_compressed_summary": "Hi there!"}
        assert len(memory.messages()) == 3  # the messages are still those of the backend
        await memory.refresh()  # the loaded summary is not undone by the backend's lack of one
        assert memory.state_dict() == {"_compressed_summary": "Hi there!"}
        assert len(memory.messages()) == 3
    finally:
        await backend.close()
        await engine.dispose()


async def test_i11_18_older_state_with_messages_loads_into_a_backend(tmp_path: Path) -> None:
    first = ContextMemory(tmp_path)
    await first.add(msgs(2))
    await first.add(msgs(1), marks="hint")
    await first.update_compressed_summary("## Goal\nkeep me")
    older = {**first.state_dict(), "calibration": {}}  # as a version before this one saved it
    expected = [(m.id, marks) for m, marks in first.content]

    # A backend that holds nothing (e.g. a fresh InMemoryMemory): the state's messages and
    # summary go to it, and survive the reload from it.
    backend = InMemoryMemory()
    memory = ContextMemory(tmp_path, backend=backend)
    memory.load_state_dict(older)
    await memory.refresh()
    assert [(m.id, marks) for m, marks in memory.content] == expected
    assert memory.compact_summary == "## Goal\nkeep me"
    held = await backend.get_memory(exclude_mark=SUMMARY_MARK, prepend_summary=False)
    assert [m.id for m in held] == [m_id for m_id, _ in expected]
    assert [m.id for m in await backend.get_memory(mark="hint")] == [expected[2][0]]

    # Loaded again over the backend that now holds them: nothing doubles.
    again = ContextMemory(tmp_path, backend=backend)
    again.load_state_dict(older)
    await again.refresh()
    assert [(m.id, marks) for m, marks in again.content] == expected
    assert await backend.size() == 4  # three messages and one summary

    # A backend that holds other messages and a summary has moved on (another replica
    # compacted the state's messages into dialog/): it wins.
    moved_on = InMemoryMemory()
    await moved_on.add(msgs(1))
    await moved_on.add(Msg("compact_summary", "newer", "user"), marks=SUMMARY_MARK)
    late = ContextMemory(tmp_path, backend=moved_on)
    late.load_state_dict(older)
    await late.refresh()
    assert [m.id for m in late.messages()] == [(await moved_on.get_memory())[0].id]
    assert late.compact_summary == "newer" and await moved_on.size() == 2


async def test_i11_18_session_with_a_backend_saves_no_messages(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    backend = AsyncSQLAlchemyMemory(engine, session_id="s1", user_id="u1")
    try:
        agent = ReActAgent(
            name="a", sys_prompt="s", model=FakeChatModel(), formatter=OpenAIChatFormatter()
        )
        agent.set_console_output_enabled(False)
        memory = ContextManager(ContextConfig(working_dir=tmp_path / "ctx")).attach(
            agent, backend=backend
        )
        await agent(Msg("user", "hello", "user"))
        session = JSONSession(save_dir=str(tmp_path / "sessions"))
        await session.save_session_state("s1", agent=agent)
        saved = json.loads((tmp_path / "sessions" / "s1.json").read_text())
        assert saved["agent"]["memory"] == {"_compressed_summary": ""}
        assert len(memory.messages()) == 2
    finally:
        await backend.close()
        await engine.dispose()
