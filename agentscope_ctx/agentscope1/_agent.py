"""`build_agent` on AgentScope 1.x: a `ReActAgent` from an agent config (read and checked by
the edge, `agentscope_ctx._agent_config.load_agent_spec`), its tools in a `Toolkit`, and a
`ContextManager` attached to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentscope.agent import ReActAgent
from agentscope.tool import Toolkit

from ._manager import ContextManager

if TYPE_CHECKING:  # the edge reads the config and passes it in
    from .._agent_config import AgentSpec

__all__ = ["build_agent_1x"]


def build_agent_1x(spec: AgentSpec) -> tuple[ReActAgent, ContextManager]:
    """The 1.x `ReActAgent` of an agent config, with its attached `ContextManager`."""
    toolkit = Toolkit()
    for tool in spec.tool_functions():
        toolkit.register_tool_function(tool)
    section, models = spec.section, spec.models
    agent = ReActAgent(
        name=section.name,
        sys_prompt=section.sys_prompt,
        model=models.model,
        formatter=models.formatter,
        toolkit=toolkit,
        max_iters=section.max_iters,
    )
    manager = ContextManager(
        spec.config, model=models.compactor_model, formatter=models.compactor_formatter
    )
    manager.attach(agent)
    return agent, manager
