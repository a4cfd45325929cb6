"""Issue 11, item 12 on both lines: a summarizer model call that never ends (no answer, no
first chunk, a stream that stalls mid-way) ends the run at its time limit, with nothing
written and a warning naming the limit."""

from __future__ import annotations

import asyncio
import logging
from datetime import date
from pathlib import Path

import pytest

from agentscope_ctx.memory._summarizer import Summarizer
from tests.core.test_extractive import trajectory
from tests.support.agent_line import Line
from tests.support.fakes import FakeChatModel, StallingStream, hang, tool_call

TODAY = date(2026, 3, 14)


@pytest.mark.parametrize(
    "model",
    [
        FakeChatModel(default=hang),
        FakeChatModel(default=hang, stream=True),
        StallingStream(default=tool_call("read_memory_file", file_path="x.md"), stream=True),
    ],
    ids=["call", "stream-start", "mid-stream"],
)
async def test_a_hanging_summarizer_model_call_ends_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, model: FakeChatModel, line: Line
) -> None:
    formatter = None  # 2.x: the model's own
    if line.is_1x:
        from agentscope.formatter import OpenAIChatFormatter

        formatter = OpenAIChatFormatter()
    summarizer = Summarizer(
        model=model, formatter=formatter, memory_dir=tmp_path, timeout_seconds=0.05
    )
    with caplog.at_level(logging.WARNING, logger="agentscope_ctx"):
        # (the outer limit only turns a hang of the test into a failure)
        answer = await asyncio.wait_for(summarizer.run(trajectory(), today=TODAY), 10)
    assert answer == ""
    assert "a model call took over 0.05 s" in caplog.text
    assert len(model.calls) == 1
    assert list(tmp_path.iterdir()) == []
