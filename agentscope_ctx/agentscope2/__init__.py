"""The AgentScope 2.x adapter: `ContextManager` and its `ContextMiddleware` (a native 2.x
middleware) bring to a 2.x `Agent` what the hooks bring to a 1.x `ReActAgent`; see
`_middleware` and `docs/contributors/agentscope2.md`. Importing this package needs AgentScope 2.x.

Its names load on first use (like the package's): the core asks this adapter's `_host` for
the line's parts while it is being imported, which must not import the whole adapter."""

import importlib as _importlib
import typing as _typing

from agentscope import __version__ as _version

if str(_version).startswith("1."):
    raise ImportError(
        f"agentscope_ctx.agentscope2 needs AgentScope 2.x; AgentScope {_version} is "
        "installed (on 1.x, use agentscope_ctx.ContextManager)"
    )

if _typing.TYPE_CHECKING:
    from ._app import AppMiddlewares, app_middlewares
    from ._manager import ContextManager, ContextMiddleware
    from ._middleware import NOTICE_EVENT
    from ._read_file import READ_FILE, ReadFileTool
    from ._tools import function_tool

__all__ = [
    "NOTICE_EVENT",
    "READ_FILE",
    "AppMiddlewares",
    "ContextManager",
    "ContextMiddleware",
    "ReadFileTool",
    "app_middlewares",
    "function_tool",
]

_SOURCES = {
    "AppMiddlewares": "_app",
    "NOTICE_EVENT": "_middleware",
    "app_middlewares": "_app",
    "READ_FILE": "_read_file",
    "ContextManager": "_manager",
    "ContextMiddleware": "_manager",
    "ReadFileTool": "_read_file",
    "function_tool": "_tools",
}

if not _typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        if name in _SOURCES:
            value = getattr(_importlib.import_module(f".{_SOURCES[name]}", __name__), name)
            globals()[name] = value
            return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__))
