"""Faults (issue 7, item 4): a working_dir where nothing can be written, and a compactor
model that hangs or raises. A real ReActAgent with the manager attached must keep replying."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.support.dialog_order import dialog_then_live
from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("drives a ReActAgent through ContextManager's hooks"), allow_module_level=True
    )

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg

from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
from tests.support.fakes import FakeChatModel
from tests.support.react1 import dump_config, dump_log, dump_turns, react, record_adds, text_tools

COUNTER = TokenCounter("cl100k_base")
BUDGET = 12_000


def make_agent(model: FakeChatModel) -> ReActAgent:
    return react(
        model, text_tools(dump_log), sys_prompt="You are a careful assistant.", max_iters=30
    )


def config(working_dir: Path, **overrides: Any) -> ContextConfig:
    # Faults of the compaction path: no masking, so that these sessions compact.
    return dump_config(working_dir, BUDGET, **overrides)


async def run_session(agent: ReActAgent, model: FakeChatModel, turns: int, steps: int) -> None:
    await dump_turns(agent, model, turns, steps)


# -- a working_dir where writing fails --------------------------------------------------


def _unwritable(tmp_path: Path) -> Path:
    """`tool_result` and `dialog` are regular files: every mkdir below them fails, even as root."""
    working_dir = tmp_path / "ctx"
    working_dir.mkdir()
    (working_dir / "tool_result").write_text("not a directory\n")
    (working_dir / "dialog").write_text("not a directory either\n")
    return working_dir


async def _unwritable_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> tuple[list[logging.LogRecord], list[str], Any, FakeChatModel]:
    working_dir = _unwritable(tmp_path)
    model = FakeChatModel()
    agent = make_agent(model)
    manager = ContextManager(config(working_dir), token_counter=COUNTER)
    memory = manager.attach(agent)
    added = record_adds(memory)
    with caplog.at_level(logging.INFO, logger="agentscope_ctx"):
        await run_session(agent, model, turns=3, steps=12)
    return list(caplog.records), added, memory, model


async def test_unwritable_working_dir_agent_keeps_running(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records, added, memory, model = await _unwritable_session(tmp_path, caplog)
    assert len(model.calls) == 3 * 13  # every step reached the model; every reply came back
    errors = [r for r in records if r.levelno >= logging.ERROR]
    assert errors, "the write failure must be logged"
    text_of = " ".join(r.getMessage() for r in errors)
    assert "tool_result" in text_of and "dialog" in text_of
    # nothing deleted: the blocking files are untouched, every message is still in memory
    working_dir = tmp_path / "ctx"
    assert (working_dir / "tool_result").read_text() == "not a directory\n"
    assert (working_dir / "dialog").read_text() == "not a directory either\n"
    assert [m.id for m in memory.messages()] == added
    assert memory.compact_summary == ""
    # tool outputs that could not be saved stay whole (no notice pointing to a missing file)
    for msg in memory.messages():
        for block in msg.get_content_blocks("tool_result"):
            output = block["output"]
            body = output if isinstance(output, str) else output[0]["text"]
            assert "<<<TRUNCATED>>>" not in body
            assert body.count("\n") == 600


async def test_unwritable_working_dir_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records, *_ = await _unwritable_session(tmp_path, caplog)
    errors = [r for r in records if r.levelno >= logging.ERROR]
    assert len(errors) <= 2, (
        f"{len(errors)} ERROR records"
    )  # once for tool_result/, once for dialog/


async def test_unwritable_working_dir_prompt_stays_within_budget(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, _, _, model = await _unwritable_session(tmp_path, caplog)
    for call in model.calls:
        assert await COUNTER.count(call["messages"], tools=call["tools"]) <= BUDGET


# -- a compactor model that hangs or raises ---------------------------------------------


class HangingModel(FakeChatModel):
    """A model whose every call hangs (asynchronously, like a stuck HTTP request)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(name="hanging")
        self.seconds = seconds
        self.started = 0

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.started += 1
        await asyncio.sleep(self.seconds)
        return await super().__call__(*args, **kwargs)


def _blocking_sleep(seconds: float) -> Any:
    def respond(messages: list[dict[str, Any]]) -> str:
        import time

        time.sleep(seconds)  # a synchronous client that blocks the event loop
        return "## Goal\n- never seen"

    return respond


async def _compacting_session(
    tmp_path: Path, compactor_model: FakeChatModel, caplog: pytest.LogCaptureFixture
) -> tuple[list[str], list[str], Any, Any]:
    model = FakeChatModel()
    agent = make_agent(model)
    printed: list[str] = []
    original_print = agent.print

    async def spy_print(msg: Msg, *args: Any, **kwargs: Any) -> None:
        if msg.name == "agentscope_ctx":
            printed.append(msg.get_text_content() or "")
        await original_print(msg, *args, **kwargs)

    agent.print = spy_print  # type: ignore[method-assign]
    manager = ContextManager(
        config(tmp_path / "ctx", compactor={"timeout_seconds": 0.2}),
        model=compactor_model,
        formatter=OpenAIChatFormatter(),
        token_counter=COUNTER,
    )
    memory = manager.attach(agent)
    added = record_adds(memory)
    with caplog.at_level(logging.INFO, logger="agentscope_ctx"):
        await run_session(agent, model, turns=2, steps=15)
    logs = [r.getMessage() for r in caplog.records]
    stored, report = manager.dialog.read()
    assert report.bad_lines == []
    assert dialog_then_live(stored, memory.messages()) == added
    for call in model.calls:
        assert await COUNTER.count(call["messages"], tools=call["tools"]) <= BUDGET
    return printed, logs, memory, manager


async def test_hanging_compactor_falls_back_to_extractive(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hanging = HangingModel(seconds=5.0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    printed, logs, memory, _ = await _compacting_session(tmp_path, hanging, caplog)
    assert hanging.started >= 1
    assert loop.time() - started < 5.0 * hanging.started  # each call was abandoned at 0.2 s
    assert memory.compact_summary.startswith("## Goal")
    done = [p for p in printed if "compacted" in p]
    assert done and all("summary by extractive" in p for p in done)
    assert any("timed out after 0.2 s" in p for p in done)
    assert any(
        "fell back to the extractive summary" in line and "timed out" in line for line in logs
    )


async def test_raising_compactor_falls_back_to_extractive(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failing = FakeChatModel(default=RuntimeError("provider down: 503"))
    printed, logs, memory, _ = await _compacting_session(tmp_path, failing, caplog)
    assert failing.calls
    assert memory.compact_summary.startswith("## Goal")
    done = [p for p in printed if "compacted" in p]
    assert done and all("summary by extractive" in p for p in done)
    assert any("provider down: 503" in p for p in done)
    assert any("Compactor model call failed" in line for line in logs)
    assert any("fell back to the extractive summary" in line for line in logs)


async def test_blocking_compactor_still_falls_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A synchronous sleep blocks the loop, so wait_for cannot interrupt it; the answer that
    arrives late must still be thrown away (timed out), never used."""
    blocking = FakeChatModel(default=_blocking_sleep(0.3))  # past the 0.2 s timeout
    printed, logs, memory, _ = await _compacting_session(tmp_path, blocking, caplog)
    done = [p for p in printed if "compacted" in p]
    assert done
    assert "never seen" not in memory.compact_summary
