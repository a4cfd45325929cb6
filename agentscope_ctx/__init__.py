"""agentscope_ctx: keep an AgentScope agent's context window healthy.

Tool output is cut losslessly when it enters the context (the rest stays on disk, reachable
with `read_file`), old messages are summarised and saved to `dialog/` before they leave
memory, and the prompt stays within `max_input_tokens` at every model call.

Start with `ContextManager(ContextConfig.default(), model=...).attach(agent)`: on AgentScope
1.x `agent` is a `ReActAgent` (pass `formatter=` with the model), on 2.x an `Agent` (or give
`manager.middleware()` to `Agent(..., middlewares=[...])`). `build_agent` builds a whole agent
from YAML, `build_model` a provider's model; `ShellTool` and `fetch_url` are ready-made tools.

The package imports on both lines; the names that exist on one line only (`ContextMemory`
and `AtomicJSONSession` on 1.x; `ContextMiddleware`, `function_tool` (a function as a 2.x
tool allowed without asking) and `app_middlewares` (the middleware factory of 2.x's app
server) on 2.x) raise an `ImportError` that says so on the other.

Importing the package is cheap: each public name is imported on first use (`__getattr__`
below), so `import agentscope_ctx` loads no provider, model SDK or adapter
(`tests/edge/test_startup.py`; `python -m benchmarks startup` measures it).
"""

import importlib as _importlib
import typing as _typing

from . import _line
from ._version import __version__
from .core import _host as _core_host


def _line_host() -> _core_host.Host:
    """The installed line, as the core sees it (`core._host`): with `_SOURCES` below, the one
    place where the package dispatches between the AgentScope lines. Called on the core's
    first need (a message, a token counter); 2.x lends only its runner, loaded on the first
    helper-agent run."""
    if _line.IS_1X:
        host: _core_host.Host = _importlib.import_module(".agentscope1._host", __name__).HOST
        return host
    return _core_host.Host(
        runner=lambda: _typing.cast(
            "_core_host.Runner", _importlib.import_module(".agentscope2._runner", __name__)
        )
    )


_core_host.install(_line_host)

if _typing.TYPE_CHECKING:  # what the lazy imports below give, for type checkers and IDEs
    from ._agent_config import build_agent
    from ._providers import ModelConfig, Models, build_model, load_models
    from .core._errors import (
        CompactionError,
        ConfigError,
        ContextError,
        ContextRuntimeError,
        ContextUsageError,
        OffloadError,
        PersistenceError,
        PromptTooLargeError,
    )
    from .core._pipeline import PipelineReport
    from .core.compaction._compactor import CompactionResult, Compactor
    from .core.config._config import (
        CompactorConfig,
        ConsolidationConfig,
        ContextConfig,
        RecallConfig,
        SummarizerConfig,
        ToolResultConfig,
    )
    from .core.context._pins import PIN_MARK
    from .core.tokens._tokens import TokenCounter
    from .core.truncation._truncation import TRUNCATION_NOTICE_MARKER
    from .services._breakdown import ContextBreakdown
    from .services._services import ContextUsage
    from .stores._dialog import DialogReadReport, DialogStore
    from .tools import ShellTool, fetch_url

    if _line.IS_1X:
        from .agentscope1._manager import ContextManager
        from .agentscope1._session import AtomicJSONSession
        from .core.context._memory import ContextMemory
    else:
        from .agentscope2 import (
            ContextManager,
            ContextMiddleware,
            app_middlewares,
            function_tool,
        )

__all__ = [
    "PIN_MARK",
    "TRUNCATION_NOTICE_MARKER",
    "AtomicJSONSession",
    "CompactionError",
    "CompactionResult",
    "Compactor",
    "CompactorConfig",
    "ConfigError",
    "ConsolidationConfig",
    "ContextBreakdown",
    "ContextConfig",
    "ContextError",
    "ContextManager",
    "ContextMemory",
    "ContextMiddleware",
    "ContextRuntimeError",
    "ContextUsage",
    "ContextUsageError",
    "DialogReadReport",
    "DialogStore",
    "ModelConfig",
    "Models",
    "OffloadError",
    "PersistenceError",
    "PipelineReport",
    "PromptTooLargeError",
    "RecallConfig",
    "ShellTool",
    "SummarizerConfig",
    "TokenCounter",
    "ToolResultConfig",
    "__version__",
    "app_middlewares",
    "build_agent",
    "build_model",
    "fetch_url",
    "function_tool",
    "load_models",
]

_SOURCES: dict[str, str] = {
    "TRUNCATION_NOTICE_MARKER": "core.truncation._truncation",
    "CompactionError": "core._errors",
    "CompactionResult": "core.compaction._compactor",
    "Compactor": "core.compaction._compactor",
    "CompactorConfig": "core.config._config",
    "ConfigError": "core._errors",
    "ConsolidationConfig": "core.config._config",
    "ContextBreakdown": "services._breakdown",
    "ContextConfig": "core.config._config",
    "ContextError": "core._errors",
    "ContextRuntimeError": "core._errors",
    "ContextUsage": "services._services",
    "ContextUsageError": "core._errors",
    "DialogReadReport": "stores._dialog",
    "DialogStore": "stores._dialog",
    "ModelConfig": "_providers",
    "Models": "_providers",
    "OffloadError": "core._errors",
    "PersistenceError": "core._errors",
    "PIN_MARK": "core.context._pins",
    "PipelineReport": "core._pipeline",
    "PromptTooLargeError": "core._errors",
    "RecallConfig": "core.config._config",
    "ShellTool": "tools",
    "SummarizerConfig": "core.config._config",
    "TokenCounter": "core.tokens._tokens",
    "ToolResultConfig": "core.config._config",
    "build_agent": "_agent_config",
    "build_model": "_providers",
    "fetch_url": "tools",
    "load_models": "_providers",
}
"""Where each public name lives. Names are imported on first use (module `__getattr__`), so
`import agentscope_ctx` costs about what `import agentscope` does: the providers, the models
(openai, mcp) and the adapters load only when a name that needs them is used."""
if _line.IS_1X:
    _SOURCES.update(
        ContextManager="agentscope1._manager",
        ContextMemory="core.context._memory",
        AtomicJSONSession="agentscope1._session",
    )
else:
    _SOURCES.update(
        ContextManager="agentscope2",
        ContextMiddleware="agentscope2",
        app_middlewares="agentscope2",
        function_tool="agentscope2",
    )

_ONLY_2X = frozenset({"ContextMiddleware", "app_middlewares", "function_tool"})
_MISSING = frozenset(__all__) - set(_SOURCES) - {"__version__"}
"""Public names that need the other AgentScope line."""
if _MISSING:
    __all__ = [name for name in __all__ if name not in _MISSING]

if not _typing.TYPE_CHECKING:  # hidden from type checkers: a typo must stay an error there

    def __getattr__(name: str) -> object:
        if name in _SOURCES:
            value = getattr(_importlib.import_module(f".{_SOURCES[name]}", __name__), name)
            globals()[name] = value  # imported once; later lookups do not come here
            return value
        if name in _MISSING:
            line = "2.x" if name in _ONLY_2X else "1.x"
            raise ImportError(
                f"agentscope_ctx.{name} needs AgentScope {line}; AgentScope "
                f"{_line.AGENTSCOPE_VERSION} is installed"
            )
        raise AttributeError(f"module 'agentscope_ctx' has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__))
