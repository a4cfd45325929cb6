"""The three properties of the package, on AgentScope 2.x as on 1.x, for any session: a real
2.x `Agent` and `Toolkit` whose tool prints outputs of random sizes and scripts (ASCII, CJK,
JSON), under a random budget, with or without the masking rungs, streaming or not.

- never over budget: every prompt the model receives fits `max_input_tokens` (tiktoken);
- nothing lost: every message part the model was ever sent is in the state or in `dialog/`;
- lossless chain: every cut output in the state reads back, byte for byte, through its
  notices with `read_file`.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from agentscope.agent import Agent
from agentscope.message import Msg, TextBlock, ToolResultBlock, UserMsg
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import FunctionTool, Toolkit
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
from agentscope_ctx.agentscope2._entries import to_entries
from agentscope_ctx.core.truncation._truncation import parse_notice
from tests.support.chain import follow_chain
from tests.support.fakes import ALLOW, FakeChatModel, tool_call

COUNTER = TokenCounter()


def output(step: int, size: int, script: str) -> str:
    """The tool's output of one step: about `size` bytes of lines in `script`."""
    lines = []
    total = 0
    n = 0
    while total < size:
        if script == "cjk":
            line = f"第{step}步 第{n}行：订单已发货，客户满意 ✓\n"
        elif script == "json":
            line = json.dumps({"step": step, "row": n, "名称": f"客户{n}", "ok": True}) + "\n"
        else:
            line = f"step {step} line {n}: job finished status=ok elapsed={n % 97}ms\n"
        lines.append(line)
        total += len(line.encode())
        n += 1
    return "".join(lines)


async def _session(
    root: Path, sizes: list[int], scripts: list[str], budget: int, masking: bool, stream: bool
) -> None:
    expected: dict[str, str] = {}

    def emit(step: int) -> str:
        """Print the output of a step.

        Args:
            step (int): the step.
        """
        text = output(step, sizes[step], scripts[step % len(scripts)])
        expected[f"c{step}"] = text
        return text

    sent: list[int] = []

    async def answer(messages: list[Msg]) -> ChatResponse:
        formatted = await model.formatter.format(messages)
        tokens = await COUNTER.count(formatted, model.calls[-1]["tools"])
        sent.append(tokens)
        step = len(sent) - 1
        if step < len(sizes):
            content = list(tool_call("emit", f"c{step}", step=step).content)
        else:
            content = [TextBlock(text="done")]
        usage = ChatUsage(input_tokens=tokens, output_tokens=3, time=0.0)
        return ChatResponse(content=content, is_last=True, usage=usage)

    model = FakeChatModel([answer] * (len(sizes) + 1), stream=stream)
    tool_result = {} if masking else {"mask_after": None, "recent_max_share": None}
    config = ContextConfig.model_validate(
        {
            "working_dir": str(root / "ctx"),
            "max_input_tokens": budget,
            "tool_result": tool_result,
            "summarizer": {"enabled": False},
            "recall": {"enabled": False},
        }
    )
    manager = ContextManager(config)  # no model: extractive summaries
    toolkit = Toolkit(tools=[FunctionTool(emit, permission=ALLOW, is_read_only=True)])
    agent = Agent(
        name="worker",
        system_prompt="Run the steps.",
        model=model,
        toolkit=toolkit,
        middlewares=[manager.middleware()],
    )
    await agent.reply(UserMsg(name="user", content="Run every step."))
    await manager.close()

    # never over budget
    assert len(sent) == len(sizes) + 1
    assert max(sent) <= budget, (sent, budget)
    # nothing lost
    seen: set[str] = set()
    for call in model.calls:
        for msg in call["messages"][1:]:
            if msg.name == "user" and "compact_summary" in str(msg.content):
                continue  # the summary, rebuilt at each compaction
            seen.update(entry.id for entry, _ in to_entries(msg))
    kept = {entry.id for msg in agent.state.context for entry, _ in to_entries(msg)}
    assert seen <= kept | manager.dialog.ids()
    # lossless chain
    reader = manager.reader

    async def read(path: str, line: int, offset: int) -> str:
        response = await reader.read_file(path, line, offset)
        return "".join(b.text for b in response.content if isinstance(b, TextBlock))

    for msg in agent.state.context:
        for block in msg.content:
            if not isinstance(block, ToolResultBlock):
                continue
            out = block.output
            text = (
                out
                if isinstance(out, str)
                else "".join(b.text for b in out if isinstance(b, TextBlock))
            )
            if parse_notice(text) is not None:
                assert await follow_chain(text, read) == expected[block.id]


@settings(max_examples=10, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 60_000), min_size=2, max_size=10),
    scripts=st.lists(st.sampled_from(["ascii", "cjk", "json"]), min_size=1, max_size=3),
    budget=st.integers(5_000, 16_000),
    masking=st.booleans(),
    stream=st.booleans(),
)
@example(sizes=[60_000] * 10, scripts=["cjk"], budget=5_000, masking=False, stream=False)
@example(sizes=[40_000, 0, 50_000], scripts=["json"], budget=5_000, masking=True, stream=True)
def test_any_2x_session_within_budget_nothing_lost_lossless(
    sizes: list[int], scripts: list[str], budget: int, masking: bool, stream: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_session(Path(tmp), sizes, scripts, budget, masking, stream))
