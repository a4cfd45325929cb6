"""`function_tool`: a plain Python function as an AgentScope 2.x tool that runs without asking.

A 2.x `FunctionTool` built without `permission=` asks the user before every call
(`tool/_adapters.py`: its `check_permissions` answers ASK), which parks a reply of an agent
nobody watches (the Summarizer) and interrupts the main agent's user for our own memory
tools. The tools agentscope_ctx adds are safe by construction (each refuses what it must not
do: paths outside its directory, empty input), so they are allowed; the agent's permission
engine still applies its deny and ask rules first, so a user can forbid one.

How the result reaches the model: the function returns `str` (the functions of this package
do, via `agentscope_ctx._runner.tool_text`); `FunctionTool` makes it one `TextBlock`, the
toolkit accumulates it into the call's `ToolResponse`, and the agent stores that as the
`ToolResultBlock` the formatter sends to the model (a 2.x `Agent` cuts it only above its
`ContextConfig.tool_result_limit`). A 1.x `ToolResponse` returned instead would arrive as its
`str()`: do not register 1.x tool functions this way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool

__all__ = ["function_tool"]


def function_tool(
    func: Callable[..., Any],
    *,
    read_only: bool,
    name: str | None = None,
    reason: str | None = None,
) -> FunctionTool:
    """`func` as a 2.x `FunctionTool`, allowed without asking the user.

    The schema comes from the function as on 1.x: its name, the first paragraph of its
    Google-style docstring (the description) and its typed parameters with their `Args:`
    descriptions.

    Args:
        func: A function or bound method returning the result's text (`str`).
        read_only: Whether it only reads. Read-only tools take the permission engine's fast
            path and may run concurrently with other calls of a batch; the others run one at
            a time (our writers append to shared files).
        name: The tool's name; the function's name by default.
        reason: The permission decision's message (shown in permission events); a generic
            one by default.

    Returns:
        The tool, for `Toolkit(tools=[...])` or `await toolkit.add_tool(...)`.
    """
    tool_name = name or getattr(func, "__name__", "tool")
    permission = PermissionDecision(
        behavior=PermissionBehavior.ALLOW,
        message=reason or f"{tool_name} is an agentscope_ctx tool: allowed without asking.",
    )
    return FunctionTool(
        func,
        name=tool_name,
        is_read_only=read_only,
        is_concurrency_safe=read_only,
        permission=permission,
    )
