"""Pinned messages through a real 2.x `Agent` (DESIGN.md §13; the 1.x agent's:
`tests/agentscope1/test_pins_agent1.py`): a message made pinned and a reply pinned later are
never masked, cut harder or compacted over ten compactions. What survives compaction on both
lines: `tests/core/test_guards.py`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentscope.message import ToolResultBlock, UserMsg

from agentscope_ctx.core.ladder._ladder import MASKED
from tests.core.test_guards import tools
from tests.support.agent_line import installed
from tests.support.fakes import FakeChatModel, tool_call
from tests.support.guard_session import (
    LAZY,
    pin_config,
    repo,
    steps,
)


async def test_pinned_messages_survive_ten_compactions_and_masking(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A message made pinned (metadata) and a reply pinned later (`ContextManager.pin`) are
    never masked, cut harder or compacted over ten compactions under pressure."""
    from agentscope_ctx.core.context._pins import PIN_MARK

    root = repo(tmp_path, monkeypatch, 10)
    config = pin_config(tmp_path, root)
    session = installed().session(
        config, FakeChatModel(default=LAZY), tools(root), sys_prompt="You fix code."
    )
    manager, agent, model = session.manager, session.agent, session.model
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
