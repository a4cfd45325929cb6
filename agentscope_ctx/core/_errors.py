"""The exceptions raised by agentscope_ctx.

The hierarchy::

    ContextError                  root: catch this to catch everything from the package
    ├── ContextUsageError         the developer's mistake: fix the code or the config
    │   ├── ConfigError           a config value or file is invalid (names the field)
    │   └── PromptTooLargeError   what never leaves the prompt is over the budget alone
    └── ContextRuntimeError       a failure while an agent runs; inside a running agent
        │                         these are logged and degrade, they never kill a reply
        ├── CompactionError       the compactor could not produce a valid summary
        ├── OffloadError          a tool output could not be written to tool_result/
        └── PersistenceError      the dialog store or a state file could not be written
"""

from __future__ import annotations

import reprlib

__all__ = [
    "CompactionError",
    "ConfigError",
    "ContextError",
    "ContextRuntimeError",
    "ContextUsageError",
    "OffloadError",
    "PersistenceError",
    "PromptTooLargeError",
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
    The message is at most `MAX_CONFIG_MESSAGE_CHARS` long whatever the input: a longer one
    keeps its head and its tail (what was expected) around an ellipsis.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(_bounded(message))
        self.field = field


class PromptTooLargeError(ContextUsageError):
    """Raised before a model call when the prompt cut to its least is still over the budget:
    the parts that never leave the prompt (system prompt, tool schemas, the current user
    turn, pinned messages) are over it on their own, no compaction or cut could make the
    prompt fit. Fix the setup (a larger window, a shorter system prompt, fewer tools) or the
    input.

    `parts` maps each part to its tokens (our estimate: ``system prompt``, ``tool schemas``,
    ``summary``, ``current user turn``, ``other messages``), `total` is their sum as the
    provider would count it (times `scale`: the calibration with its safety margin),
    `budget` is the budget in tokens.
    """

    def __init__(
        self,
        message: str,
        *,
        parts: dict[str, int],
        total: int,
        budget: int,
        scale: float = 1.0,
    ) -> None:
        super().__init__(message)
        self.parts = dict(parts)
        self.total = total
        self.budget = budget
        self.scale = scale


class ContextRuntimeError(ContextError):
    """Raised when managing the context fails while an agent runs."""


class CompactionError(ContextRuntimeError):
    """Raised when the compactor fails to produce a valid summary (model error, bad output)."""


class OffloadError(ContextRuntimeError):
    """Raised when a tool output cannot be written to the tool_result store."""


class PersistenceError(ContextRuntimeError):
    """Raised when the dialog store or another durable file cannot be written or read."""


MAX_CONFIG_MESSAGE_CHARS = 500
"""Longest `ConfigError` message."""

_ELLIPSIS = " … "

_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxstring = 80
_REPR.maxother = 80
_REPR.maxlong = 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 4


def _short_repr(value: object) -> str:
    """`repr(value)` for an error message: at most about 80 characters and two levels deep, so
    that a huge or deeply nested input never makes a huge message (or a `RecursionError`)."""
    return _REPR.repr(value)


def _bounded(message: str) -> str:
    if len(message) <= MAX_CONFIG_MESSAGE_CHARS:
        return message
    keep = MAX_CONFIG_MESSAGE_CHARS - len(_ELLIPSIS)
    head = keep * 2 // 3
    return message[:head] + _ELLIPSIS + message[len(message) - (keep - head) :]
