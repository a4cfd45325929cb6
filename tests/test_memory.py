"""ContextMemory: the MemoryBase API, the summary message, and state round trips."""

from __future__ import annotations

from pathlib import Path

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolResultBlock, ToolUseBlock
from agentscope.session import JSONSession
from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_ctx import ContextConfig, ContextManager, ContextMemory
from tests.fakes import FakeChatModel


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
