"""This package's functions as AgentScope 2.x tools, allowed without asking the user.

A 2.x `FunctionTool` without a `permission` asks the user before every call; our tools are
safe by construction (`remember`/`log_today` write under `memory/` only, `search_history`
reads the index), so they are allowed outright (a deny rule of the agent's permission engine
still applies). The functions are the same as on 1.x; what they return (a `ToolResponse` of
text blocks, or a string) is given to the agent as one text.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from agentscope.message import TextBlock, ToolResultState
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, ToolChunk, ToolResponse

from .._long_term import LongTermMemory
from .._recall import Recall

__all__ = ["function_tool", "memory_tools", "search_tool"]


def function_tool(func: Callable[..., Any], *, read_only: bool) -> FunctionTool:
    """`func` as a 2.x tool (its name, docstring and signature), allowed without asking.

    Args:
        func: the tool function (sync or async; returns text, a `ToolChunk`, or a
            `ToolResponse` of text blocks).
        read_only: the tool has no side effects (the agent may take its fast ALLOW path
            and run it concurrently with others).
    """
    spec = FunctionTool(func)  # reads the name, description and schema off `func`

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
        input_schema=spec.input_schema,
        is_read_only=read_only,
        is_concurrency_safe=read_only,
        permission=PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message=f"{spec.name} is an agentscope_ctx tool: allowed.",
        ),
    )


def memory_tools(long_term: LongTermMemory) -> list[FunctionTool]:
    """`remember` and `log_today` (they write under `memory/` only)."""
    return [
        function_tool(long_term.remember, read_only=False),
        function_tool(long_term.log_today, read_only=False),
    ]


def search_tool(recall: Recall) -> FunctionTool:
    """`search_history` of one agent's recall."""
    return function_tool(recall.search_history, read_only=True)


def _text(result: object) -> str:
    if isinstance(result, ToolResponse):
        return "".join(b.text for b in result.content if isinstance(b, TextBlock))
    return result if isinstance(result, str) else str(result)
