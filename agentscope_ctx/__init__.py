"""agentscope_ctx: keep an AgentScope ReActAgent's context window healthy.

Tool output is cut losslessly when it enters the context (the rest stays on disk, reachable
with `read_file`), old messages are summarised and saved to `dialog/` before they leave
memory, and the prompt stays within `max_input_tokens` at every model call.

Start with `ContextManager(ContextConfig.default(), model=..., formatter=...).attach(agent)`,
or build a whole agent from YAML with `build_agent`; `build_model` makes a provider's model,
`ShellTool` and `fetch_url` are ready-made tools.

The package imports on both AgentScope lines. On 1.x every name below is available. On 2.x
only the line-neutral ones are (the configs, the errors, `TRUNCATION_NOTICE_MARKER`); the
others raise an `ImportError` that says so, and the 2.x adapter is the prototype in
`agentscope_ctx._v2` (see its docstring).
"""

import typing as _typing

from . import _line
from ._config import (
    CompactorConfig,
    ConsolidationConfig,
    ContextConfig,
    RecallConfig,
    SummarizerConfig,
    ToolResultConfig,
)
from ._errors import (
    CompactionError,
    ConfigError,
    ContextError,
    ContextRuntimeError,
    ContextUsageError,
    OffloadError,
    PersistenceError,
)
from ._truncation import TRUNCATION_NOTICE_MARKER

if _line.IS_1X:
    from ._agent_config import build_agent
    from ._compactor import CompactionResult, Compactor
    from ._dialog import DialogReadReport, DialogStore
    from ._manager import ContextManager, ContextUsage
    from ._memory import ContextMemory
    from ._pipeline import PipelineReport
    from ._providers import ModelConfig, Models, build_model, load_models
    from ._session import AtomicJSONSession
    from ._tokens import TokenCounter
    from .tools import ShellTool, fetch_url

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
    "RecallConfig",
    "ShellTool",
    "SummarizerConfig",
    "TokenCounter",
    "ToolResultConfig",
    "__version__",
    "build_agent",
    "build_model",
    "fetch_url",
    "load_models",
]

__version__ = "0.1.0"

_ONLY_1X = frozenset(__all__) - set(globals())
"""Public names that need AgentScope 1.x (empty on 1.x)."""
if _ONLY_1X:
    __all__ = [name for name in __all__ if name not in _ONLY_1X]

if not _typing.TYPE_CHECKING:  # hidden from type checkers: a typo must stay an error there

    def __getattr__(name: str) -> object:
        if name in _ONLY_1X:
            raise ImportError(
                f"agentscope_ctx.{name} needs AgentScope 1.x; AgentScope "
                f"{_line.AGENTSCOPE_VERSION} is installed. The 2.x adapter is a prototype: "
                "agentscope_ctx._v2.ContextMiddleware"
            )
        raise AttributeError(f"module 'agentscope_ctx' has no attribute {name!r}")
