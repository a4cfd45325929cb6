"""The installed AgentScope line as the `line` fixture gives it (`tests/conftest.py`): a real
agent of that line (1.x `ReActAgent` with `ContextManager.attach`, 2.x `Agent` with the
middleware) with a scripted fake model (`tests/support/fakes.py`), tools made of plain
``str -> str`` functions, and what its model was sent, so that a behaviour both lines share is
one test."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentscope_ctx import ContextConfig, ContextManager, PipelineReport
from agentscope_ctx.core.context._memory import ContextMemory
from tests.support.fakes import FakeChatModel, text, tool_call
from tests.support.lines import IS_1X

Tool = Callable[[str], str]


def sent(call: dict[str, Any]) -> list[dict[str, Any]]:
    """The prompt of one recorded model call (`FakeChatModel.calls`) as the provider gets it:
    OpenAI chat messages (1.x: what the agent's formatter made; 2.x: the model's formatter on
    the `Msg` list it was given)."""
    return call["messages"] if IS_1X else call["formatted"]


def said(call: dict[str, Any], role: str) -> str:
    """The text of the messages of `role` in one recorded model call, as the provider gets it
    (`sent`)."""
    texts = []
    for message in sent(call):
        if message["role"] == role:
            content = message["content"]
            if isinstance(content, str):
                texts.append(content)
            elif content:
                texts += [block["text"] for block in content if block.get("type") == "text"]
    return "\n".join(texts)


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

    async def turn(self, words: str, *script: Any) -> str | None:
        """The user says `words`; the agent's model answers with `script` (then "ok"; a
        scripted model only). The text of the agent's reply."""
        if script:
            self.model.enqueue(*script)
        if IS_1X:
            from agentscope.message import Msg

            reply = await self.agent(Msg("user", words, "user"))
            return reply.get_text_content()  # type: ignore[no-any-return]
        from agentscope.message import UserMsg

        async for _ in self.agent.reply_stream(UserMsg(name="user", content=words)):
            pass
        return self.agent.state.context[-1].get_text_content()  # type: ignore[no-any-return]

    async def compact(self) -> int:
        """Compact now; the number of messages compacted."""
        report = await self.manager.compact(self.agent)
        return report.compacted

    async def run(self, **kwargs: Any) -> PipelineReport | None:
        """Run the agent's pipeline now, as before a model call (`force=`, `keep_ratio=`)."""
        if IS_1X:
            return await self.manager._binding(self.agent).pipeline.run(**kwargs)  # type: ignore[attr-defined]
        return await self.manager.run(self.manager.bind(self.agent), **kwargs)  # type: ignore[attr-defined]

    @property
    def memory(self) -> ContextMemory:
        return self.manager.memory_of(self.agent)

    def summary(self) -> str:
        """The compaction summary as the agent holds it (1.x: its `ContextMemory`; 2.x: its
        state's `summary`)."""
        if IS_1X:
            return str(self.agent.memory.compact_summary)
        return str(self.agent.state.summary)

    def prompt(self) -> str:
        """The last prompt the agent's model received, as JSON text."""
        return json.dumps(sent(self.model.calls[-1]), ensure_ascii=False)

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
    """The installed line: its name, fake model, answers and `session`."""

    name: str
    is_1x: bool = IS_1X
    fake_model: Callable[..., Any] = FakeChatModel
    tool_call: Callable[..., Any] = tool_call
    text: Callable[[str], Any] = text
    sent: Callable[[dict[str, Any]], list[dict[str, Any]]] = sent

    def toolkit(self, tools: dict[str, Tool] | list[Callable[..., str]]) -> Any:
        """A real `Toolkit` of the line holding `tools` (as `session` takes them)."""
        return _toolkit1(tools) if IS_1X else _toolkit2(tools)

    def session(
        self,
        config: ContextConfig,
        helper: Any,
        tools: dict[str, Tool] | list[Callable[..., str]],
        saved: dict[str, Any] | None = None,
        *,
        model: Any = None,
        formatter: Any = None,
        sys_prompt: str = "You help.",
    ) -> Session:
        """An agent whose tools are `tools` (named ``str -> str`` functions of one argument,
        `arg`; or plain functions returning text, async ones too, with Google docstrings), loaded
        from `saved` (`Session.saved`) if given, as a new process would. Its model is `model`
        (a scripted one answering "ok" by default); `formatter` is the 1.x formatter of both
        the agent and the manager (OpenAI's by default; 2.x models carry their own)."""
        if model is None:
            model = FakeChatModel(default="ok")
        if IS_1X:
            from agentscope.agent import ReActAgent
            from agentscope.formatter import OpenAIChatFormatter

            manager = ContextManager(
                config, model=helper, formatter=formatter or OpenAIChatFormatter()
            )
            agent = ReActAgent(
                name="coder",
                sys_prompt=sys_prompt,
                model=model,
                formatter=formatter or OpenAIChatFormatter(),
                toolkit=self.toolkit(tools),
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
                system_prompt=sys_prompt,
                model=model,
                toolkit=self.toolkit(tools),
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


def _functions(
    tools: dict[str, Tool] | list[Callable[..., str]], wrap: Callable[[str], Any]
) -> list[Callable[..., Any]]:
    if isinstance(tools, dict):
        return [_named(name, fn, wrap) for name, fn in tools.items()]

    def wrapped(fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def waited(*args: Any, **kwargs: Any) -> Any:
                return wrap(await fn(*args, **kwargs))

            return waited

        @functools.wraps(fn)
        def tool(*args: Any, **kwargs: Any) -> Any:
            return wrap(fn(*args, **kwargs))

        return tool

    return [wrapped(fn) for fn in tools]


def _toolkit1(tools: dict[str, Tool] | list[Callable[..., str]]) -> Any:
    from agentscope.message import TextBlock
    from agentscope.tool import Toolkit, ToolResponse

    def wrap(text: str) -> ToolResponse:
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    toolkit = Toolkit()
    for fn in _functions(tools, wrap):
        toolkit.register_tool_function(fn)
    return toolkit


def _toolkit2(tools: dict[str, Tool] | list[Callable[..., str]]) -> Any:
    from agentscope.tool import FunctionTool, Toolkit

    from tests.support.fakes import ALLOW

    return Toolkit(
        tools=[
            FunctionTool(fn, permission=ALLOW, is_read_only=False) for fn in _functions(tools, str)
        ]
    )


def installed() -> Line:
    """The installed line."""
    return Line("1.x" if IS_1X else "2.x")
