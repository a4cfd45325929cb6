"""What the agent still knows after compaction (DESIGN.md §13), on the installed line (`line`
fixture: a real 1.x `ReActAgent` or 2.x `Agent`). With a lazy compactor model (the five
headings and generic lines, answering the plain or the prefix request) and with the extractive
fallback, after 1, 3 and 10 compactions at budgets from 3,000 to 128,000 tokens the next prompt
holds the user's constraints and first task, the newest instruction, every file the agent
touched and the newest error; a failed run is never reported ok; no compaction makes the
prompt bigger. Pinned messages through each line's agent: `tests/agentscope1/test_pins_agent1.py`,
`tests/agentscope2/test_guards.py`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_line import Line
from tests.support.guard_session import (
    GRID,
    LAZY,
    check_prompt,
    edit,
    repo,
    shell,
    steps,
    words,
    write,
    writer_config,
)


def tools(root: Path) -> list[Any]:
    """The coding agent's tools on the repository at `root` (`guard_session`'s)."""

    def run_shell(command: str) -> str:
        """Run a shell command.

        Args:
            command (str): the command line.
        """
        return shell(command)

    def edit_file(file_path: str, old: str, new: str) -> str:
        """Replace text in a file.

        Args:
            file_path (str): the file.
            old (str): the text to replace.
            new (str): its replacement.
        """
        return edit(root, file_path, old, new)

    def write_file(file_path: str, content: str) -> str:
        """Write a file.

        Args:
            file_path (str): the file.
            content (str): its text.
        """
        return write(root, file_path, content)

    return [run_shell, edit_file, write_file]


@pytest.mark.parametrize("writer", ["lazy", "lazy-prefix", "extractive"])
@pytest.mark.parametrize(("budget", "compactions"), GRID)
async def test_constraints_files_and_errors_survive_compactions(
    line: Line, tmp_path: Path, monkeypatch: Any, writer: str, budget: int, compactions: int
) -> None:
    """`compactions` turns, each followed by a manual compaction (each made, none making the
    prompt bigger). `lazy-prefix`: the lazy model answers the prefix request (`compactor.request:
    prefix`, the compactor's model being the agent's kind)."""
    root = repo(tmp_path, monkeypatch, compactions)
    config = writer_config(tmp_path, root, budget, writer)
    helper = line.fake_model(default=LAZY)
    session = line.session(config, helper, tools(root), sys_prompt="You fix code.")
    touched: list[str] = []
    for turn in range(compactions):
        touched += [f"src/mod{turn}.py", f"notes/n{turn}.md"]
        await session.turn(words(turn), *steps(line.tool_call, turn))
        report = await session.manager.compact(session.agent)
        assert report.compacted, report.note
        assert report.tokens_after <= report.tokens_before  # no compaction makes it bigger
    await session.turn("Where are we?", "Looked.")
    await session.close()
    asked = [json.dumps(line.sent(c), ensure_ascii=False) for c in helper.calls]
    if writer == "lazy-prefix":  # the lazy model got the prefix request
        assert any("[agentscope_ctx: context compaction." in a for a in asked)
    check_prompt(session.prompt(), session.summary(), touched, compactions)
