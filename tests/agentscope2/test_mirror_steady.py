"""The 2.x adapter's steady step moves only what changed (`StateMirror`, `_conversions`): its
work does not grow with the history, and what the cheap path makes is what the whole path
makes (the memory a fresh mirror pulls, the context a full rebuild pushes)."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.support.lines import IS_1X

if IS_1X:
    pytest.skip("AgentScope 2.x adapter (the mirror of an AgentState)", allow_module_level=True)

from agentscope.agent import Agent, InjectionConfig
from agentscope.message import (
    HintBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMsg,
)
from agentscope.state import AgentState
from agentscope.tool import Toolkit

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.agentscope2._entries import to_entries
from agentscope_ctx.agentscope2._mirror import StateMirror
from agentscope_ctx.core.context._memory import ContextMemory
from tests.support.fakes import FakeChatModel

NAME = "agent"


def _round(i: int) -> list[Any]:
    """A round of the live reply: a text, a tool call and its (small) result."""
    call = f"call_{i}"
    return [
        TextBlock(text=f"step {i}: looking at the next file"),
        ToolCallBlock(id=call, name="shell", input=json.dumps({"command": f"cat f{i}.py"})),
        ToolResultBlock(id=call, name="shell", output=f"line {i}\n" * 5, state="success"),
    ]


async def _calls_per_step(root: Path, history: int) -> int:
    """The most Python calls one steady step makes (the agent appends a round, then
    `manager.run`: pull, pipeline, push), after a history of `history` rounds."""
    config = ContextConfig.model_validate(
        {"working_dir": str(root), "max_input_tokens": 10_000_000, "summarizer": {"enabled": False}}
    )
    manager = ContextManager(config)
    agent = Agent(
        name=NAME,
        system_prompt="You help.",
        model=FakeChatModel([]),
        toolkit=Toolkit(),
        injection_config=InjectionConfig(inject_runtime_state=False),
        middlewares=[manager.middleware()],
    )
    reply = Msg(name=NAME, role="assistant", content=[])
    for i in range(history):
        reply.content.extend(_round(i))
    agent.state.context = [UserMsg(name="user", content="fix the tests"), reply]
    agent.state.reply_context.reply_id = reply.id
    binding = manager.bind(agent)
    await manager.run(binding)  # the first pull reads all of it
    most = 0
    for i in range(history, history + 4):
        calls = 0

        def count(frame: Any, event: str, arg: Any) -> None:
            nonlocal calls
            if event in ("call", "c_call"):
                calls += 1

        agent.state.append_context(NAME, _round(i))
        sys.setprofile(count)
        try:
            report = await manager.run(binding)
        finally:
            sys.setprofile(None)
        assert report is not None and report.truncated == 0 and report.compacted == 0
        most = max(most, calls)
    await manager.close()
    return most


async def test_a_steady_step_does_not_grow_with_the_history(tmp_path: Path) -> None:
    """Issue 33: every step passed over the whole history (the mirror's conversion check of
    every entry, the pins' union-find, the unsaved outputs, the steps file's notices): 6.5x
    at 3,200 messages. Counted in calls, not time: the same at 1,500 entries as at 30."""
    small = await _calls_per_step(tmp_path / "small", 10)
    large = await _calls_per_step(tmp_path / "large", 500)
    assert large <= small * 1.1, (small, large)


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["round", "hint", "text", "user", "replace", "shrink", "grow", "cut"]),
        st.booleans(),
    ),
    min_size=1,
    max_size=16,
)


def _fresh(state: AgentState) -> list[tuple[str, Any]]:
    return [(e.id, e.content) for m in state.context for e, _ in to_entries(m)]


@settings(max_examples=60, deadline=None)
@given(_OPS)
@example([("text", True), ("text", True), ("round", True), ("cut", True), ("replace", True)])
@example([("round", True), ("user", True), ("round", True), ("replace", False), ("shrink", True)])
def test_the_cheap_path_makes_what_the_whole_path_makes(ops: list[tuple[str, bool]]) -> None:
    """Any run of the agent's edits (rounds and hints appended to the live reply, a run that
    grows, a new user turn and reply, a message replaced by a copy as `cap_images` does, an
    earlier reply that lost a block or gained one) and of the pipeline's cuts, pulled after one or several
    of them: after each pull the memory holds the entries a fresh conversion gives, and
    after each push the state holds what the memory holds."""

    async def main(tmp: str) -> None:
        reply = Msg(name=NAME, role="assistant", content=[])
        state = AgentState(context=[UserMsg(name="user", content="go"), reply])
        state.reply_context.reply_id = reply.id
        mirror = StateMirror(ContextMemory(tmp))
        memory = mirror.memory
        await mirror.pull(state)
        for n, (op, pull) in enumerate(ops):
            if op == "round":
                state.append_context(NAME, _round(n))
            elif op == "hint":
                state.append_context(NAME, [HintBlock(hint=f"hint {n}", source="runtime")])
            elif op == "text":
                state.append_context(NAME, [TextBlock(text=f"more {n}")])
            elif op == "user":
                state.context.append(UserMsg(name="user", content=f"and {n}"))
                state.reply_context.reply_id = f"reply-{n}"  # the next reply's message
            elif op == "replace":
                first = state.context[0]
                state.context[0] = first.model_copy(
                    update={"content": [TextBlock(id=first.content[0].id, text=f"was {n}")]}
                )
            elif op == "shrink" and len(state.context[1].content) > 1:
                state.context[1] = state.context[1].model_copy(
                    update={"content": state.context[1].content[:-1]}
                )
            elif op == "grow" and len(state.context) > 2:  # an earlier reply, in place
                state.context[1].content.append(HintBlock(hint=f"late {n}", source="runtime"))
            if not pull:
                continue
            await mirror.pull(state)
            assert [(m.id, m.content) for m in memory.messages()] == _fresh(state)
            if op == "cut":
                results = [m for m in memory.messages() if m.role == "system"]
                if results:
                    cut = [{**results[-1].content[0], "output": f"[cut {n}]"}]
                    memory.replace_content(results[-1].id, cut)
            mirror.push(state)
            assert [(m.id, m.content) for m in memory.messages()] == _fresh(state)

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(tmp))
