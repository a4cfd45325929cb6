"""agentscope_ctx: keep an AgentScope ReActAgent's context window healthy.

Tool output is cut losslessly when it enters the context (the rest stays on disk, reachable
with `read_file`), old messages are summarised and saved to `dialog/` before they leave
memory, and the prompt stays within `max_input_tokens` at every model call.
"""

from ._compactor import CompactionResult, Compactor
from ._config import (
    CompactorConfig,
    ConsolidationConfig,
    ContextConfig,
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
)
from ._manager import ContextManager, ContextUsage
from ._memory import ContextMemory
from ._pipeline import PipelineReport
from ._session import AtomicJSONSession
from ._tokens import TokenCounter
from ._truncation import TRUNCATION_NOTICE_MARKER

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
