"""The AgentScope 2.x adapter: `ContextManager` and its `ContextMiddleware` (a native 2.x
middleware) bring to a 2.x `Agent` what the hooks bring to a 1.x `ReActAgent`; see
`_middleware` and `docs/agentscope2.md`. Importing this package needs AgentScope 2.x."""

from .._line import AGENTSCOPE_VERSION, IS_1X

if IS_1X:
    raise ImportError(
        f"agentscope_ctx.agentscope2 needs AgentScope 2.x; AgentScope {AGENTSCOPE_VERSION} is "
        "installed (on 1.x, use agentscope_ctx.ContextManager)"
    )
from ._manager import ContextManager  # after the line checks
from ._middleware import NOTICE_EVENT, ContextMiddleware
from ._read_file import READ_FILE, ReadFileTool
from ._tools import function_tool

__all__ = [
    "NOTICE_EVENT",
    "READ_FILE",
    "ContextManager",
    "ContextMiddleware",
    "ReadFileTool",
    "function_tool",
]
