"""The coding session of the compaction guard tests, shared by both lines (`tests/core/test_guards.py`
on 1.x, `tests/agentscope2/test_guards.py` on 2.x): what a lazy compactor model answers, the user's
first instruction with its constraints, a failing test run's output, the tools' work, the
turns, the configurations and the checks of the next prompt."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx import ContextConfig

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

_FAST = {(3_000, 3), (3_000, 10), (8_000, 10), (128_000, 1), (128_000, 10)}
GRID = [
    pytest.param(budget, n, marks=() if (budget, n) in _FAST else pytest.mark.slow)
    for budget in (3_000, 8_000, 128_000)
    for n in (1, 3, 10)
]
"""Budgets from 3,000 to 128,000 tokens x 1, 3 and 10 compactions (issue 22, "Done when");
the corners and the old points in the default suite, the rest with `-m slow`."""


def shell(command: str) -> str:
    """What `run_shell` prints: each pytest run's error names its turn (`# <turn>`)."""
    if command.startswith("pytest"):
        return FAILING.replace("bad input", f"bad input #{command.split('# ')[-1]}")
    return "".join(f"{command}: line {i} ok\n" for i in range(300))


def edit(root: Path, file_path: str, old: str, new: str) -> str:
    path = root / file_path
    path.write_text(path.read_text().replace(old, new))
    return f"edited {file_path}"


def write(root: Path, file_path: str, content: str) -> str:
    (root / file_path).parent.mkdir(parents=True, exist_ok=True)
    (root / file_path).write_text(content)
    return f"wrote {file_path}"


def steps(tool_call: Callable[..., Any], turn: int) -> list[Any]:
    """One turn's moves (the line's `tool_call`): a failing test run, an edit, a new file, a
    long output, the answer."""
    return [
        tool_call("run_shell", f"t{turn}a", command=f"pytest -x tests/test_app.py  # {turn}"),
        tool_call("edit_file", f"t{turn}b", file_path=f"src/mod{turn}.py", old="x", new="y"),
        tool_call("write_file", f"t{turn}c", file_path=f"notes/n{turn}.md", content="n" * 50),
        tool_call("run_shell", f"t{turn}d", command=f"cat big{turn}.log"),
        f"Turn {turn} done.",
    ]


def words(turn: int) -> str:
    """The user's turn: the first with its constraints, the second with one more."""
    if turn == 0:
        return FIRST
    return f"Now continue with module {turn}." + (" Never push to main." if turn == 1 else "")


def repo(tmp_path: Path, monkeypatch: Any, turns: int) -> Path:
    """The project the agent works in (the working directory): `src/mod<turn>.py`."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    for turn in range(turns):
        (root / "src" / f"mod{turn}.py").write_text("x = 1\n")
    monkeypatch.chdir(root)
    return root


def config(tmp_path: Path, root: Path, budget: int, **fields: Any) -> ContextConfig:
    """Every output cut at once and compacted away soon (`fields` override)."""
    values: dict[str, Any] = {
        "working_dir": str(tmp_path / "ctx"),
        "max_input_tokens": budget,
        "keep_recent_ratio": 0.01,
        "read_roots": [str(root), str(tmp_path / "ctx")],
        "tool_result": {"recent_n": 1, "recent_max_bytes": 2_000, "old_max_bytes": 1_100},
        "summarizer": {"enabled": False},
    }
    values.update(fields)
    return ContextConfig.model_validate(values)


def writer_config(tmp_path: Path, root: Path, budget: int, writer: str) -> ContextConfig:
    """`lazy` (plain request), `lazy-prefix` (the prefix request) or `extractive`."""
    compactor = {
        "enabled": writer != "extractive",
        "request": "prefix" if writer == "lazy-prefix" else "plain",
    }
    return config(tmp_path, root, budget, compactor=compactor)


def pin_config(tmp_path: Path, root: Path) -> ContextConfig:
    """8,000 tokens, outputs masked one turn on, each due cut at once."""
    tool_result = {
        "recent_n": 1,
        "mask_after": 1,
        "recent_max_bytes": 2_000,
        "old_max_bytes": 1_100,
    }
    return config(tmp_path, root, 8_000, clear_at_least=0, tool_result=tool_result)


def check_prompt(prompt: str, summary: str, touched: list[str], compactions: int) -> None:
    """The next prompt holds the user's constraints and first task, the newest instruction,
    every file touched and the newest error; the summary reports no failed run ok."""
    for needle in ("Do not modify setup.cfg, do not touch vendor/.", "Fix the failing test"):
        assert needle in prompt, needle
    if compactions > 1:
        assert "Never push to main." in prompt
    assert "Where are we?" in prompt  # the newest instruction, verbatim
    for path in touched:
        assert path in prompt, path
    assert f"ValueError: bad input #{compactions - 1}" in prompt  # the newest error
    assert "→ ok" not in "".join(line for line in summary.splitlines() if "pytest" in line)
