"""agentscope_ctx: keep an AgentScope ReActAgent's context window healthy.

Tool output is cut losslessly when it enters the context (the rest stays on disk, reachable
with `read_file`), old messages are summarised and saved to `dialog/` before they leave
memory, and the prompt stays within `max_input_tokens` at every model call.

Start with `ContextManager(ContextConfig.default(), model=..., formatter=...).attach(agent)`,
or build a whole agent from YAML with `build_agent`; `build_model` makes a provider's model,
`ShellTool` and `fetch_url` are ready-made tools.
"""

from ._agent_config import build_agent
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
from ._providers import ModelConfig, Models, build_model, load_models
from ._session import AtomicJSONSession
from ._tokens import TokenCounter
from ._truncation import TRUNCATION_NOTICE_MARKER
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
