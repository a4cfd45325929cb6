"""A session's agent as a user hand-wires it, on the installed AgentScope line (for
`benchmarks.fleet.load_worker`): a real agent with a real toolkit and a scripted model, its
`ContextManager` of its own attached.

- 2.x: an `Agent` with the manager's middleware (wrapped in `Timed`, which times the package's
  hooks per reply), the tool in a `Toolkit` of `FunctionTool`s;
- 1.x: a `ReActAgent` with the OpenAI formatter, the tool registered in a `Toolkit`,
  `manager.attach(agent)`; the package's time per reply is not measured there (its hooks, the
  memory, the model guard and the toolkit middleware are five places): `replies` stays empty.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentscope_ctx._line import IS_1X

__all__ = ["Wired", "wire"]


class Wired:
    """An agent to talk to: `say` one user turn; `replies`: the package's seconds per reply
    (2.x only)."""

    def __init__(self, agent: Any, replies: list[float]) -> None:
        self.agent = agent
        self.replies = replies

    async def say(self, words: str) -> None:
        if IS_1X:
            from agentscope.message import Msg

            await self.agent(Msg("user", words, "user"))
            return
        from agentscope.message import UserMsg

        async for _ in self.agent.reply_stream(UserMsg(name="user", content=words)):
            pass


def wire(config: Any, model: Any, helper: Any, tool: Callable[[int], str]) -> tuple[Any, Wired]:
    """The manager on `config` (its compactor's model `helper`) and the agent on `model` with
    `tool`, wired together."""
    from agentscope_ctx import ContextManager

    if IS_1X:
        from agentscope.agent import ReActAgent
        from agentscope.formatter import OpenAIChatFormatter
        from agentscope.message import TextBlock
        from agentscope.tool import Toolkit, ToolResponse

        def cat(n: int) -> ToolResponse:
            """Print log n.

            Args:
                n (int): which log.
            """
            return ToolResponse(content=[TextBlock(type="text", text=tool(n))])

        manager = ContextManager(config, model=helper, formatter=OpenAIChatFormatter())
        toolkit = Toolkit()
        toolkit.register_tool_function(cat)
        agent = ReActAgent(
            name="assistant",
            sys_prompt="You read logs and answer briefly.",
            model=model,
            formatter=OpenAIChatFormatter(),
            toolkit=toolkit,
        )
        agent.set_console_output_enabled(False)
        manager.attach(agent)
        return manager, Wired(agent, [])

    from agentscope.agent import Agent
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool, Toolkit

    from .timed import Timed

    def cat(n: int) -> str:  # type: ignore[misc]  # the same tool, 2.x's return
        """Print log n.

        Args:
            n (int): which log.
        """
        return tool(n)

    manager = ContextManager(config, model=helper)
    timed = Timed(manager.middleware())
    allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed")
    agent = Agent(
        name="assistant",
        system_prompt="You read logs and answer briefly.",
        model=model,
        toolkit=Toolkit(tools=[FunctionTool(cat, permission=allow, is_read_only=True)]),
        middlewares=[timed],
    )
    return manager, Wired(agent, timed.replies)
