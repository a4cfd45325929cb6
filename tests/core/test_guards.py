"""What the agent still knows after compaction, on a real 1.x `ReActAgent` (DESIGN.md §13): the
1.x twin of `tests/agentscope2/test_guards.py`. With a lazy compactor model (the five headings and
generic lines, answering the plain or the prefix request) and with the extractive fallback,
after 1, 3 and 10 compactions at budgets from 3,000 to 128,000 tokens the next prompt holds the
user's constraints and first task, the newest instruction, every file the agent touched and
the newest error; a failed run is never reported ok; no compaction makes the prompt bigger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("drives a ReActAgent through ContextManager's hooks"), allow_module_level=True
    )

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock
from agentscope.tool import Toolkit, ToolResponse

from agentscope_ctx import ContextManager
from tests.support.fakes import FakeChatModel, tool_call
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
    def _text(text: str) -> ToolResponse:
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    def run_shell(command: str) -> ToolResponse:
        """Run a shell command.

        Args:
            command (str): the command line.
        """
        return _text(shell(command))

    def edit_file(file_path: str, old: str, new: str) -> ToolResponse:
        """Replace text in a file.

        Args:
            file_path (str): the file.
            old (str): the text to replace.
            new (str): its replacement.
        """
        return _text(edit(root, file_path, old, new))

    def write_file(file_path: str, content: str) -> ToolResponse:
        """Write a file.

        Args:
            file_path (str): the file.
            content (str): its text.
        """
        return _text(write(root, file_path, content))

    toolkit = Toolkit()
    for fn in (run_shell, edit_file, write_file):
        toolkit.register_tool_function(fn)
    return toolkit


@pytest.mark.parametrize("writer", ["lazy", "lazy-prefix", "extractive"])
@pytest.mark.parametrize(("budget", "compactions"), GRID)
async def test_constraints_files_and_errors_survive_compactions(
    tmp_path: Path, monkeypatch: Any, writer: str, budget: int, compactions: int
) -> None:
    """`lazy-prefix`: the lazy model answers the prefix request (`compactor.request:
    prefix`, the compactor's model being the agent's kind)."""
    root = repo(tmp_path, monkeypatch, compactions)
    config = writer_config(tmp_path, root, budget, writer)
    helper = FakeChatModel(default=LAZY)
    model = FakeChatModel(default="ok")
    agent = ReActAgent(
        name="coder",
        sys_prompt="You fix code.",
        model=model,
        formatter=OpenAIChatFormatter(),
        toolkit=_toolkit(root),
    )
    agent.set_console_output_enabled(False)
    manager = ContextManager(config, model=helper, formatter=OpenAIChatFormatter())
    manager.attach(agent)
    touched: list[str] = []
    for turn in range(compactions):
        model.enqueue(*steps(tool_call, turn))
        touched += [f"src/mod{turn}.py", f"notes/n{turn}.md"]
        await agent(Msg("user", words(turn), "user"))
        report = await manager.compact(agent)
        assert report.compacted, report.note
        assert report.tokens_after <= report.tokens_before  # no compaction makes it bigger
    model.enqueue("Looked.")
    await agent(Msg("user", "Where are we?", "user"))
    await manager.close()
    asked = [json.dumps(c["messages"], ensure_ascii=False) for c in helper.calls]
    if writer == "lazy-prefix":  # the lazy model got the prefix request
        assert any("[agentscope_ctx: context compaction." in a for a in asked)
    prompt = json.dumps(model.calls[-1]["messages"], ensure_ascii=False)
    summary = agent.memory.compact_summary  # type: ignore[attr-defined]
    check_prompt(prompt, summary, touched, compactions)


async def test_pinned_messages_survive_ten_compactions_and_masking(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A message made pinned (metadata) and a tool result pinned later (`ContextManager.pin`,
    its call kept with it) are never masked, cut harder or compacted over ten compactions."""
    from agentscope_ctx.core._ladder import MASKED
    from agentscope_ctx.core._pins import PIN_MARK

    root = repo(tmp_path, monkeypatch, 10)
    config = pin_config(tmp_path, root)
    model = FakeChatModel(default="ok")
    agent = ReActAgent(
        name="coder",
        sys_prompt="You fix code.",
        model=model,
        formatter=OpenAIChatFormatter(),
        toolkit=_toolkit(root),
    )
    agent.set_console_output_enabled(False)
    manager = ContextManager(
        config, model=FakeChatModel(default=LAZY), formatter=OpenAIChatFormatter()
    )
    memory = manager.attach(agent)
    persona = Msg("user", "Persona: answer in French, always.", "user", metadata={PIN_MARK: True})
    model.enqueue(steps(tool_call, 0)[0], "Ran the tests.")  # one output, not masked yet
    await agent(persona)
    result = next(m for m in memory.messages() if "tool_result" in str(m.content))
    shown = json.dumps(result.content, ensure_ascii=False)
    await manager.pin(agent, result.id)
    with pytest.raises(Exception, match="no message with id"):
        await manager.pin(agent, "no-such-message")
    for turn in range(1, 10):
        model.enqueue(*steps(tool_call, turn))
        await agent(Msg("user", f"Go on with {turn}.", "user"))
        plan = manager._binding(agent).pipeline.ladder.plan
        assert MASKED in plan.applied.values()  # masking ran around them
        await manager.compact(agent)
    ids = [m.id for m in memory.messages()]
    assert persona.id in ids and result.id in ids
    call = ids[ids.index(result.id) - 1]  # its tool call stays with it
    assert "tool_use" in str(memory.messages()[ids.index(call)].content)
    assert json.dumps(result.content, ensure_ascii=False) == shown
    prompt = json.dumps(model.calls[-1]["messages"], ensure_ascii=False)
    assert "Persona: answer in French, always." in prompt
    assert len(manager.dialog.ids()) > 20
    await manager.pin(agent, result.id, pinned=False)
    await manager.compact(agent)
    assert result.id not in [m.id for m in memory.messages()]
    await manager.close()
