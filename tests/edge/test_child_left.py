"""A test that leaves a forked child running (it hung, and the test's ``join(timeout)`` gave up
on it) fails, the child killed, and the run ends (tests/conftest's ``_no_child_left``). Before,
the child (a fork of the xdist worker, as ``ps`` shows it) outlived the run holding its stdout
open, and with it the write end of the ``forker``'s stdin, whose interpreter outlived it too:
a reader of the run's output waited for ever (two processes left so after a 1.x run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LEAVES_A_CHILD = """
import multiprocessing, os, time


def test_a_child_hangs(tmp_path_factory):
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(3600,))
    child.start()
    with open(os.environ["CHILD_PID"], "w") as file:
        file.write(str(child.pid))
    child.join(0.01)  # given up on: the test itself passes
"""

GUARD_SECONDS = 120.0
"""A liveness guard: the run takes seconds; before, it never ended."""


def test_a_child_left_running_is_killed_and_fails_its_test(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.conftest"]\n')
    (tmp_path / "test_leaves.py").write_text(LEAVES_A_CHILD)
    pid_file = tmp_path / "child.pid"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CHILD_PID": str(pid_file),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # (no xdist, asyncio, ...: a quicker start)
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    proc = subprocess.Popen(
        [*command, str(tmp_path / "test_leaves.py")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=GUARD_SECONDS)  # ends once no process holds stdout
    except subprocess.TimeoutExpired:
        proc.kill()
        os.kill(int(pid_file.read_text()), 9)
        raise
    assert proc.returncode == 1, out
    assert "1 passed, 1 error" in out and "left 1 forked child(ren) running (killed)" in out
    child = int(pid_file.read_text())
    assert not Path(f"/proc/{child}").exists()  # killed and reaped
