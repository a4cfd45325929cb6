"""agentscope_ctx: keep an AgentScope agent's context window healthy.

Tool output is cut losslessly when it enters the context (the rest stays on disk, reachable
with `read_file`), old messages are summarised and saved to `dialog/` before they leave
memory, and the prompt stays within `max_input_tokens` at every model call.

Start with `ContextManager(ContextConfig.default(), model=...).attach(agent)`: on AgentScope
1.x `agent` is a `ReActAgent` (pass `formatter=` with the model), on 2.x an `Agent` (or give
`manager.middleware()` to `Agent(..., middlewares=[...])`). `build_agent` builds a whole agent
from YAML, `build_model` a provider's model; `ShellTool` and `fetch_url` are ready-made tools.

The package imports on both lines; the names that exist on one line only (`ContextMemory`
and `AtomicJSONSession` on 1.x; `ContextMiddleware` and `function_tool`, a function as a 2.x
tool allowed without asking, on 2.x) raise an `ImportError` that says so on the other.

Importing the package is cheap: each public name is imported on first use (`__getattr__`
below), so `import agentscope_ctx` loads no provider, model SDK or adapter
(`tests/test_startup.py`; `python -m benchmarks startup` measures it).
"""

import importlib as _importlib
import typing as _typing

from . import _line

if _typing.TYPE_CHECKING:  # what the lazy imports below give, for type checkers and IDEs
    from ._agent_config import build_agent
    from ._compactor import CompactionResult, Compactor
    from ._config import (
        CompactorConfig,
        ConsolidationConfig,
        ContextConfig,
        RecallConfig,
        SummarizerConfig,
        ToolResultConfig,
    )
    from ._dialog import DialogReadReport, DialogStore
    from ._errors import (
        CompactionError,
        ConfigError,
        ContextError,
        ContextRuntimeError,
        ContextUsageError,
        OffloadError,
        PersistenceError,
        PromptTooLargeError,
    )
    from ._pins import PIN_MARK
    from ._pipeline import PipelineReport
    from ._providers import ModelConfig, Models, build_model, load_models
    from ._services import ContextUsage
    from ._tokens import TokenCounter
    from ._truncation import TRUNCATION_NOTICE_MARKER
    from .tools import ShellTool, fetch_url

    if _line.IS_1X:
        from ._manager import ContextManager
        from ._memory import ContextMemory
        from ._session import AtomicJSONSession
    else:
        from ._v2 import ContextManager, ContextMiddleware, function_tool

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
    "build_agent",
    "build_model",
    "fetch_url",
    "function_tool",
    "load_models",
]

__version__ = "0.1.0"

_SOURCES: dict[str, str] = {
    "TRUNCATION_NOTICE_MARKER": "_truncation",
    "CompactionError": "_errors",
    "CompactionResult": "_compactor",
    "Compactor": "_compactor",
    "CompactorConfig": "_config",
    "ConfigError": "_errors",
    "ConsolidationConfig": "_config",
    "ContextConfig": "_config",
    "ContextError": "_errors",
    "ContextRuntimeError": "_errors",
    "ContextUsage": "_services",
    "ContextUsageError": "_errors",
    "DialogReadReport": "_dialog",
    "DialogStore": "_dialog",
    "ModelConfig": "_providers",
    "Models": "_providers",
    "OffloadError": "_errors",
    "PersistenceError": "_errors",
    "PIN_MARK": "_pins",
    "PipelineReport": "_pipeline",
    "PromptTooLargeError": "_errors",
    "RecallConfig": "_config",
    "ShellTool": "tools",
    "SummarizerConfig": "_config",
    "TokenCounter": "_tokens",
    "ToolResultConfig": "_config",
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
        ContextManager="_manager", ContextMemory="_memory", AtomicJSONSession="_session"
    )
else:
    _SOURCES.update(ContextManager="_v2", ContextMiddleware="_v2", function_tool="_v2")

_ONLY_2X = frozenset({"ContextMiddleware", "function_tool"})
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
