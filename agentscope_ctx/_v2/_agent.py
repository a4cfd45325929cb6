"""`build_agent` on AgentScope 2.x: a 2.x `Agent` from the same agent config as on 1.x.

The config is read by the line-neutral `load_agent_spec`; here it becomes a 2.x `Agent`
(`react_config.max_iters` = the section's `max_iters`) whose toolkit holds the section's
tools as function tools, and the context middleware. Decisions:

- The built-in tools (`run_shell`, `fetch_url`) are allowed without asking the user: they
  only read (the shell runs whitelisted read-only programs in `tool_root`), and listing
  them under ``tools:`` is the user's grant. A deny rule of the agent's permission engine
  still applies.
- The context part is, for now, the phase-1 `ContextMiddleware` (first truncation and
  `read_file`); the compactor model of the config is not used until the 2.x
  `ContextManager` takes over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentscope.agent import Agent, ReActConfig
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, ToolBase, Toolkit

from .._agent_config import AgentSpec
from ._middleware import ContextMiddleware

__all__ = ["build_agent_v2", "function_tool"]


def function_tool(func: Callable[..., Any], *, read_only: bool) -> FunctionTool:
    """`func` as a 2.x tool the agent runs without asking the user (its name, description
    and parameters from the function, as `FunctionTool` reads them).

    Args:
        func: the tool function (sync or async; returns text or a `ToolChunk`).
        read_only: the tool has no side effects (the agent may take its fast ALLOW path
            and run it concurrently with others).
    """
    return FunctionTool(
        func,
        is_read_only=read_only,
        is_concurrency_safe=read_only,
        permission=PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message="an agentscope_ctx tool the configuration allows",
        ),
    )


def build_agent_v2(spec: AgentSpec) -> tuple[Agent, ContextMiddleware]:
    """The 2.x `Agent` of an agent config, with the context middleware (see the module)."""
    middleware = ContextMiddleware(spec.config)
    tools: list[ToolBase] = [function_tool(t, read_only=True) for t in spec.tool_functions()]
    agent = Agent(
        name=spec.section.name,
        system_prompt=spec.section.sys_prompt,
        model=spec.models.model,
        toolkit=Toolkit(tools=tools),
        middlewares=[middleware],
        react_config=ReActConfig(max_iters=spec.section.max_iters),
    )
    return agent, middleware
