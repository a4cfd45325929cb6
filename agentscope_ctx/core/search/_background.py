"""`BackgroundWork`: a step run on a daemon thread until it says it is done (the search
indexes' background indexing of big outputs, DESIGN.md §16)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from .._failures import FailureLog

__all__ = ["BackgroundWork"]

logger = logging.getLogger("agentscope_ctx")

ENABLED = True
"""Whether `kick` starts threads (the tests of what a search alone indexes turn it off)."""
PAUSE_SECONDS = 0.005
"""Pause between two steps: a search or a save waiting for the index gets it in between."""


class BackgroundWork:
    """Runs `step` on one daemon thread while it returns True (more to do). `kick` starts the
    thread when it is not running in this process (a forked child starts its own); a kick
    while it runs makes it run at least once more. A step that raises is logged once through
    `failures` and ends the run: the next kick starts again. Errors never reach the caller."""

    def __init__(self, step: Callable[[], bool], *, name: str, failures: FailureLog) -> None:
        self._step = step
        self._name = name
        self._failures = failures
        self._lock = threading.Lock()
        self._pid = os.getpid()  # the process `_lock` belongs to
        self._running_in: int | None = None  # the pid whose thread runs
        self._again = False
        self._stop = False
        self._thread: threading.Thread | None = None

    def kick(self) -> None:
        """Run the step (again) soon, on the background thread."""
        if not ENABLED:
            return
        if self._pid != os.getpid():  # a forked child: the parent's thread and lock are not its
            self._lock, self._pid, self._running_in = threading.Lock(), os.getpid(), None
        with self._lock:
            if self._running_in == os.getpid():
                self._again = True
                return
            self._running_in, self._again, self._stop = os.getpid(), False, False
            self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
            try:
                self._thread.start()
            except RuntimeError as exc:  # no thread now (interpreter exiting, limits)
                self._running_in = None
                logger.debug("agentscope_ctx: %s not started: %s", self._name, exc)

    def running(self) -> bool:
        """Whether the thread is running (or about to)."""
        with self._lock:
            return self._running_in == os.getpid()

    def close(self, timeout: float = 5.0) -> None:
        """Stop after the current step (waiting for it at most `timeout` seconds)."""
        with self._lock:
            self._stop = True
            thread = self._thread if self._running_in == os.getpid() else None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _loop(self) -> None:
        while True:
            try:
                more = not self._stop and self._step()
            except Exception as exc:
                self._failures.failed(self._name, f"{self._name} stopped: {exc}")
                more = False
            else:
                self._failures.recovered(self._name)
            with self._lock:
                if not more and (self._stop or not self._again):
                    self._running_in = None
                    return
                self._again = False
            time.sleep(PAUSE_SECONDS)
