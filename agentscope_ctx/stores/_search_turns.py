"""Whose turn it is at a working dir's index within one process: a search goes before the
background indexing (issue 46 item 11).

`searching` marks a search waiting for the index or running. The background indexing of
every handle of the process on that working dir then takes no new step (`searches_waiting`),
and while it indexes it waits for the search at the next chunk (`yield_to_searches`): a
search's every read of a file or of SQLite gives the interpreter lock up, and getting it back
from a thread busy in Python waits out the interpreter's switch interval (5 ms) each time,
which made the slowest searches of the live benchmark at 100k messages
(`benchmarks/store/live.py`) some 150 ms on an idle machine for 10-30 ms of their own work.
Handing the lock over at each chunk (`time.sleep(0)`) left a search competing with every
indexing thread of the process for it (ten in that benchmark: p95 73 ms); an indexing thread
now waits, once per search and `HANDOFF_SECONDS` at most, until no search runs. The bound
keeps a search that waits for what that thread holds (the index's writer, a pool connection)
from waiting longer than that, and the indexing moving while searches come back to back.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["HANDOFF_SECONDS", "searches_waiting", "searching", "yield_to_searches"]

HANDOFF_SECONDS = 0.05
"""How long an indexing thread waits at a chunk, at most once per search started, for the
searches of the process to end (past it, it hands the interpreter over at each chunk)."""

_searches: Counter[tuple[int, Hashable]] = Counter()
"""The searches waiting or running, by process id and index (a working dir; a PostgreSQL
schema: ``("postgres", schema)``; a forked child does not take its parent's: their threads
are not its)."""
_searches_lock = threading.Lock()
_none_running = threading.Condition(_searches_lock)
"""Notified when the last search of the process ends."""
_started = 0
"""Searches started in this process (an indexing thread waits once for each)."""
_thread = threading.local()
"""``searching``: how many searches this thread runs (it never yields to itself);
``waited``: the value of `_started` when it last waited."""


def _fresh_lock_in_child() -> None:
    """A forked child gets a lock and a count of its own: the parent's background threads take
    `_searches_lock` every few milliseconds, and one holding it at the fork left it held
    forever in the child, whose first search then hung."""
    global _searches_lock, _none_running
    _searches_lock = threading.Lock()
    _none_running = threading.Condition(_searches_lock)
    _searches.clear()  # the parent's searches: this process's indexing never waits for them


os.register_at_fork(after_in_child=_fresh_lock_in_child)


@contextmanager
def searching(root: Hashable) -> Iterator[None]:
    """A search of the index `root` (a working dir, or ``("postgres", schema)``) waits for it
    or runs: the background indexing of every handle of this process on a working dir lets
    it go first (`searches_waiting`), and any indexing of the process waits for it at its
    next chunk (`yield_to_searches`)."""
    global _started
    key = (os.getpid(), root)
    with _searches_lock:
        _searches[key] += 1
        _started += 1
    _thread.searching = getattr(_thread, "searching", 0) + 1
    try:
        yield
    finally:
        _thread.searching -= 1
        with _searches_lock:
            _searches[key] -= 1
            if not _searches[key]:
                del _searches[key]
            if not _searches:
                _none_running.notify_all()


def searches_waiting(root: Path) -> bool:
    """Whether a search of this process waits for the index of `root` or runs (`searching`)."""
    return _searches[(os.getpid(), root)] > 0


def yield_to_searches() -> None:
    """Let the searches of this process that run on other threads go first (called by the
    indexing at each chunk: a few microseconds when none does): wait until none runs, once
    per search started and `HANDOFF_SECONDS` at most; past that, hand the interpreter lock
    over (`time.sleep(0)`)."""
    mine: int = getattr(_thread, "searching", 0)
    if not _searches or mine:
        return
    with _none_running:
        if getattr(_thread, "waited", None) != _started:
            _thread.waited = _started
            _none_running.wait_for(lambda: not _searches, timeout=HANDOFF_SECONDS)
            return
    time.sleep(0)
