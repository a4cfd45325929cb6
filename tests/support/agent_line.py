"""The installed AgentScope line as the `line` fixture gives it (`tests/conftest.py`): a real
agent of that line (1.x `ReActAgent` with `ContextManager.attach`, 2.x `Agent` with the
middleware) with a scripted fake model, tools made of plain ``str -> str`` functions, and the
prompt its model last received, so that a behaviour both lines share is one test."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.core._memory import ContextMemory
from tests.support.lines import IS_1X

Tool = Callable[[str], str]


@dataclass
class Session:
    """One agent with a `ContextManager`, on the installed line."""

    manager: ContextManager
    agent: Any
    model: Any
    """The agent's scripted model (`enqueue`, `calls`)."""
    helper: Any
    """The compactor's scripted model."""
    calls: list[str] = field(default_factory=list)

    async def turn(self, words: str, *script: Any) -> None:
        """The user says `words`; the agent's model answers with `script` (then "ok")."""
        self.model.enqueue(*script)
        if IS_1X:
            from agentscope.message import Msg

            await self.agent(Msg("user", words, "user"))
        else:
            from agentscope.message import UserMsg

            async for _ in self.agent.reply_stream(UserMsg(name="user", content=words)):
                pass

    async def compact(self) -> int:
        """Compact now; the number of messages compacted."""
        report = await self.manager.compact(self.agent)
        return report.compacted

    @property
    def memory(self) -> ContextMemory:
        return self.manager.memory_of(self.agent)

    def prompt(self) -> str:
        """The last prompt the agent's model received, as JSON text."""
        last = self.model.calls[-1]
        return json.dumps(last["messages"] if IS_1X else last["formatted"], ensure_ascii=False)

    def saved(self) -> dict[str, Any]:
        """The agent's state as the line saves it (1.x `state_dict`, 2.x `AgentState`), as
        JSON data."""
        if IS_1X:
            return json.loads(json.dumps(self.agent.state_dict()))
        return json.loads(self.agent.state.model_dump_json())

    async def close(self) -> None:
        await self.manager.close()


@dataclass
class Line:
    """The installed line: its name, fake model and tool call, and `session`."""

    name: str
    fake_model: Callable[..., Any]
    tool_call: Callable[..., Any]

    def session(
        self,
        config: ContextConfig,
        helper: Any,
        tools: dict[str, Tool],
        saved: dict[str, Any] | None = None,
    ) -> Session:
        """An agent whose tools are `tools` (each takes one string argument, `arg`), loaded
        from `saved` (`Session.saved`) if given, as a new process would."""
        model = self.fake_model(default="ok")
        if IS_1X:
            from agentscope.agent import ReActAgent
            from agentscope.formatter import OpenAIChatFormatter

            manager = ContextManager(config, model=helper, formatter=OpenAIChatFormatter())
            agent = ReActAgent(
                name="coder",
                sys_prompt="You help.",
                model=model,
                formatter=OpenAIChatFormatter(),
                toolkit=_toolkit1(tools),
            )
            agent.set_console_output_enabled(False)
            manager.attach(agent)
            if saved is not None:
                agent.load_state_dict(saved)
        else:
            from agentscope.agent import Agent
            from agentscope.state import AgentState

            manager = ContextManager(config, model=helper)
            agent = Agent(
                name="coder",
                system_prompt="You help.",
                model=model,
                toolkit=_toolkit2(tools),
                middlewares=[manager.middleware()],
                **({} if saved is None else {"state": AgentState.model_validate(saved)}),
            )
        return Session(manager, agent, model, helper)


def _named(name: str, fn: Tool, wrap: Callable[[str], Any]) -> Callable[[str], Any]:
    def tool(arg: str) -> Any:
        return wrap(fn(arg))

    tool.__name__ = name
    tool.__doc__ = f"The {name} tool.\n\n        Args:\n            arg (str): its argument.\n"
    return tool


def _toolkit1(tools: dict[str, Tool]) -> Any:
    from agentscope.message import TextBlock
    from agentscope.tool import Toolkit, ToolResponse

    def wrap(text: str) -> ToolResponse:
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    toolkit = Toolkit()
    for name, fn in tools.items():
        toolkit.register_tool_function(_named(name, fn, wrap))
    return toolkit


def _toolkit2(tools: dict[str, Tool]) -> Any:
    from agentscope.tool import FunctionTool, Toolkit

    from tests.support.fakes2 import ALLOW

    return Toolkit(
        tools=[
            FunctionTool(_named(name, fn, str), permission=ALLOW, is_read_only=False)
            for name, fn in tools.items()
        ]
    )


def installed() -> Line:
    """The installed line."""
    if IS_1X:
        from tests.support.fakes import FakeChatModel, tool_call

        return Line("1.x", FakeChatModel, tool_call)
    from tests.support.fakes2 import FakeChatModel as FakeChatModel2
    from tests.support.fakes2 import tool_call as tool_call2

    return Line("2.x", FakeChatModel2, tool_call2)
