"""Fixtures of the edge tests (the CLI's)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """A working dir ``tmp_path/wd`` holding one expired saved output,
    ``tool_result/old.txt`` (so a gc that ran would delete it), beside a plain file
    ``tmp_path/a_file``."""
    path = tmp_path / "wd"
    (path / "tool_result").mkdir(parents=True)
    old = path / "tool_result" / "old.txt"
    old.write_text("deploy token\n")
    os.utime(old, (time.time() - 30 * 86_400,) * 2)
    (tmp_path / "a_file").write_text("deploy token\n")
    return path
