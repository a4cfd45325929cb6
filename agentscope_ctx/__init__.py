"""agentscope_ctx: keep an AgentScope ReActAgent's context window healthy.

Tool output is cut losslessly when it enters the context (the rest stays on disk, reachable
with `read_file`), old messages are summarised and saved to `dialog/` before they leave
memory, and the prompt stays within `max_input_tokens` at every model call.

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
    from ._compactor import CompactionResult, Compactor
    from ._dialog import DialogReadReport, DialogStore
    from ._manager import ContextManager, ContextUsage
    from ._memory import ContextMemory
    from ._pipeline import PipelineReport
    from ._session import AtomicJSONSession
    from ._tokens import TokenCounter

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
    "OffloadError",
    "PersistenceError",
    "PipelineReport",
    "SummarizerConfig",
    "TokenCounter",
    "ToolResultConfig",
    "__version__",
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
