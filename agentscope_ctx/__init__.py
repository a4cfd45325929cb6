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
"""

import typing as _typing

from . import _line
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

_ONLY_2X = frozenset({"ContextMiddleware", "function_tool"})
_MISSING = frozenset(__all__) - set(globals())
"""Public names that need the other AgentScope line."""
if _MISSING:
    __all__ = [name for name in __all__ if name not in _MISSING]

if not _typing.TYPE_CHECKING:  # hidden from type checkers: a typo must stay an error there

    def __getattr__(name: str) -> object:
        if name in _MISSING:
            line = "2.x" if name in _ONLY_2X else "1.x"
            raise ImportError(
                f"agentscope_ctx.{name} needs AgentScope {line}; AgentScope "
                f"{_line.AGENTSCOPE_VERSION} is installed"
            )
        raise AttributeError(f"module 'agentscope_ctx' has no attribute {name!r}")
