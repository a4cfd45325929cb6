"""`build_agent` on AgentScope 1.x: a `ReActAgent` from an agent config (read and checked by
the edge, `agentscope_ctx._agent_config.load_agent_spec`, which passes its parts in), its tools
in a `Toolkit`, and a `ContextManager` attached to it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentscope.agent import ReActAgent
from agentscope.tool import Toolkit

from ._manager import ContextManager

if TYPE_CHECKING:
    from agentscope.formatter import FormatterBase
    from agentscope.model import ChatModelBase

    from ..core.config._config import ContextConfig

__all__ = ["build_agent_1x"]


def build_agent_1x(
    config: ContextConfig,
    *,
    name: str,
    sys_prompt: str,
    max_iters: int,
    tools: Sequence[Callable[..., Any]],
    model: ChatModelBase,
    formatter: FormatterBase,
    compactor_model: ChatModelBase,
    compactor_formatter: FormatterBase,
) -> tuple[ReActAgent, ContextManager]:
    """The 1.x `ReActAgent` of an agent config, with its attached `ContextManager`.

    Args:
        config: The config's ``context:`` section.
        name: The agent's name.
        sys_prompt: Its system prompt.
        max_iters: Most reasoning-acting steps in one reply.
        tools: The built-in tool functions the config asks for.
        model: The agent's model.
        formatter: Its formatter.
        compactor_model: The Compactor's and the Summarizer's model.
        compactor_formatter: Its formatter.
    """
    toolkit = Toolkit()
    for tool in tools:
        toolkit.register_tool_function(tool)
    agent = ReActAgent(
        name=name,
        sys_prompt=sys_prompt,
        model=model,
        formatter=formatter,
        toolkit=toolkit,
        max_iters=max_iters,
    )
    manager = ContextManager(config, model=compactor_model, formatter=compactor_formatter)
    manager.attach(agent)
    return agent, manager
