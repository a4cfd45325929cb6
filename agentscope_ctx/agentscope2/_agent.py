"""`build_agent` on AgentScope 2.x: a 2.x `Agent` from the same agent config as on 1.x.

The config is read by the line-neutral `load_agent_spec`; here it becomes a 2.x `Agent`
(`react_config.max_iters` = the section's `max_iters`) whose toolkit holds the section's
tools as function tools, and the context middleware. Decisions:

- The built-in tools (`run_shell`, `fetch_url`) are allowed without asking the user: they
  only read (the shell runs whitelisted read-only programs in `tool_root`), and listing
  them under ``tools:`` is the user's grant. A deny rule of the agent's permission engine
  still applies.
- The context part is a 2.x `ContextManager` (its middleware is the agent's innermost), with
  the config's compactor model for the Compactor and the Summarizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentscope.agent import Agent, ReActConfig
from agentscope.tool import ToolBase, Toolkit

from ._manager import ContextManager
from ._tools import function_tool

if TYPE_CHECKING:  # the edge reads the config and passes it in
    from .._agent_config import AgentSpec

__all__ = ["build_agent_v2"]


def build_agent_v2(spec: AgentSpec) -> tuple[Agent, ContextManager]:
    """The 2.x `Agent` of an agent config, with its `ContextManager` (see the module)."""
    manager = ContextManager(spec.config, model=spec.models.compactor_model)
    tools: list[ToolBase] = [function_tool(t, read_only=True) for t in spec.tool_functions()]
    agent = Agent(
        name=spec.section.name,
        system_prompt=spec.section.sys_prompt,
        model=spec.models.model,
        toolkit=Toolkit(tools=tools),
        middlewares=[manager.middleware()],
        react_config=ReActConfig(max_iters=spec.section.max_iters),
    )
    return agent, manager
