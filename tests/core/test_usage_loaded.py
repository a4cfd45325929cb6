"""`context_usage()` on a freshly loaded worker tells the prompt the next model call would get
(issue 31 item 7: a state loaded from storage with an output never cut, e.g. rebuilt by an app
from its own message history, showed its uncut size, 89,462 tokens on a 20,000 budget, until
the next model call)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.core.truncation._truncation import parse_notice
from tests.support.lines import IS_1X

BUDGET = 20_000
OUTPUT = "".join(f"line {i} of a long log with words\n" for i in range(8_000))


async def _loaded_agent(manager: ContextManager) -> Any:
    """An agent of the installed line whose context, loaded from storage, holds a question,
    a tool call, its whole output (about 87k tokens) and the answer; no model call yet."""
    if IS_1X:
        from agentscope.message import Msg, TextBlock, ToolResultBlock, ToolUseBlock
        from agentscope.tool import Toolkit

        from tests.support.fakes import FakeChatModel
        from tests.support.react1 import react

        agent = react(FakeChatModel(), name="a", sys_prompt="s")
        manager.attach(agent)
        use = ToolUseBlock(type="tool_use", id="c1", name="cat", input={})
        result = ToolResultBlock(
            type="tool_result", id="c1", name="cat", output=[TextBlock(type="text", text=OUTPUT)]
        )
        msgs = [
            Msg("user", "read it", "user"),
            Msg("a", [use], "assistant"),
            Msg("system", [result], "system"),
            Msg("a", "done", "assistant"),
        ]
        agent.memory.load_state_dict({"content": [[m.to_dict(), []] for m in msgs]})
        return agent
    from agentscope.agent import Agent
    from agentscope.message import AssistantMsg, TextBlock, ToolCallBlock, ToolResultBlock, UserMsg
    from agentscope.state import AgentState
    from agentscope.tool import Toolkit

    from tests.support.fakes import FakeChatModel

    call = ToolCallBlock(id="c1", name="cat", input="{}")
    result = ToolResultBlock(id="c1", name="cat", output=[TextBlock(text=OUTPUT)])
    state = AgentState(
        context=[
            UserMsg(name="user", content="read it"),
            AssistantMsg(name="a", content=[call, result]),
            AssistantMsg(name="a", content="done"),
        ]
    )
    return Agent(
        name="a",
        system_prompt="s",
        model=FakeChatModel(),
        toolkit=Toolkit(),
        middlewares=[manager.middleware()],
        state=state,
    )


def _outputs(agent: Any) -> list[str]:
    """The texts of the tool outputs in the agent's context, as the agent holds them."""
    texts = []
    if IS_1X:
        for msg in agent.memory.content:
            for block in msg[0].get_content_blocks("tool_result"):
                texts += [part["text"] for part in block["output"]]
        return texts
    for msg in agent.state.context:
        for block in msg.content:
            if block.type == "tool_result":
                texts += [part.text for part in block.output]
    return texts


async def test_i31_usage_of_a_loaded_context_is_the_next_prompt(tmp_path: Path) -> None:
    config = ContextConfig(
        working_dir=tmp_path / "ctx", max_input_tokens=BUDGET, summarizer={"enabled": False}
    )
    manager = ContextManager(config)
    try:
        agent = await _loaded_agent(manager)
        usage = await manager.context_usage(agent)
        # before: 87,059 tokens (tool_results 87,017), over four times the budget
        assert usage.calibrated_total <= BUDGET and usage.tool_results < 9_000, usage
        again = await manager.context_usage(agent)
        assert again.total == usage.total  # asking twice changes nothing more
        [shown] = _outputs(agent)  # the agent's context holds the cut, as after a model call
        parsed = parse_notice(shown)
        assert parsed is not None
        saved = Path(parsed[1].file_path)
        assert saved.read_text(encoding="utf-8") == OUTPUT  # nothing lost: saved whole
    finally:
        await manager.close()
