"""Suite-wide settings.

Hypothesis runs derandomized under ``CI=true`` (profile ``ci``): a CI run never passes or fails
by chance. A case a fuzzer finds locally is a bug to fix, pinned with ``@example``. No profile
has a deadline: a per-example time limit is a wall-clock assertion, and on a loaded 2-core
machine it failed a chart test by chance (254 ms against 200 ms); speed is measured in
`benchmarks/`.

The suite's scratch files (``tmp_path``, `tempfile`, the servers' data) live in RAM when the
machine has a tmpfs with room for them (``/dev/shm``, 2 GB free): the stores ``fsync`` every
append and save, which costs milliseconds on a disk and nothing there, and a test cannot tell an
``fsync`` from none. The files are as real; the suite takes some 10% less time. Set
``AGENTSCOPE_CTX_TEST_TMP`` to a folder to put them there instead (``""``: the system's default).

The run's interpreters (xdist's workers, and the subprocesses the tests start: kill trials,
writers, the CLI) write the bytecode they compile (``__pycache__/``, which git ignores) even where
``PYTHONDONTWRITEBYTECODE`` is set, as in many container images: the package and the tests are
then compiled once, not again in every process of every run (some 15 s of a 1.x run on 2 cores).
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from collections.abc import Iterator
    from multiprocessing.process import BaseProcess

    from tests.support.agent_line import Line
    from tests.support.demo_rungs import DemoRun
    from tests.support.forked import Forker

RAM_TMP = "/dev/shm"
RAM_TMP_FREE = 2 << 30


def _scratch_root() -> str | None:
    """Where the scratch files go (see the module), `None`: the system's default."""
    given = os.environ.get("AGENTSCOPE_CTX_TEST_TMP")
    if given is not None:
        return given or None
    try:
        fs = os.statvfs(RAM_TMP)
    except OSError:
        return None
    if fs.f_bavail * fs.f_frsize < RAM_TMP_FREE or not os.access(RAM_TMP, os.W_OK | os.X_OK):
        return None
    return RAM_TMP


SCRATCH = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Point `tempfile` (and so pytest's ``tmp_path`` root) and every subprocess, xdist's
    workers too, at a folder of this run under the scratch root, and let them write bytecode."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller's TMPDIR, inherited
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:  # (see the module)
        sys.dont_write_bytecode = False
    root = _scratch_root()
    if root is not None:
        scratch = tempfile.mkdtemp(prefix="actx-", dir=root)
        os.chmod(scratch, 0o1777)  # as /tmp is: the test servers run as their own user
        config.stash[SCRATCH] = scratch
        os.environ["TMPDIR"] = scratch
        tempfile.tempdir = None  # read TMPDIR again


@pytest.hookimpl(optionalhook=True)  # a run without xdist (-p no:xdist) has no such hook
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (pyproject's addopts: the default run) starts one worker more than the
    cores this process may use: a test spends a good part of its time waiting on what runs
    outside the test process (servers starting, forked interpreters, the browser), and
    another worker runs a test meanwhile. On the project's 2 cores (2026-12-07, at 9ff66d4):
    2.x 131 s with 2 workers (load 1-5), 120 s with 3 (load 3-8); 1.x 136 s and 125 s (load
    3-5, 8). ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still says how many (xdist reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + 1


def pytest_collection_finish(session: pytest.Session) -> None:
    """Take what collecting left (AgentScope, the SDKs, the package and the test modules: some
    300,000 objects that a test process keeps to its end) out of the cyclic collector's sight
    (`gc.freeze`, after a collection): every full collection of the run scanned them all again.
    The collector took 5.4 of 80 CPU-s of a `-n 0` run of five test directories, 4.4 with them
    frozen (2026-12-07); what the tests create is collected as before."""
    gc.collect()
    gc.freeze()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Free this run's scratch folder when every test passed (a failed test's files stay, as
    ``tmp_path_retention_policy = "failed"`` keeps them; so do the temporary files AgentScope
    1.x's formatter never deletes, until then)."""
    scratch = session.config.stash.get(SCRATCH, None)
    if scratch is not None and exitstatus == 0:
        shutil.rmtree(scratch, ignore_errors=True)


settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("dev", print_blob=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI", "").lower() in {"1", "true", "yes"} else "dev")


def _forked_children() -> set[BaseProcess]:
    """The `multiprocessing` children of this process still running (none if it never
    imported `multiprocessing`)."""
    mp = sys.modules.get("multiprocessing")
    return set(mp.active_children()) if mp is not None else set()


@pytest.fixture(autouse=True)
def _no_child_left() -> Iterator[None]:
    """A test's `multiprocessing` children end with it: one still running at its end (it hung,
    and the test's ``join(timeout)`` gave up on it) is killed, and the test fails saying so.
    Left running, such a child (a fork of the xdist worker) kept the run's stdout and stderr
    open after pytest had ended, and the write end of the ``forker``'s stdin with them, so that
    interpreter never read its end and outlived the run too."""
    before = _forked_children()
    yield
    left = _forked_children() - before
    for child in left:
        child.kill()
        child.join()
    if left:
        pytest.fail(f"the test left {len(left)} forked child(ren) running (killed): {left}")


@pytest.fixture
def line() -> Line:
    """The installed AgentScope line: a real agent of it with a `ContextManager`, its fake
    model and tool call (`tests/support/agent_line.py`, imported here only when a test asks: the
    suite's import checks see no package loaded by this file): one test for a behaviour both
    lines share."""
    from tests.support.agent_line import installed

    return installed()


@pytest.fixture(scope="session")
def forker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forker]:
    """Fresh interpreters for the price of one start-up per test process: each run a child
    forked right after ``import agentscope`` (`tests/support/forked.py`), for the tests of
    what a command or an import loads or prints."""
    from tests.support.forked import Forker

    forks = Forker(tmp_path_factory.mktemp("forker"))
    try:
        yield forks
    finally:
        forks.close()


@pytest.fixture(scope="session")
def logs_demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """One run of the default demo per test process (`tests/support/demo_rungs.py`), shared by
    the tests that only read what it left: its report, what it printed and its working dir
    (a run takes seconds; five tests each made their own)."""
    from tests.support.demo_rungs import run_logs_demo

    return run_logs_demo(tmp_path_factory.mktemp("logs-demo") / "logs")  # (made by the demo)
