"""A pipeline run that fails anyway (a bug, or a failure no stage expected: here the
compaction raises) is followed by `ContextPipeline.hold` (issue 46 item 15): on the installed
line the agent goes on, and no prompt goes over the budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx import ContextConfig, TokenCounter
from agentscope_ctx.core.compaction._compaction import Compaction
from tests.support.agent_line import Line
from tests.support.fakes import NOTED_SUMMARY

BUDGET = 3_000
COUNTER = TokenCounter("o200k_base")


def cat(n: int) -> str:
    """Print log n.

    Args:
        n (int): which log.
    """
    return "".join(f"10:{i % 60:02d} worker-{n} job={i} status=ok\n" for i in range(150))


async def test_a_run_that_fails_still_sends_no_prompt_over_the_budget(
    tmp_path: Path, line: Line, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: Compaction, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in the compaction")

    monkeypatch.setattr(Compaction, "run", broken)
    config = ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "w"),
            "max_input_tokens": BUDGET,
            "tool_result": {"recent_max_bytes": 2_000, "old_max_bytes": 1_200, "mask_after": None},
            "summarizer": {"enabled": False},
        }
    )
    session = line.session(config, line.fake_model(default=NOTED_SUMMARY), [cat])
    try:
        await session.turn(
            "Read logs 0 to 8.",
            *[line.tool_call("cat", f"c{n}", n=n) for n in range(9)],
            line.text("Read."),
        )
    finally:
        await session.close()
    calls = session.model.calls
    sizes = [await COUNTER.count(line.sent(call), tools=call["tools"]) for call in calls]
    assert len(calls) == 10  # every step reached the model: the agent went on
    assert max(sizes) <= BUDGET, sizes
