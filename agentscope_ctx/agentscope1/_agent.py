"""`build_agent` on AgentScope 1.x: a `ReActAgent` from an agent config (read and checked by
the edge, `agentscope_ctx._agent_config.load_agent_spec`, which passes its parts in), its tools
in a `Toolkit`, and a `ContextManager` attached to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentscope.agent import ReActAgent
from agentscope.tool import Toolkit

from ._manager import ContextManager

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig
    from ..services._agent_parts import AgentParts

__all__ = ["build_agent_1x"]


def build_agent_1x(config: ContextConfig, parts: AgentParts) -> tuple[ReActAgent, ContextManager]:
    """The 1.x `ReActAgent` of an agent config (`config`: its ``context:`` section; `parts`:
    the rest), with its attached `ContextManager`."""
    assert parts.formatter is not None and parts.compactor_formatter is not None, (
        "AgentScope 1.x models need their formatters"
    )
    toolkit = Toolkit()
    for tool in parts.tools:
        toolkit.register_tool_function(tool)
    agent = ReActAgent(
        name=parts.name,
        sys_prompt=parts.sys_prompt,
        model=parts.model,
        formatter=parts.formatter,
        toolkit=toolkit,
        max_iters=parts.max_iters,
    )
    manager = ContextManager(
        config, model=parts.compactor_model, formatter=parts.compactor_formatter
    )
    manager.attach(agent)
    return agent, manager
