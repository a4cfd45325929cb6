"""`Notices`: what the context manager announced during a demo run (its compactions and
reliefs, at the step each came after), shown as they come and kept for the report."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ._stats import PromptStats

__all__ = ["Announcement", "Notices"]

_COMPACTED = re.compile(
    r"compacted (\d+) messages: (\d+) -> (\d+) tokens; summary by (\w+)(.*?); "
    r"raw messages saved in "
)
_RELIEVED = re.compile(r"relieved (\d+) -> (\d+) tokens without a model call \((.*); threshold")


@dataclass
class Announcement:
    """A compaction or relief the context manager announced."""

    step: int
    """Model calls before it."""
    tokens_before: int
    tokens_after: int
    """The manager's estimate of the prompt before and after."""
    rungs: str = ""
    """A relief's rungs with the tokens each freed ("second truncation -3785, ...")."""
    moved: int = 0
    """A compaction's messages moved to `dialog/`."""
    source: str = ""
    """Who wrote a compaction's summary: "model", "model_retry" or "extractive" (with why)."""
    files: list[str] = field(default_factory=list)
    """The `dialog/` files the compaction appended to (relative to the working dir)."""


class Notices:
    """Notes each "[agentscope_ctx] compacted ..." and "... relieved ..." (the ladder's cheap
    rungs) notice the context manager gives, at the step it came after, and shows it. At a
    compaction it looks which `dialog/` files grew."""

    def __init__(
        self, stats: PromptStats, out: Callable[[str], None], working_dir: Path | None = None
    ) -> None:
        self.stats = stats
        self.out = out
        self.working_dir = working_dir
        self.steps: list[int] = []
        self.reliefs: list[int] = []
        self.compactions: list[Announcement] = []
        self.relief_notices: list[Announcement] = []
        self._dialog_sizes: dict[str, int] = {}

    def note(self, message: str) -> None:
        """Take one notice of the context manager (other texts are ignored)."""
        step = len(self.stats.prompt_tokens)
        if message.startswith("[agentscope_ctx] compacted"):
            self.steps.append(step)
            self.out(f"  {message}")
            match = _COMPACTED.search(message)
            if match is not None:
                before, after = int(match[2]), int(match[3])
                notice = Announcement(step, before, after, moved=int(match[1]))
                notice.source = match[4] + match[5]
                notice.files = self._grown_dialog_files()
                self.compactions.append(notice)
        elif message.startswith("[agentscope_ctx] relieved"):
            self.reliefs.append(step)
            self.out(f"  {message}")
            match = _RELIEVED.search(message)
            if match is not None:
                self.relief_notices.append(
                    Announcement(step, int(match[1]), int(match[2]), rungs=match[3])
                )

    def _grown_dialog_files(self) -> list[str]:
        if self.working_dir is None:
            return []
        folder = self.working_dir / "dialog"
        sizes = {p.name: p.stat().st_size for p in folder.glob("*.jsonl")}
        grown = [
            name for name, size in sorted(sizes.items()) if size > self._dialog_sizes.get(name, 0)
        ]
        self._dialog_sizes = sizes
        return [f"dialog/{name}" for name in grown]
