"""One odd message must not stop the pipeline (issue 11, item 4).

A real ReActAgent with the manager attached, a real Toolkit and real files; only the chat model
is scripted. A message whose metadata JSON cannot hold (a datetime, a set, an object), or whose
content is ``None``, enters the memory; the session goes on for several compactions. Every
message that leaves the memory must reach ``dialog/`` and every prompt stay within budget.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
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

from agentscope_ctx import ContextManager, TokenCounter
from tests.support.fakes import FakeChatModel
from tests.support.react1 import dump_config, dump_log, dump_turns, react, record_adds, text_tools

COUNTER = TokenCounter("cl100k_base")
BUDGET = 8_000
RECEIVED = datetime(2026, 12, 3, 9, 30, 0)


class Client:
    """An object a caller might put into a message's metadata."""

    def __str__(self) -> str:
        return "Client(web)"


def make_agent(model: FakeChatModel, sys_prompt: str = "You are a careful assistant.") -> Any:
    return react(model, text_tools(dump_log), sys_prompt=sys_prompt, max_iters=30)


def attach(agent: Any, working_dir: Path, **overrides: Any) -> tuple[ContextManager, list[str]]:
    """Attach a manager (no model: extractive summaries); returns it and the ids added."""
    # the odd message must not stop compaction and its saves: the session compacts
    config = dump_config(working_dir, BUDGET, **overrides)
    manager = ContextManager(config, token_counter=COUNTER)
    added = record_adds(manager.attach(agent))
    return manager, added


async def session(agent: Any, model: FakeChatModel, first: Msg, turns: int = 4) -> None:
    """`turns` user turns of 10 big tool calls each; `first` opens the session."""
    await dump_turns(agent, model, turns, 10, first)


async def worst_prompt(model: FakeChatModel) -> int:
    """Tokens of the largest formatted prompt the model received."""
    return max([await COUNTER.count(c["messages"], tools=c["tools"]) for c in model.calls])


def record_of(manager: ContextManager, msg_id: str) -> dict[str, Any]:
    """The one dialog record of `msg_id`, as written on disk."""
    found = [
        record
        for path in sorted(manager.dialog.dialog_dir.glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if (record := json.loads(line))["msg"]["id"] == msg_id
    ]
    assert len(found) == 1
    return found[0]


def check_everything_saved(manager: ContextManager, agent: Any, added: list[str]) -> list[Msg]:
    """dialog/ then memory hold every message once, in order; the memory stays small."""
    stored, report = manager.dialog.read()
    assert report.bad_lines == []
    live = [m.id for m in manager.memory_of(agent).messages()]
    assert dialog_then_live(stored, manager.memory_of(agent).messages()) == added
    assert len(live) < len(added) // 3, "old messages piled up in memory"
    return stored


async def test_i11_04_odd_metadata_does_not_stop_dialog_saves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = FakeChatModel()
    agent = make_agent(model)
    manager, added = attach(agent, tmp_path / "ctx")
    first = Msg(
        "user",
        "task 0",
        "user",
        metadata={"received": RECEIVED, "tags": {"urgent"}, "client": Client()},  # type: ignore[dict-item]
    )
    with caplog.at_level(logging.INFO, logger="agentscope_ctx"):
        await session(agent, model, first)

    assert await worst_prompt(model) <= BUDGET
    stored = check_everything_saved(manager, agent, added)
    odd_id = added[0]
    assert len(stored) > 40  # several compactions after the odd message, all saved
    (odd,) = [m for m in stored if m.id == odd_id]
    assert odd.metadata == {"received": "2026-12-03 09:30:00", "tags": "{'urgent'}",
                            "client": "Client(web)"}  # fmt: skip
    assert record_of(manager, odd_id)["lossy"] == [
        "metadata.received",
        "metadata.tags",
        "metadata.client",
    ]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    warned = [r for r in caplog.records if odd_id in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING  # logged once


async def test_i11_04_content_none_keeps_the_prompt_within_budget(tmp_path: Path) -> None:
    model = FakeChatModel()
    agent = make_agent(model)
    manager, added = attach(agent, tmp_path / "ctx")
    first = Msg("user", "task 0", "user")
    first.content = None  # type: ignore[assignment]
    await session(agent, model, first)

    assert await worst_prompt(model) <= BUDGET
    stored = check_everything_saved(manager, agent, added)
    (odd,) = [m for m in stored if m.id == added[0]]
    assert odd.content == [] and odd.get_content_blocks() == []
    assert record_of(manager, added[0])["lossy"] == ["content"]
    summary = manager.memory_of(agent).compact_summary
    assert "## Goal" in summary and "task 1" in summary


async def test_i11_04_content_none_in_the_kept_part_last_resort_fit(tmp_path: Path) -> None:
    """A long system prompt leaves the kept messages over budget: the last-resort fit runs
    over them, the content-None message among them."""
    model = FakeChatModel()
    agent = make_agent(model, sys_prompt="Be careful. " * 1_300)  # about 3,900 tokens
    manager, added = attach(agent, tmp_path / "ctx", keep_recent_ratio=0.6)
    await agent(Msg("user", "hello", "user"))
    odd = Msg("user", "x", "user")
    odd.content = None  # type: ignore[assignment]
    await agent(odd)
    await agent(Msg("user", "word " * 4_400, "user"))

    assert await worst_prompt(model) <= BUDGET
    live = manager.memory_of(agent).messages()
    assert added[2] in [m.id for m in live]  # the odd message was kept, not compacted
    stored, _ = manager.dialog.read()
    assert dialog_then_live(stored, live) == added
