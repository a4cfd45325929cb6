"""Issue 19.1 on 2.x: a masked `read_file` result stays reachable byte for byte, in a real
2.x `Agent` with a real `Toolkit` and real files (only the model is scripted). The line-neutral
property and the 1.x twin are in `tests/recall/test_read_snapshot.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import Msg, TextBlock, ToolResultBlock, UserMsg
from agentscope.tool import FunctionTool, Toolkit

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.agentscope2 import READ_FILE
from agentscope_ctx.core.truncation._truncation import parse_notice
from tests.recall.test_read_snapshot import EDITED, LINES
from tests.support.chain import check_masked_read_chain
from tests.support.fakes import ALLOW, FakeChatModel, text, tool_call
from tests.support.lines import text_of


def _output(block: ToolResultBlock) -> str:
    if isinstance(block.output, str):
        return block.output
    return "".join(item.text for item in block.output if isinstance(item, TextBlock))


def _results(messages: list[Msg]) -> dict[str, ToolResultBlock]:
    return {
        block.id: block
        for msg in messages
        for block in msg.content
        if isinstance(block, ToolResultBlock)
    }


@pytest.mark.parametrize("edit", [True, False])
async def test_i19_1_v2_masked_read_file_result_stays_reachable(tmp_path: Path, edit: bool) -> None:
    """The agent reads a 3,000-line workspace file, the file is edited (or not), pressure
    masks the old result: its notice then leads to exactly what the agent saw, and
    `search_history` finds a word of it."""
    work = tmp_path / "big.txt"
    work.write_text(LINES, encoding="utf-8")

    def run_shell(command: str) -> str:
        """Run a shell command.

        Args:
            command (str): the command line.
        """
        return "".join(f"{command}: build step {i} INFO ok\n" for i in range(90))

    def edit_file(_messages: Any) -> Any:
        if edit:
            work.write_text(EDITED, encoding="utf-8")
        return tool_call("run_shell", "s0", command="make 0")

    seen: dict[str, str] = {}  # each tool output as the model first saw it
    chain: list[str] = []  # the masked read_file result, then the reads that follow it

    def look(messages: list[Msg]) -> str:
        """Note each tool output of the prompt as first seen; the newest one's call id."""
        blocks = _results(messages)
        for call_id, block in blocks.items():
            seen.setdefault(call_id, _output(block))
        return list(blocks)[-1]

    def follow(messages: list[Msg]) -> Any:
        """The model's policy once it searched: follow the masked read_file result's
        notice with read_file, through the agent, until no notice is left."""
        newest = look(messages)
        chain.append(_output(_results(messages)["r1"]) if newest == "q1" else seen[newest])
        parsed = parse_notice(chain[-1])
        if parsed is None:
            return text("done")
        notice = parsed[1]
        return tool_call(
            READ_FILE,
            f"f{len(chain)}",
            file_path=notice.file_path,
            start_line=notice.next.line,
            line_offset=notice.next.offset,
        )

    def search(messages: list[Msg]) -> Any:
        look(messages)
        return tool_call("search_history", "q1", query="alphaorig5", tool="read_file")

    model = FakeChatModel(
        [
            tool_call("read_file", "r1", file_path=str(work)),
            edit_file,
            *(tool_call("run_shell", f"s{i}", command=f"make {i}") for i in range(1, 6)),
            search,
        ],
        default=follow,
    )
    config = ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "ctx"),
            "max_input_tokens": 6_000,
            "read_roots": [str(tmp_path)],
            "tool_result": {"recent_n": 1, "mask_after": 2, "recent_max_bytes": 8_000},
            "summarizer": {"enabled": False},
        }
    )
    manager = ContextManager(config)
    agent = Agent(
        name="worker",
        system_prompt="You work on files.",
        model=model,
        toolkit=Toolkit(tools=[FunctionTool(run_shell, permission=ALLOW)]),
        middlewares=[manager.middleware()],
    )
    try:
        reply = await agent.reply(UserMsg(name="user", content="Read big.txt, then build."))
        assert reply.get_text_content() == "done"
    finally:
        await manager.close()

    # What the model was shown of read_file: the prompt right after the read.
    shown = _output(_results(model.calls[1]["messages"])["r1"])
    assert parse_notice(shown) is not None and "alphaorig5 " in shown
    # The agent followed the masked result's notice through its own read_file: the excerpts
    # it was shown concatenate back to what it saw of the file first; so does the masked
    # output's notice, through the snapshot.
    results = _results(agent.state.context)
    masked = _output(results["r1"])

    async def read(path: str, line: int, offset: int) -> str:
        return text_of(await manager.reader.read_file(path, line, offset))

    snapshot = await check_masked_read_chain(
        chain, masked, shown, store_dir=manager.store.dir, read=read
    )
    assert (work.read_text(encoding="utf-8") == EDITED) is edit

    found = _output(results["q1"])
    assert "alphaorig5" in found and snapshot.name in found, found
    assert "saved output of read_file(file_path=" in found, found
