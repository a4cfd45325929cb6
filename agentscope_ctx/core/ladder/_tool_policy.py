"""Which byte limits apply to a tool's output: the per-tool, per-path truncation policy
(DESIGN.md §4, "Markdown protection"). The core's cuts take it; the stores re-export it."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config._config import ToolResultConfig

__all__ = ["Limits", "ToolResultPolicy"]

_MARKDOWN_GLOBS = ("*.md", "*.markdown")


@dataclass(frozen=True)
class Limits:
    """Byte limits of one tool's output: when it enters the context, and once it is old."""

    recent: int
    old: int


class ToolResultPolicy:
    """Which limits apply to a tool's output: Markdown sources and protected tools get the
    larger Markdown limits (DESIGN.md §4, "Markdown protection")."""

    def __init__(self, config: ToolResultConfig) -> None:
        self.standard = Limits(config.recent_max_bytes, config.old_max_bytes)
        self.markdown = Limits(config.markdown_recent_max_bytes, config.markdown_old_max_bytes)
        self.globs = (*_MARKDOWN_GLOBS, *config.protected_globs)
        self.tools = frozenset(config.protected_tools)

    def is_protected_path(self, path: str) -> bool:
        """Whether a file path gets the Markdown limits (matched on the path and its name)."""
        name = os.path.basename(path)
        return any(
            fnmatch.fnmatch(name, glob) or fnmatch.fnmatch(path, glob) for glob in self.globs
        )

    def limits(self, tool_name: str, tool_input: Mapping[str, object] | None = None) -> Limits:
        """The limits for a call of `tool_name` with `tool_input` (any path-like string
        argument counts: `file_path`, `path`, ...)."""
        if tool_name in self.tools:
            return self.markdown
        for value in (tool_input or {}).values():
            if isinstance(value, str) and "\n" not in value and len(value) < 4096:
                if self.is_protected_path(value):
                    return self.markdown
        return self.standard
