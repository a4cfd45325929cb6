"""How a tool call ended, judged from what it returned (DESIGN.md §13).

A summary must never call a run "ok" that it did not see end well. The text a tool returned
is judged by its error lines (an error *report* starts its line: pytest's ``E``, a
``path:line:`` prefix, ``ValueError: ...``, ``FAILED``, ``fatal:``...) and its exit status
(``<returncode>1</returncode>``, ``[exit code 1]``, 2.x Bash's ``Command failed:``). When that
text was cut or masked before the judgement (it ends with a truncation notice), the WHOLE saved
output is read back through `read_saved` and streamed through (`_scan`: chunk by chunk, a
bounded part of a line at a time; a 1 GB output is never held), so that an error in its middle
is seen (issue 29 item 10: a log judged from its first and last 64 KB was "ok"); when that is
not possible, the run is ``unseen``, never ``ok``. A saved output never changes: its outcome is
remembered (`_JUDGED`, by reader and path), and the compaction that asks again reads nothing.
"""

from __future__ import annotations

import inspect
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from ..truncation._truncation import parse_notice
from ._scan import scan

__all__ = [
    "ERROR_LINE",
    "Outcome",
    "ReadSaved",
    "error_lines",
    "exit_status",
    "judge",
    "judge_ahead",
]

ERROR_LINE = re.compile(
    r"^(?:E\s+)?(?:\S+:\d+:\s*)?"
    r"(?:[\w.]*(?:Error|Exception)\b|FAILED\b|ERROR\b|fatal:|error(?:\[\w+\])?:|panic:)"
)
"""A line that reports an error (source code that merely mentions ``ValueError`` is not one)."""
_RETURNCODE = re.compile(
    r"<returncode>\s*(-?[1-9]\d*)\s*</returncode>|\bexit code:? (-?[1-9]\d*)"
    r"|\A(Command failed):"
)
_EXIT_STATUS = re.compile(
    rb"<returncode>\s*(-?[1-9]\d*)\s*</returncode>|\bexit code:? (-?[1-9]\d*)"
)
"""`_RETURNCODE` on the bytes of a saved output (whose start `scan` checks for the third)."""

ReadSaved = Callable[[str], "Iterable[bytes] | None"]
"""Reads a saved output by the path its notice names: its bytes in order, in chunks (an
iterable, streamed: `OutputSeam.read_saved`); `None` when the path is not a saved output of
this package. An error raised while iterating makes the run ``unseen``."""

_JUDGED: OrderedDict[tuple[object, str], Outcome] = OrderedDict()
"""The outcomes of saved outputs read whole, by (reader, path), newest last: a reader is a
store's bound method, held weakly (`_reader_key`), so one tenant's store never answers for
another's, and a finished session's store is not kept alive by it."""
_JUDGED_MAX = 512
_JUDGED_LOCK = threading.Lock()  # `judge_ahead` fills it from a worker thread


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
    whole saved file (see the module docstring)."""
    cut = parse_notice(text)
    if cut is None:
        return _failure(text) or Outcome("ok")
    excerpt, notice = cut
    path = notice.file_path
    outcome = None if read_saved is None else _judge_saved(read_saved, path)
    if outcome is not None:
        return outcome
    return _failure(excerpt) or Outcome("unseen", f"the output was cut and {path} not read")


def _judge_saved(read_saved: ReadSaved, path: str) -> Outcome | None:
    """The outcome of the saved output at `path`, streamed through; `None` when it cannot be
    read whole and shows no failure in what was read."""
    key: tuple[object, str] = (_reader_key(read_saved), path)
    try:
        hash(key)
    except TypeError:  # a reader that cannot be a key: judged each time
        cacheable = False
    else:
        cacheable = True
    with _JUDGED_LOCK:
        known = _JUDGED.get(key) if cacheable else None
        if known is not None:
            _JUDGED.move_to_end(key)
            return known
    try:
        chunks = read_saved(path)
    except Exception:
        return None
    if chunks is None:
        return None
    found = scan(chunks, ERROR_LINE, _EXIT_STATUS)
    if found.error is not None:
        outcome = Outcome("failed", found.error)
    elif found.exit_label() is not None:
        outcome = Outcome("failed", str(found.exit_label()))
    else:
        outcome = Outcome("ok")
    if not found.whole and outcome.status == "ok":
        return None  # read in part: nothing seen is not "ok"
    if cacheable and found.whole:
        with _JUDGED_LOCK:
            _JUDGED[key] = outcome
            while len(_JUDGED) > _JUDGED_MAX:
                _JUDGED.popitem(last=False)
    return outcome


def _reader_key(read_saved: ReadSaved) -> object:
    """`read_saved` as a key of `_JUDGED`: a bound method weakly (its store leaves with its
    session: a strong key held every finished session's store, issue 46 item 17), anything
    else as it is."""
    if inspect.ismethod(read_saved):
        return weakref.WeakMethod(read_saved)
    return read_saved


def judge_ahead(texts: Iterable[str], read_saved: ReadSaved) -> None:
    """Judge the cut outputs among `texts` from their saved files now, so that the `judge`
    calls that follow read nothing: a compaction calls it in a worker thread, which keeps
    reading a large output off the event loop."""
    for text in texts:
        cut = parse_notice(text)
        if cut is not None:
            _judge_saved(read_saved, cut[1].file_path)


def _failure(text: str) -> Outcome | None:
    errors = error_lines(text)
    if errors:
        return Outcome("failed", errors[-1])
    status = exit_status(text)
    return Outcome("failed", status) if status else None
