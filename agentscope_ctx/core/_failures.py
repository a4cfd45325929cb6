"""`FailureLog`: a failure that repeats at every step is logged once, not at every step."""

from __future__ import annotations

import logging

__all__ = ["FailureLog"]

logger = logging.getLogger("agentscope_ctx")


class FailureLog:
    """Logs the first failure of a kind at ERROR, repeats at DEBUG, and the recovery at INFO."""

    def __init__(self) -> None:
        self._failing: set[str] = set()

    def failed(self, kind: str, message: str) -> None:
        """Report a failure of `kind` (e.g. "tool_result", "dialog")."""
        if kind in self._failing:
            logger.debug("agentscope_ctx: %s (still failing)", message)
            return
        self._failing.add(kind)
        logger.error("agentscope_ctx: %s", message)

    def recovered(self, kind: str) -> None:
        """Report that `kind` works (again)."""
        if kind in self._failing:
            self._failing.discard(kind)
            logger.info("agentscope_ctx: writing to %s works again", kind)

    def failing(self, kind: str) -> bool:
        """Whether the last report of `kind` was a failure."""
        return kind in self._failing
