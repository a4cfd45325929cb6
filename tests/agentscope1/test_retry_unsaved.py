"""Issue 23 item 4 on the local store, 1.x: outputs kept whole because ``tool_result/``
could not be written are saved and cut as soon as it can (before the next model call), not
only when they slide out of the newest `recent_n` (the 2.x twin on PostgreSQL:
`tests/agentscope2/test_fleet_faults.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(reason_1x("a ReActAgent through ContextManager"), allow_module_level=True)

from agentscope.message import Msg

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.core.truncation._truncation import parse_notice
from tests.support.chain import follow_chain, manager_reader
from tests.support.fakes import FakeChatModel, text, tool_call
from tests.support.react1 import react, text_tools

BACK = 3
"""The disk works again before the output of call `BACK`."""


def body(n: int) -> str:
    return "".join(f"part {n} record {i}: the output goes on\n" for i in range(300))


async def test_outputs_kept_whole_are_saved_once_the_store_works_again(tmp_path: Path) -> None:
    working_dir = tmp_path / "ctx"
    working_dir.mkdir()
    blocker = working_dir / "tool_result"
    blocker.write_text("a file where the store's directory should be\n")

    def dump(n: int) -> str:
        """Dump part n.

        Args:
            n (int): which part.
        """
        if n == BACK:
            blocker.unlink()
        return body(n)

    model = FakeChatModel()
    agent = react(model, text_tools(dump), name="a", sys_prompt="You dump parts.", max_iters=8)
    config = ContextConfig(
        working_dir=working_dir,
        max_input_tokens=30_000,
        tool_result={"recent_max_bytes": 3_000, "old_max_bytes": 1_500},
    )
    manager = ContextManager(config)
    memory = manager.attach(agent)
    for n in range(BACK + 1):
        model.enqueue(tool_call("dump", call_id=f"c{n}", n=n))
    model.enqueue(text("done"))
    await agent(Msg("user", "dump parts 0 to 3", "user"))

    read = manager_reader(manager)
    outputs = {}
    for msg in memory.messages():
        for block in msg.get_content_blocks("tool_result"):
            output = block["output"]
            outputs[block["id"]] = output if isinstance(output, str) else output[0]["text"]
    assert sorted(outputs) == [f"c{n}" for n in range(BACK + 1)]
    for n in range(BACK + 1):
        parsed = parse_notice(outputs[f"c{n}"])
        assert parsed is not None, f"output {n} is still whole: {outputs[f'c{n}'][:100]!r}"
        assert Path(parsed[1].file_path).parent == (working_dir / "tool_result").resolve()
        assert await follow_chain(outputs[f"c{n}"], read) == body(n)
    assert not memory.views  # the model is shown the saved cuts, nothing marked unsaved
