"""Issue 29, item 5: a 1.x session recovers after a `PromptTooLargeError`.

A user turn over the budget alone raises `PromptTooLargeError` before the model call, as
documented. The pipeline also ran at `pre_reply`, before the reply put the new message in
memory, so the turn that did not fit was still the current turn there: every later turn raised
the same error, and its message was stored nowhere. Now the check waits for `pre_reasoning`
(the last moment before a prompt is sent), where the new message is the current turn and the
turn that did not fit is an older message that compaction saves to the dialog store.

`recover` is the session; the same session on the PostgreSQL store is in
`tests/fleet/test_fleet_agents.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("a ReActAgent's turns after PromptTooLargeError"), allow_module_level=True
    )

from agentscope.message import Msg, TextBlock

from agentscope_ctx import ContextConfig, ContextManager, PromptTooLargeError
from tests.support.fakes import FakeChatModel
from tests.support.react1 import react


def big_turn() -> Msg:
    """A user turn of 60 text blocks, ~7,500 tokens: over a 3,000-token budget alone."""
    blocks = [
        TextBlock(type="text", text=f"part {i}: " + "the words of a long paste " * 30)
        for i in range(60)
    ]
    return Msg("user", blocks, "user")


async def recover(config: ContextConfig) -> None:
    """A session whose second turn cannot fit: it raises, unanswered; each of the next turns
    is answered, and every user message is in memory or in the dialog store."""
    model = FakeChatModel(["hello", *[f"answer {i}" for i in range(3)]])
    agent = react(model, sys_prompt="You are a careful assistant.")
    manager = ContextManager(config)
    memory = manager.attach(agent)
    try:
        asked = [Msg("user", "hi", "user"), big_turn()]
        await agent(asked[0])
        with pytest.raises(PromptTooLargeError):
            await agent(asked[1])
        assert len(model.calls) == 1  # that prompt was not sent
        for i in range(3):
            asked.append(Msg("user", f"an ordinary question, number {i}", "user"))
            answer = await agent(asked[-1])
            assert answer.get_text_content() == f"answer {i}"
        assert len(model.calls) == 4
        kept = {m.id for m in memory.messages()} | manager.dialog.ids()
        assert [m.id for m in asked if m.id not in kept] == []
        assert asked[1].id in manager.dialog.ids()  # the turn that did not fit was saved
    finally:
        await manager.close()


async def test_a_session_recovers_after_prompt_too_large(tmp_path: Path) -> None:
    await recover(
        ContextConfig(working_dir=tmp_path, max_input_tokens=3_000, summarizer={"enabled": False})
    )
