"""Pinned messages through a real 1.x `ReActAgent` (DESIGN.md §13; the 2.x agent's:
`tests/agentscope2/test_guards.py`): a message made pinned and a tool result pinned later are
never masked, cut harder or compacted over ten compactions. What survives compaction on both
lines: `tests/core/test_guards.py`."""

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

from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg

from agentscope_ctx import ContextManager
from tests.core.test_guards import tools
from tests.support.agent_line import installed
from tests.support.fakes import FakeChatModel, tool_call
from tests.support.guard_session import LAZY, pin_config, repo, steps
from tests.support.react1 import react


async def test_pinned_messages_survive_ten_compactions_and_masking(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A message made pinned (metadata) and a tool result pinned later (`ContextManager.pin`,
    its call kept with it) are never masked, cut harder or compacted over ten compactions."""
    from agentscope_ctx.core.context._pins import PIN_MARK
    from agentscope_ctx.core.ladder._ladder import MASKED

    root = repo(tmp_path, monkeypatch, 10)
    config = pin_config(tmp_path, root)
    model = FakeChatModel(default="ok")
    agent = react(model, installed().toolkit(tools(root)), name="coder", sys_prompt="You fix code.")
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
