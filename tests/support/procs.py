"""The servers and workers the fleet tests start: a process ended within a time, else killed;
a scratch folder removed at the end."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["scratch", "wait_or_kill"]


def wait_or_kill(proc: subprocess.Popen[Any], timeout: float) -> None:
    """Wait up to `timeout` seconds for `proc` to end (it was told to), else kill it; reaped
    either way."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A new folder under the system's temporary folder, removed with all it holds at the
    end (whatever the servers left in it)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
