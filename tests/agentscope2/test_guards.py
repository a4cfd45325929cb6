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

from agentscope_ctx import ContextManager
from agentscope_ctx.core._ladder import MASKED
from tests.support.fakes import ALLOW, FakeChatModel, tool_call
from tests.support.guard_session import (
    GRID,
    LAZY,
    check_prompt,
    edit,
    pin_config,
    repo,
    shell,
    steps,
    words,
    write,
    writer_config,
)


def _toolkit(root: Path) -> Toolkit:
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

    return Toolkit(
        tools=[
            FunctionTool(fn, permission=ALLOW, is_read_only=False)
            for fn in (run_shell, edit_file, write_file)
        ]
    )


async def _session(
    tmp_path: Path, monkeypatch: Any, writer: str, budget: int, compactions: int
) -> tuple[str, str, list[str]]:
    """`compactions` turns, each followed by a manual compaction (each made, none making the
    prompt bigger); returns the last prompt the agent's model received, the summary, and the
    files touched. `lazy-prefix`: the lazy model answers the prefix request."""
    root = repo(tmp_path, monkeypatch, compactions)
    config = writer_config(tmp_path, root, budget, writer)
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
        model.enqueue(*steps(tool_call, turn))
        touched += [f"src/mod{turn}.py", f"notes/n{turn}.md"]
        async for _ in agent.reply_stream(UserMsg(name="user", content=words(turn))):
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


@pytest.mark.parametrize("writer", ["lazy", "lazy-prefix", "extractive"])
@pytest.mark.parametrize(("budget", "compactions"), GRID)
async def test_constraints_files_and_errors_survive_compactions(
    tmp_path: Path, monkeypatch: Any, writer: str, budget: int, compactions: int
) -> None:
    prompt, summary, touched = await _session(tmp_path, monkeypatch, writer, budget, compactions)
    check_prompt(prompt, summary, touched, compactions)


async def test_pinned_messages_survive_ten_compactions_and_masking(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A message made pinned (metadata) and a reply pinned later (`ContextManager.pin`) are
    never masked, cut harder or compacted over ten compactions under pressure."""
    from agentscope_ctx.core._pins import PIN_MARK

    root = repo(tmp_path, monkeypatch, 10)
    config = pin_config(tmp_path, root)
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
    model.enqueue(*steps(tool_call, 0))
    async for _ in agent.reply_stream(persona):
        pass
    reply = agent.state.context[-1]
    shown = json.dumps([b.model_dump() for b in reply.content], ensure_ascii=False)
    await manager.pin(agent, reply.id)
    with pytest.raises(Exception, match="no message with id"):
        await manager.pin(agent, "no-such-message")
    for turn in range(1, 10):
        model.enqueue(*steps(tool_call, turn))
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
