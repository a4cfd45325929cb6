"""`scan`: the newest error line and the first exit status of a saved output, streamed.

A run is judged from its whole saved output (`_outcome`), which may be 1 GB: the bytes go
through chunk by chunk, and what is held at once is one chunk, the unfinished line before it
(at most `LINE_MAX` bytes of it: an error report starts its line, so a longer line is judged by
its head), and a short overlap for the exit status. Only blocks that hold one of the words an
error line must contain are decoded and split into lines; the rest is only searched for those
words (in C), so that a large clean log costs about one read.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["LINE_MAX", "Scan", "scan"]

logger = logging.getLogger("agentscope_ctx")

LINE_MAX = 65_536
"""Bytes of one line that are judged (its head); the rest of a longer line is skipped."""
_OVERLAP = 1_024
"""Bytes kept from before a chunk for an exit status cut between two chunks (a status longer
than this, padded with whitespace, is not seen when cut)."""
_WORDS = (b"Error", b"Exception", b"FAILED", b"ERROR", b"fatal:", b"error", b"panic:")
"""One of these is in every line `_outcome.ERROR_LINE` matches."""
_COMMAND_FAILED = b"Command failed:"


@dataclass
class Scan:
    """What `scan` found."""

    error: str | None = None
    """The newest error line (stripped, pytest's ``E`` prefix dropped)."""
    status: str | None = None
    """The first non-zero exit code reported."""
    command_failed: bool = False
    """The output starts with ``Command failed:`` (2.x Bash)."""
    whole: bool = True
    """Whether the output was read to its end (`False`: reading it failed part way)."""

    def exit_label(self) -> str | None:
        """What the first exit report says, as `_outcome.exit_status` words it: ``command
        failed`` (at the start, so first), ``exit code N``, or `None`."""
        if self.command_failed:
            return "command failed"
        return None if self.status is None else f"exit code {self.status}"


def scan(chunks: Iterable[bytes], error_line: re.Pattern[str], exit: re.Pattern[bytes]) -> Scan:
    """Stream `chunks` (the output's bytes in order): the newest line matching `error_line`
    and the first match of `exit` (its first non-empty group is the code)."""
    found = Scan()
    pending = b""  # the unfinished line (its head: at most LINE_MAX bytes)
    skipping = False  # past LINE_MAX of the unfinished line: drop until its end
    previous = b""  # the bytes before the chunk kept for the exit status (the overlap)
    offset = 0  # bytes read before the chunk
    start = b""
    try:
        for chunk in chunks:
            if len(start) < len(_COMMAND_FAILED):  # the output's first bytes, over chunks
                start += chunk[: len(_COMMAND_FAILED) - len(start)]
                found.command_failed = start == _COMMAND_FAILED
            if found.status is None:
                previous = _status(previous + chunk, offset - len(previous), exit, found, False)
            offset += len(chunk)
            if skipping:
                end = chunk.find(b"\n")
                if end < 0:
                    continue
                chunk, skipping = chunk[end + 1 :], False
                _errors(pending + b"\n", error_line, found)  # the long line, by its head
                pending = b""
            data = pending + chunk
            end = data.rfind(b"\n")
            block, pending = (b"", data) if end < 0 else (data[: end + 1], data[end + 1 :])
            if len(pending) > LINE_MAX:
                pending, skipping = pending[:LINE_MAX], True
            _errors(block, error_line, found)
    except Exception:
        logger.warning("agentscope_ctx: a saved output could not be read whole", exc_info=True)
        found.whole = False
    _errors(pending, error_line, found)
    if found.status is None and found.whole:
        _status(previous, offset - len(previous), exit, found, True)
    return found


def _status(window: bytes, at: int, exit: re.Pattern[bytes], found: Scan, last: bool) -> bytes:
    """Note in `found` the first exit status of `window` (which starts at byte `at` of the
    output) that cannot grow with the next chunk (`last`: there is none); return the overlap
    to keep before the next chunk."""
    if b"<returncode>" in window or b"exit code" in window:
        # a window that does not start the output starts one byte early: that byte only gives
        # `\b` its left side (a status starting there was searched for in the window before)
        match = exit.search(window, 1 if at > 0 else 0)
        if match is not None and (last or match.end() < len(window)):
            found.status = next(g for g in match.groups() if g).decode()
    return window[-_OVERLAP:]


def _errors(block: bytes, error_line: re.Pattern[str], found: Scan) -> None:
    """Note the newest error line of `block` (whole lines) in `found`."""
    if not block or not any(word in block for word in _WORDS):
        return
    for line in block.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if error_line.match(line):
            found.error = re.sub(r"^E\s+", "", line)
