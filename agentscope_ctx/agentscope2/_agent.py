"""`build_agent` on AgentScope 2.x: a 2.x `Agent` from the same agent config as on 1.x.

The config is read by the line-neutral `load_agent_spec` (the edge), which passes its parts
in; here they become a 2.x `Agent`
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

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig
    from ..services._agent_parts import AgentParts

__all__ = ["build_agent_v2"]


def build_agent_v2(config: ContextConfig, parts: AgentParts) -> tuple[Agent, ContextManager]:
    """The 2.x `Agent` of an agent config (`config`: its ``context:`` section; `parts`: the
    rest; the formatters are not used: a 2.x model owns its own), with its `ContextManager`
    (see the module)."""
    manager = ContextManager(config, model=parts.compactor_model)
    function_tools: list[ToolBase] = [function_tool(t, read_only=True) for t in parts.tools]
    agent = Agent(
        name=parts.name,
        system_prompt=parts.sys_prompt,
        model=parts.model,
        toolkit=Toolkit(tools=function_tools),
        middlewares=[manager.middleware()],
        react_config=ReActConfig(max_iters=parts.max_iters),
    )
    return agent, manager
