"""`function_tool`: a plain Python function as an AgentScope 2.x tool that runs without asking.

A 2.x `FunctionTool` built without `permission=` asks the user before every call
(`tool/_adapters.py`: its `check_permissions` answers ASK), which parks a reply of an agent
nobody watches (the Summarizer) and interrupts the main agent's user for our own memory
tools. The tools agentscope_ctx adds are safe by construction (each refuses what it must not
do: paths outside its directory, empty input), so they are allowed; the agent's permission
engine still applies its deny and ask rules first, so a user can forbid one.

How the result reaches the model: the function returns `str` (the functions of this package
do, via `agentscope_ctx.core._runner.tool_text`), a `ToolChunk`, or a `ToolResponse` of text
blocks (taken as its text); it becomes one `TextBlock`, the toolkit accumulates it into the
call's `ToolResponse`, and the agent stores that as the `ToolResultBlock` the formatter sends
to the model.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from agentscope.message import TextBlock, ToolResultState
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, ToolChunk, ToolResponse

from ..core._tool_schema import plain_optionals
from ..memory._long_term import LongTermMemory
from ..recall._recall import Recall

__all__ = ["function_tool", "memory_tools", "search_tool"]


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
        func: A function or bound method (sync or async) returning the result's text, a
            `ToolChunk`, or a `ToolResponse` of text blocks.
        read_only: Whether it only reads. Read-only tools take the permission engine's fast
            path and may run concurrently with other calls of a batch; the others run one at
            a time (our writers append to shared files).
        name: The tool's name; the function's name by default.
        reason: The permission decision's message (shown in permission events); a generic
            one by default.

    Returns:
        The tool, for `Toolkit(tools=[...])` or `await toolkit.add_tool(...)`.
    """
    spec = FunctionTool(func, name=name)  # reads the description and schema off `func`

    async def call(**kwargs: Any) -> ToolChunk:
        result = func(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, ToolChunk):
            return result
        return ToolChunk(content=[TextBlock(text=_text(result))], state=ToolResultState("running"))

    return FunctionTool(
        call,
        name=spec.name,
        description=spec.description,
        input_schema=plain_optionals(spec.input_schema),
        is_read_only=read_only,
        is_concurrency_safe=read_only,
        permission=PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message=reason or f"{spec.name} is an agentscope_ctx tool: allowed without asking.",
        ),
    )


def memory_tools(long_term: LongTermMemory) -> list[FunctionTool]:
    """`remember` and `log_today` (they write under `memory/` only)."""
    return [function_tool(func, read_only=False) for func in long_term.tool_functions()]


def search_tool(recall: Recall) -> FunctionTool:
    """`search_history` of one agent's recall."""
    return function_tool(recall.search_history, read_only=True)


def _text(result: object) -> str:
    if isinstance(result, ToolResponse):
        return "".join(b.text for b in result.content if isinstance(b, TextBlock))
    return result if isinstance(result, str) else str(result)
