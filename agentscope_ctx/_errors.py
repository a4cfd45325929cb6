"""The exceptions raised by agentscope_ctx.

The hierarchy::

    ContextError                  root: catch this to catch everything from the package
    ├── ContextUsageError         the developer's mistake: fix the code or the config
    │   └── ConfigError           a config value or file is invalid (names the field)
    └── ContextRuntimeError       a failure while an agent runs; inside a running agent
        │                         these are logged and degrade, they never kill a reply
        ├── CompactionError       the compactor could not produce a valid summary
        ├── OffloadError          a tool output could not be written to tool_result/
        └── PersistenceError      the dialog store or a state file could not be written
"""

from __future__ import annotations

__all__ = [
    "CompactionError",
    "ConfigError",
    "ContextError",
    "ContextRuntimeError",
    "ContextUsageError",
    "OffloadError",
    "PersistenceError",
]


class ContextError(Exception):
    """Root of every exception raised by agentscope_ctx."""


class ContextUsageError(ContextError):
    """Raised when the package is called or configured wrongly.

    Not retried and not swallowed: the message says what was received and what was expected.
    """


class ConfigError(ContextUsageError, ValueError):
    """Raised when a config value, or the config file itself, is invalid.

    `field` is the dotted name of the offending field (``"tool_result.old_max_bytes"``), or
    ``None`` when the file as a whole is at fault (missing, not YAML, not a mapping).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ContextRuntimeError(ContextError):
    """Raised when managing the context fails while an agent runs."""


class CompactionError(ContextRuntimeError):
    """Raised when the compactor fails to produce a valid summary (model error, bad output)."""


class OffloadError(ContextRuntimeError):
    """Raised when a tool output cannot be written to the tool_result store."""


class PersistenceError(ContextRuntimeError):
    """Raised when the dialog store or another durable file cannot be written or read."""
