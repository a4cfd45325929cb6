"""`BackgroundWork` (the search indexes' background indexing): real threads and a real fork."""

from __future__ import annotations

import os
import threading
import time

import pytest

from agentscope_ctx.core._failures import FailureLog
from agentscope_ctx.core.search._background import BackgroundWork


def _idle(work: BackgroundWork, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while work.running():
        assert time.monotonic() < deadline, "the background thread never ended"
        time.sleep(0.01)


def test_it_runs_until_the_step_says_done_and_a_kick_while_running_runs_it_again() -> None:
    calls: list[int] = []
    go = threading.Event()

    def step() -> bool:
        calls.append(1)
        return len(calls) < 3

    work = BackgroundWork(step, name="test_background", failures=FailureLog())
    work.kick()
    _idle(work)
    assert len(calls) == 3  # until the step said done

    def last() -> bool:
        calls.append(1)
        go.wait(10)  # a kick arrives while the last step runs
        return False

    work = BackgroundWork(last, name="test_background", failures=FailureLog())
    calls.clear()
    work.kick()
    work.kick()  # while running: remembered, not a second thread
    go.set()
    _idle(work)
    assert len(calls) == 2  # once more for the kick


def test_a_step_that_raises_is_logged_once_and_the_next_kick_starts_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def step() -> bool:
        calls.append(1)
        raise OSError("disk gone")

    work = BackgroundWork(step, name="test_background", failures=FailureLog())
    for _ in range(2):
        work.kick()
        _idle(work)
    assert len(calls) == 2
    errors = [r for r in caplog.records if r.levelname == "ERROR" and "disk gone" in r.message]
    assert len(errors) == 1  # the repeat is logged at DEBUG


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_its_own_thread() -> None:
    """The parent's thread (running, holding nothing the child can use) is not the child's."""
    hold, ran_in = threading.Event(), []

    def step() -> bool:
        ran_in.append(os.getpid())
        if os.getpid() == parent:
            hold.wait(10)
        return False

    parent = os.getpid()
    work = BackgroundWork(step, name="test_background", failures=FailureLog())
    work.kick()  # the parent's thread is running (held) when the child is forked
    pid = os.fork()
    if pid == 0:  # the child: kick, wait for its own thread, report by exit code
        code = 1
        try:
            work.kick()
            deadline = time.monotonic() + 10
            while work.running() and time.monotonic() < deadline:
                time.sleep(0.01)
            code = 0 if os.getpid() in ran_in and not work.running() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    hold.set()
    _idle(work)
    assert os.waitstatus_to_exitcode(status) == 0
