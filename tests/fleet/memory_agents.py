"""An agent of the installed AgentScope line, attached to a `ContextManager`, with a scripted
model: what the fleet memory tests (`test_memory`) drive on either line, and the 1.x worker
over a shared memory (`test_backend1`)."""

from __future__ import annotations

import json
from typing import Any

from agentscope_ctx import ContextManager
from tests.support.lines import IS_1X

if IS_1X:
    from agentscope.memory import InMemoryMemory
    from agentscope.message import Msg

    from tests.support.fakes import FakeChatModel, text, tool_call
    from tests.support.react1 import react
else:
    from agentscope.agent import Agent
    from agentscope.message import UserMsg
    from agentscope.tool import Toolkit

    from tests.support.fakes import FakeChatModel, text, tool_call

__all__ = ["FakeChatModel", "ask", "make_agent", "prompt_text", "text", "tool_call"]


def make_agent(
    manager: ContextManager, model: FakeChatModel, name: str = "helper", memory: Any = None
) -> Any:
    """A real agent of the installed line named `name`, `manager` attached; on 1.x over
    `memory` (an AgentScope memory; default a new `InMemoryMemory`)."""
    if IS_1X:
        agent = react(model, name=name, memory=InMemoryMemory() if memory is None else memory)
        manager.attach(agent)
        return agent
    return Agent(
        name=name,
        system_prompt="You help.",
        model=model,
        toolkit=Toolkit(),
        middlewares=[manager.middleware()],
    )


async def ask(agent: Any, content: str) -> Any:
    """One reply of `agent` to the user's `content`."""
    if IS_1X:
        return await agent(Msg("user", content, "user"))
    return await agent.reply(UserMsg(name="user", content=content))


def prompt_text(call: dict[str, Any]) -> str:
    """Everything the model was sent in one call, as text (the long-term note included)."""
    return json.dumps(call.get("formatted", call["messages"]), ensure_ascii=False, default=str)
