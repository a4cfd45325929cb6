"""What the agent still knows after compaction, on a real 2.x `Agent` (DESIGN.md §13): with a
lazy compactor model (the five headings and generic lines, answering the plain or the prefix
request) and with the extractive fallback, after 1, 3 and 10 compactions at budgets from
3,000 to 128,000 tokens the next prompt still holds the user's constraints and first task,
every file the agent touched, and the newest error; a failed run is never reported ok; no
compaction makes the prompt bigger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import ToolResultBlock, UserMsg
from agentscope.tool import FunctionTool, Toolkit

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.core._ladder import MASKED
from tests.guard_session import FAILING, FIRST, LAZY
from tests.v2.fakes import ALLOW, FakeChatModel, tool_call


def _toolkit(root: Path) -> Toolkit:
    def run_shell(command: str) -> str:
        """Run a shell command.

        Args:
            command (str): the command line.
        """
        if command.startswith("pytest"):  # each run's error names its turn
            return FAILING.replace("bad input", f"bad input #{command.split('# ')[-1]}")
        return "".join(f"{command}: line {i} ok\n" for i in range(300))

    def edit_file(file_path: str, old: str, new: str) -> str:
        """Replace text in a file.

        Args:
            file_path (str): the file.
            old (str): the text to replace.
            new (str): its replacement.
        """
        path = root / file_path
        path.write_text(path.read_text().replace(old, new))
        return f"edited {file_path}"

    def write_file(file_path: str, content: str) -> str:
        """Write a file.

        Args:
            file_path (str): the file.
            content (str): its text.
        """
        (root / file_path).parent.mkdir(parents=True, exist_ok=True)
        (root / file_path).write_text(content)
        return f"wrote {file_path}"

    return Toolkit(
        tools=[
            FunctionTool(fn, permission=ALLOW, is_read_only=False)
            for fn in (run_shell, edit_file, write_file)
        ]
    )


def _steps(turn: int) -> list[Any]:
    return [
        tool_call("run_shell", f"t{turn}a", command=f"pytest -x tests/test_app.py  # {turn}"),
        tool_call("edit_file", f"t{turn}b", file_path=f"src/mod{turn}.py", old="x", new="y"),
        tool_call("write_file", f"t{turn}c", file_path=f"notes/n{turn}.md", content="n" * 50),
        tool_call("run_shell", f"t{turn}d", command=f"cat big{turn}.log"),
        f"Turn {turn} done.",
    ]


def _words(turn: int) -> str:
    """The user's turn: the first with its constraints, the second with one more."""
    if turn == 0:
        return FIRST
    return f"Now continue with module {turn}." + (" Never push to main." if turn == 1 else "")


async def _session(
    tmp_path: Path, monkeypatch: Any, writer: str, budget: int, compactions: int
) -> tuple[str, str, list[str]]:
    """`compactions` turns, each followed by a manual compaction (each made, none making the
    prompt bigger); returns the last prompt the agent's model received, the summary, and the
    files touched. `lazy-prefix`: the lazy model answers the prefix request."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    for turn in range(compactions):
        (root / "src" / f"mod{turn}.py").write_text("x = 1\n")
    monkeypatch.chdir(root)
    config = ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "ctx"),
            "max_input_tokens": budget,
            "keep_recent_ratio": 0.01,
            "read_roots": [str(root), str(tmp_path / "ctx")],
            "tool_result": {"recent_n": 1, "recent_max_bytes": 2_000, "old_max_bytes": 1_100},
            "summarizer": {"enabled": False},
            "compactor": {
                "enabled": writer != "extractive",
                "request": "prefix" if writer == "lazy-prefix" else "plain",
            },
        }
    )
    helper = FakeChatModel(default=LAZY)
    model = FakeChatModel(default="ok")
    manager = ContextManager(config, model=helper)
    agent = Agent(
        name="coder",
        system_prompt="You fix code.",
        model=model,
        toolkit=_toolkit(root),
        middlewares=[manager.middleware()],
    )
    touched: list[str] = []
    for turn in range(compactions):
        model.enqueue(*_steps(turn))
        touched += [f"src/mod{turn}.py", f"notes/n{turn}.md"]
        async for _ in agent.reply_stream(UserMsg(name="user", content=_words(turn))):
            pass
        report = await manager.compact(agent)
        assert report.compacted, report.note
        assert report.tokens_after <= report.tokens_before  # no compaction makes it bigger
    model.enqueue("Looked.")
    async for _ in agent.reply_stream(UserMsg(name="user", content="Where are we?")):
        pass
    await manager.close()
    if writer == "lazy-prefix":  # the lazy model got the prefix request
        asked = [json.dumps(c["formatted"], ensure_ascii=False) for c in helper.calls]
        assert any("[agentscope_ctx: context compaction." in a for a in asked)
    prompt = json.dumps(model.calls[-1]["formatted"], ensure_ascii=False)
    return prompt, str(agent.state.summary), touched


_FAST = {(3_000, 3), (3_000, 10), (8_000, 10), (128_000, 1), (128_000, 10)}
GRID = [
    pytest.param(budget, n, marks=() if (budget, n) in _FAST else pytest.mark.slow)
    for budget in (3_000, 8_000, 128_000)
    for n in (1, 3, 10)
]
"""Budgets from 3,000 to 128,000 tokens x 1, 3 and 10 compactions (issue 22, "Done when");
the corners and the old points in the default suite, the rest with `-m slow`."""


@pytest.mark.parametrize("writer", ["lazy", "lazy-prefix", "extractive"])
@pytest.mark.parametrize(("budget", "compactions"), GRID)
async def test_constraints_files_and_errors_survive_compactions(
    tmp_path: Path, monkeypatch: Any, writer: str, budget: int, compactions: int
) -> None:
    prompt, summary, touched = await _session(tmp_path, monkeypatch, writer, budget, compactions)
    for needle in ("Do not modify setup.cfg, do not touch vendor/.", "Fix the failing test"):
        assert needle in prompt, needle
    if compactions > 1:
        assert "Never push to main." in prompt
    assert "Where are we?" in prompt  # the newest instruction, verbatim
    for path in touched:
        assert path in prompt, path
    assert f"ValueError: bad input #{compactions - 1}" in prompt  # the newest error
    assert "→ ok" not in "".join(line for line in summary.splitlines() if "pytest" in line)


async def test_pinned_messages_survive_ten_compactions_and_masking(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A message made pinned (metadata) and a reply pinned later (`ContextManager.pin`) are
    never masked, cut harder or compacted over ten compactions under pressure."""
    from agentscope_ctx.core._pins import PIN_MARK

    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    for turn in range(10):
        (root / "src" / f"mod{turn}.py").write_text("x = 1\n")
    monkeypatch.chdir(root)
    config = ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "ctx"),
            "max_input_tokens": 8_000,
            "keep_recent_ratio": 0.01,
            "read_roots": [str(root), str(tmp_path / "ctx")],
            "tool_result": {
                "recent_n": 1,
                "mask_after": 1,
                "recent_max_bytes": 2_000,
                "old_max_bytes": 1_100,
            },
            "summarizer": {"enabled": False},
            "clear_at_least": 0,  # each due cut (masking included) as soon as it is due
        }
    )
    model = FakeChatModel(default="ok")
    manager = ContextManager(config, model=FakeChatModel(default=LAZY))
    agent = Agent(
        name="coder",
        system_prompt="You fix code.",
        model=model,
        toolkit=_toolkit(root),
        middlewares=[manager.middleware()],
    )
    persona = UserMsg(name="user", content="Persona: answer in French, always.")
    persona.metadata[PIN_MARK] = True
    model.enqueue(*_steps(0))
    async for _ in agent.reply_stream(persona):
        pass
    reply = agent.state.context[-1]
    shown = json.dumps([b.model_dump() for b in reply.content], ensure_ascii=False)
    await manager.pin(agent, reply.id)
    with pytest.raises(Exception, match="no message with id"):
        await manager.pin(agent, "no-such-message")
    for turn in range(1, 10):
        model.enqueue(*_steps(turn))
        async for _ in agent.reply_stream(UserMsg(name="user", content=f"Go on with {turn}.")):
            pass
        masked = manager.bind(agent).pipeline.ladder.plan.applied
        assert any(level == MASKED for level in masked.values())  # masking ran around it
        await manager.compact(agent)
    ids = [msg.id for msg in agent.state.context]
    assert persona.id in ids and reply.id in ids
    kept = next(msg for msg in agent.state.context if msg.id == reply.id)
    assert json.dumps([b.model_dump() for b in kept.content], ensure_ascii=False) == shown
    prompt = json.dumps(model.calls[-1]["formatted"], ensure_ascii=False)
    assert "Persona: answer in French, always." in prompt
    assert "src/mod9.py" in prompt and len(manager.dialog.ids()) > 20
    await manager.pin(agent, reply.id, pinned=False)
    await manager.compact(agent)  # unpinned: its calls and results leave like any others
    left = [msg for msg in agent.state.context if msg.id == reply.id]
    assert not any(isinstance(b, ToolResultBlock) for msg in left for b in msg.content)
    await manager.close()
