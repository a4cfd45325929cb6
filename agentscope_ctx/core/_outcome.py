"""How a tool call ended, judged from what it returned (DESIGN.md §13).

A summary must never call a run "ok" that it did not see end well. The text a tool returned
is judged by its error lines (an error *report* starts its line: pytest's ``E``, a
``path:line:`` prefix, ``ValueError: ...``, ``FAILED``, ``fatal:``...) and its exit status
(``<returncode>1</returncode>``, ``[exit code 1]``, 2.x Bash's ``Command failed:``). When that
text was cut or masked before the judgement (it ends with a truncation notice), the full output
is read back from its saved file, boundedly (its head and its tail), through `read_saved`; when
that is not possible, the run is ``unseen``, never ``ok``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ._truncation import parse_notice

__all__ = ["ERROR_LINE", "Outcome", "ReadSaved", "error_lines", "exit_status", "judge"]

ERROR_LINE = re.compile(
    r"^(?:E\s+)?(?:\S+:\d+:\s*)?"
    r"(?:[\w.]*(?:Error|Exception)\b|FAILED\b|ERROR\b|fatal:|error(?:\[\w+\])?:|panic:)"
)
"""A line that reports an error (source code that merely mentions ``ValueError`` is not one)."""
_RETURNCODE = re.compile(
    r"<returncode>\s*(-?[1-9]\d*)\s*</returncode>|\bexit code:? (-?[1-9]\d*)"
    r"|\A(Command failed):"
)

ReadSaved = Callable[[str], "str | None"]
"""Reads a saved output (head and tail, bounded) by the path its notice names; `None` when
the path is not a saved output of this package or cannot be read."""


@dataclass(frozen=True)
class Outcome:
    """How one tool call ended."""

    status: Literal["ok", "failed", "unseen"]
    detail: str = ""
    """For ``failed``, the newest error line or the exit status; for ``unseen``, why."""

    def label(self) -> str:
        """``ok``, ``failed: <detail>`` or ``not seen whole: <detail>``."""
        if self.status == "ok":
            return "ok"
        return f"failed: {self.detail}" if self.status == "failed" else f"unseen: {self.detail}"


def error_lines(text: str) -> list[str]:
    """The lines of `text` that report an error, stripped (pytest's ``E`` prefix dropped)."""
    lines = (line.strip() for line in text.splitlines())
    return [re.sub(r"^E\s+", "", line) for line in lines if ERROR_LINE.match(line)]


def exit_status(text: str) -> str | None:
    """``exit code N`` when `text` reports a non-zero exit, "command failed" when it says the
    command failed without a code, else `None`."""
    match = _RETURNCODE.search(text)
    if match is None:
        return None
    code = match[1] or match[2]
    return f"exit code {code}" if code else "command failed"


def judge(text: str, read_saved: ReadSaved | None = None) -> Outcome:
    """How the call that returned `text` ended; a cut or masked `text` is judged from its
    saved file (see the module docstring)."""
    cut = parse_notice(text)
    if cut is not None:
        excerpt, notice = cut
        full = read_saved(notice.file_path) if read_saved is not None else None
        if full is None:
            failed = _failure(excerpt)
            if failed is not None:
                return failed
            return Outcome("unseen", f"the output was cut and {notice.file_path} not read")
        text = full
    return _failure(text) or Outcome("ok")


def _failure(text: str) -> Outcome | None:
    errors = error_lines(text)
    if errors:
        return Outcome("failed", errors[-1])
    status = exit_status(text)
    return Outcome("failed", status) if status else None
