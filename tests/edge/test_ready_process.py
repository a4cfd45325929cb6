"""`tests/support/ready.start_ready`: what a child says right after READY reaches the test
(a regression: read with a text-mode ``readline()``, the DONE printed with READY was lost to
``communicate(timeout=...)``, and the 1.x kill trials failed at random on a quick resume)."""

from __future__ import annotations

import sys

from tests.support.ready import start_ready


def test_what_follows_ready_in_one_write_is_not_lost() -> None:
    code = "import os; os.write(1, b'READY\\nDONE\\n')"
    proc, first = start_ready([sys.executable, "-c", code])
    out, _ = proc.communicate(timeout=60)
    assert (first, out.decode(), proc.returncode) == ("READY", "DONE\n", 0)


def test_a_child_that_says_nothing_gives_an_empty_line() -> None:
    proc, first = start_ready([sys.executable, "-c", "pass"])
    out, _ = proc.communicate(timeout=60)
    assert (first, out) == ("", b"")
