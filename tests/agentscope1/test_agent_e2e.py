"""End to end: a real ReActAgent, real Toolkit, real files, a scripted model, 200+ steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.dialog_order import dialog_then_live
from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("drives a ReActAgent through ContextManager's hooks"), allow_module_level=True
    )

from agentscope.message import Msg
from agentscope.tool import Toolkit

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.core.tokens._tokens import TokenCounter
from agentscope_ctx.core.truncation._truncation import parse_notice
from tests.support.chain import follow_chain, manager_reader
from tests.support.fakes import FakeChatModel, text, tool_call
from tests.support.react1 import react, record_adds, text_tools

BUDGET = 12_000


def make_tools(tmp_path: Path) -> Toolkit:
    def fetch_page(url: str) -> str:
        """Fetch a web page.

        Args:
            url (str): the address.
        """
        n = int(url.rsplit("/", 1)[-1])
        body = "".join(
            f"<p id='{n}-{i}'>paragraph {i} of page {n} 中文 😀</p>\n" for i in range(900)
        )
        return f"<html>{body}</html>"

    def run_shell(command: str) -> str:
        """Run a shell command.

        Args:
            command (str): the command line.
        """
        lines = "".join(f"{command}: line {i} INFO ok\r\n" for i in range(400))
        return lines

    return text_tools(fetch_page, run_shell)


def scripted_step(step: int) -> Any:
    if step % 3 == 0:
        return tool_call("fetch_page", call_id=f"c{step}", url=f"http://127.0.0.1/page/{step}")
    if step % 3 == 1:
        return tool_call("run_shell", call_id=f"c{step}", command=f"grep -n error log{step}")
    return tool_call("read_file", call_id=f"c{step}", file_path="notes.txt", start_line=1)


@pytest.mark.parametrize("turns", [3, pytest.param(6, marks=pytest.mark.slow)])
async def test_long_session_stays_within_budget_and_loses_nothing(
    tmp_path: Path, monkeypatch: Any, turns: int
) -> None:
    """A session of `turns` turns of 36 tool calls through a real `ReActAgent` (3 by default,
    some 110 model calls and a compaction at least; the 222 calls of 6 turns under
    ``-m slow``): every prompt within the budget, nothing lost."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("".join(f"note {i}\n" for i in range(3_000)))
    config = ContextConfig(
        working_dir=tmp_path / "ctx",
        max_input_tokens=BUDGET,
        compact_trigger_ratio=0.7,
        keep_recent_ratio=0.3,
        tool_result={"recent_n": 3, "recent_max_bytes": 6_000, "old_max_bytes": 1_500},
        token_counter="cl100k_base",
    )
    counter = TokenCounter("cl100k_base")
    model = FakeChatModel()
    agent = react(
        model, make_tools(tmp_path), sys_prompt="You are a careful assistant.", max_iters=40
    )
    manager = ContextManager(config, token_counter=counter)
    memory = manager.attach(agent)
    manager.attach(agent)  # twice is fine

    added = record_adds(memory)

    step = 0
    for turn in range(turns):
        for _ in range(36):
            model.enqueue(scripted_step(step))
            step += 1
        model.enqueue(text(f"turn {turn} done"))
        reply = await agent(Msg("user", f"task {turn}: look around", "user"))
        assert reply.get_text_content() == f"turn {turn} done"
    assert len(model.calls) >= 37 * turns - 2

    # the budget held at every model call, counted on the formatted prompt itself
    for call in model.calls:
        assert await counter.count(call["messages"], tools=call["tools"]) <= BUDGET

    # nothing lost, nothing duplicated, order kept: dialog/ then memory
    stored, report = manager.dialog.read()
    assert report.bad_lines == []
    assert dialog_then_live(stored, memory.messages()) == added
    assert memory.compact_summary

    # every tool_use in memory has its tool_result
    uses = {b["id"] for m in memory.messages() for b in m.get_content_blocks("tool_use")}
    results = {b["id"] for m in memory.messages() for b in m.get_content_blocks("tool_result")}
    assert uses <= results

    # every notice in memory points to a file that exists and chains back losslessly
    read = manager_reader(manager)
    chained = 0
    for msg in memory.messages():
        for block in msg.get_content_blocks("tool_result"):
            output = block["output"]
            out_text = output if isinstance(output, str) else output[0]["text"]
            parsed = parse_notice(out_text)
            if parsed is None:
                continue
            assert Path(parsed[1].file_path).exists()
            full = await follow_chain(out_text, read)
            assert len(full) > len(parsed[0])
            chained += 1
    assert chained > 0

    usage = await manager.context_usage(agent)
    assert usage.total <= BUDGET and 0 < usage.ratio <= 1
    assert json.dumps(memory.state_dict())  # serialisable
