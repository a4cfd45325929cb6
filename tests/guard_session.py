"""The coding session of the compaction guard tests, shared by both lines (`tests/test_guards.py`
on 1.x, `tests/v2/test_guards.py` on 2.x): what a lazy compactor model answers, the user's
first instruction with its constraints, and a failing test run's output."""

from __future__ import annotations

LAZY = "\n".join(
    f"## {title}\n- {line}"
    for title, line in (
        ("Goal", "complete the task"),
        ("Constraints", "follow the instructions"),
        ("Progress", "work is ongoing"),
        ("Key Decisions", "none"),
        ("Next Steps", "continue"),
    )
)
"""The five headings and generic lines: a summary that keeps nothing."""
FIRST = "Fix the failing test in src/app.py. Do not modify setup.cfg, do not touch vendor/."
FAILING = (
    "".join(f"tests/test_app.py::test_{i} PASSED\n" for i in range(400))
    + "E   ValueError: bad input in src/app.py:42\n"
    + "FAILED tests/test_app.py::test_parse - ValueError: bad input\n"
    + "[exit code 1]\n"
)
