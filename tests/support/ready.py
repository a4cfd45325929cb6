"""A child process that says READY on its standard output before its work, read so that
nothing it says after READY is lost: its output is read unbuffered (`start_ready`), so that a
later ``communicate(timeout=...)``, which reads the pipe's descriptor itself, finds every byte
that followed. A text-mode ``readline()`` reads ahead into its buffer, and a child quick
enough to print READY and DONE together lost its DONE that way (the 1.x kill trials'
resumed run, `tests/agentscope1/test_crash.py`)."""

from __future__ import annotations

import subprocess
from typing import Any

__all__ = ["start_ready"]


def start_ready(args: list[str], **popen: Any) -> tuple[subprocess.Popen[bytes], str]:
    """Start `args` (``popen``: `subprocess.Popen`'s other arguments, not `stdout`, `text`
    or `bufsize`) and read its first line, byte by byte: the process and that line
    (stripped; "" when the child ended first). Its ``communicate()`` then gives the rest as
    bytes."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, bufsize=0, **popen)
    assert proc.stdout is not None
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = proc.stdout.read(1)  # the unbuffered pipe: no byte read past the newline
        if not byte:
            break
        line += byte
    return proc, line.decode().strip()
