"""Small windows on AgentScope 2.x (issue #20): a real `Agent` whose scripted model states
`context_size=1000` (AgentScope's own test models do), with the manager attached."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.event import CustomEvent
from agentscope.message import HintBlock, UserMsg
from agentscope.tool import FunctionTool, Toolkit
from pydantic import BaseModel

from agentscope_ctx import ContextConfig, ContextManager, ContextUsageError, PromptTooLargeError
from agentscope_ctx.core.tokens._tokens import TokenCounter
from tests.support.fakes import ALLOW, FakeChatModel, text, tool_call

COMPACTED = re.compile(r"compacted \d+ messages: (\d+) -> (\d+) tokens")


def echo(word: str) -> str:
    """Say a word back.

    Args:
        word (str): the word.
    """
    return f"{word}: " + " ".join(f"line{i}" for i in range(8))


def small_agent(tmp_path: Path, model: FakeChatModel, system_prompt: str = "test prompt") -> Agent:
    return Agent(
        name="assistant",
        system_prompt=system_prompt,
        model=model,
        toolkit=Toolkit(tools=[FunctionTool(echo, permission=ALLOW)]),
    )


def user_texts(call: dict[str, Any]) -> list[str]:
    """The text of the user messages of one formatted prompt."""
    out = []
    for message in call["formatted"]:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content)
        out.append(str(content))
    return out


async def reply(agent: Agent, content: str) -> list[str]:
    """One reply; the texts of the package's notices."""
    notices = []
    async for event in agent.reply_stream(UserMsg(name="user", content=content)):
        if isinstance(event, CustomEvent) and event.name == "agentscope_ctx":
            notices.append(str(event.value["text"]))
    return notices


async def test_a_context_size_1000_agent_keeps_the_users_message_in_every_prompt(
    tmp_path: Path,
) -> None:
    ask = "Echo the words alpha to echo, one call each, then say done."
    words = ["alpha", "bravo", "charlie", "delta", "echo"]
    model = FakeChatModel([*[tool_call("echo", word=w) for w in words], text("done")])
    model.context_size = 1_000
    manager = ContextManager(ContextConfig(working_dir=tmp_path))
    agent = small_agent(tmp_path, model)
    manager.attach(agent)

    notices = await reply(agent, ask)

    assert len(model.calls) == len(words) + 1
    for call in model.calls:  # the request never left the prompt: its own message, verbatim
        assert ask in user_texts(call), call["formatted"]
    assert agent.state.context[0].role == "user"
    for found in COMPACTED.finditer("\n".join(notices)):  # no compaction grew the prompt
        assert int(found[2]) < int(found[1]), notices
    usage = await manager.context_usage(agent)
    assert usage.max_input_tokens == 950  # the window less 5% for the answer
    await manager.close()


async def test_a_manual_compact_of_a_short_context_does_not_grow_it(tmp_path: Path) -> None:
    model = FakeChatModel(["hello", "4"])
    manager = ContextManager(ContextConfig(working_dir=tmp_path))
    agent = small_agent(tmp_path, model)
    manager.attach(agent)
    await reply(agent, "hi")
    await reply(agent, "What is 2 + 2?")
    context = [msg.id for msg in agent.state.context]
    before = await manager.context_usage(agent)

    report = await manager.compact(agent)
    await agent.compress_context(instructions=HintBlock(hint="keep the numbers"))

    after = await manager.context_usage(agent)
    assert report.compacted == 0 and "not made" in (report.note or "")
    assert after.total <= before.total and after.summary == 0
    assert [msg.id for msg in agent.state.context] == context
    assert not str(agent.state.summary)
    model.enqueue("still 4")
    notices = await reply(agent, "Sure?")  # and the user hears why, at the next step
    assert any("compaction not made" in n for n in notices), notices
    await manager.close()


async def test_a_prompt_that_cannot_fit_raises_before_any_model_call(tmp_path: Path) -> None:
    model = FakeChatModel(["never sent"])
    model.context_size = 1_000
    manager = ContextManager(ContextConfig(working_dir=tmp_path))
    agent = small_agent(tmp_path, model, system_prompt="Always follow the house rules. " * 150)
    manager.attach(agent)
    with pytest.raises(PromptTooLargeError) as caught:
        await agent.reply(UserMsg(name="user", content="Hello"))
    assert model.calls == []
    error = caught.value
    assert isinstance(error, ContextUsageError) and error.budget == 950
    assert error.parts["system prompt"] > 800 and error.parts["tool schemas"] > 100
    assert error.total > error.budget
    assert "system prompt" in str(error) and "tool schemas" in str(error)
    await manager.close()


async def test_the_answer_reservation_is_the_stated_max_tokens(tmp_path: Path) -> None:
    class Parameters(BaseModel):
        max_tokens: int | None = 300

    model = FakeChatModel(["ok"])
    model.context_size = 4_000
    model.parameters = Parameters()
    manager = ContextManager(ContextConfig(working_dir=tmp_path))
    agent = small_agent(tmp_path, model)
    manager.attach(agent)
    await reply(agent, "hi")
    assert (await manager.context_usage(agent)).max_input_tokens == 3_700
    await manager.close()


async def test_our_tool_schemas_are_short(tmp_path: Path) -> None:
    """Every prompt carries them: at a window of 1,000 tokens they took 786 (issue #20)."""
    manager = ContextManager(ContextConfig(working_dir=tmp_path))
    agent = Agent(name="a", system_prompt="s", model=FakeChatModel(["ok"]), toolkit=Toolkit())
    manager.attach(agent)
    await reply(agent, "hi")
    schemas = await agent.toolkit.get_tool_schemas(agent.state.tool_context.activated_groups)
    names = {s["function"]["name"] for s in schemas}
    assert names == {"read_file", "remember", "log_today", "search_history"}
    counter = TokenCounter("o200k_base")
    tokens = await counter.count_text(json.dumps(schemas, ensure_ascii=False))
    assert tokens <= 620, tokens
    search = next(s for s in schemas if s["function"]["name"] == "search_history")
    role = search["function"]["parameters"]["properties"]["role"]
    assert role["type"] == "string" and "anyOf" not in role and "default" not in role
    await manager.close()


async def test_a_hint_is_not_the_current_user_turn(tmp_path: Path) -> None:
    """AgentScope's runtime-state hints come after the user's message, as user entries: the
    mirror marks them, so the user's message is the turn that stays (on a state pulled whole
    and on appended blocks alike)."""
    from agentscope.message import AssistantMsg
    from agentscope.state import AgentState

    from agentscope_ctx.agentscope2._mirror import StateMirror
    from agentscope_ctx.core.context._memory import ContextMemory
    from agentscope_ctx.core.context._turns import current_turn

    user = UserMsg(name="user", content="Sum the numbers in data.csv")
    reply = AssistantMsg(name="assistant", content=[HintBlock(hint="<system-reminder>now")])
    state = AgentState(context=[user, reply])
    mirror = StateMirror(ContextMemory(str(tmp_path)))
    await mirror.pull(state)
    assert [m.role for m in mirror.memory.messages()] == ["user", "user"]
    assert current_turn(mirror.memory.content) == user.id
    reply.content.append(HintBlock(hint="<system-reminder>later"))
    await mirror.pull(state)
    assert current_turn(mirror.memory.content) == user.id
    earlier = UserMsg(name="user", content="hello")
    state.context = [earlier, user, reply]  # edited: the mirror starts over (adopts it whole)
    await mirror.pull(state)
    assert [m.id for m in mirror.memory.messages()][:2] == [earlier.id, user.id]
    assert current_turn(mirror.memory.content) == user.id


async def test_a_small_window_is_offered_read_file_only(tmp_path: Path) -> None:
    """Below SMALL_WINDOW the optional tools would take a quarter of the budget and more:
    only read_file (which the notices need) is added."""
    model = FakeChatModel(["ok"])
    model.context_size = 1_000
    manager = ContextManager(ContextConfig(working_dir=tmp_path))
    agent = small_agent(tmp_path, model)
    manager.attach(agent)
    await reply(agent, "hi")
    schemas = await agent.toolkit.get_tool_schemas(agent.state.tool_context.activated_groups)
    names = {s["function"]["name"] for s in schemas}
    assert "read_file" in names
    assert not names & {"remember", "log_today", "search_history"}
    await manager.close()
