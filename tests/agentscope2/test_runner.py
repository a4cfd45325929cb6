"""Our helper agents on AgentScope 2.x: the Compactor, the Summarizer and the consolidation run
as real 2.x `Agent`s (real `Toolkit`, `FunctionTool`s, permission engine, files and
tiktoken; only the model is scripted), in plain text, without tools where they need none."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from pydantic import BaseModel

from agentscope_ctx.agentscope2._tools import function_tool
from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core._runner import run_agent
from agentscope_ctx.core.compaction._compactor import CompactionResult, Compactor
from agentscope_ctx.core.config._config import CompactorConfig
from agentscope_ctx.core.summary._extractive import validate_summary
from agentscope_ctx.core.tokens._tokens import TokenCounter
from agentscope_ctx.memory._consolidation import consolidate
from agentscope_ctx.memory._long_term import LongTermMemory
from agentscope_ctx.memory._summarizer import Summarizer
from tests.core.test_compactor_retry import summary
from tests.support.agent_line import said
from tests.support.fakes import (
    FakeChatModel,
    StallingStream,
    StrictChatModel,
    hang,
    text,
    tool_call,
)

TODAY = datetime(2026, 3, 14).date()
NOW = datetime(2026, 3, 14, 3, 0)
NOTES = "- Preference: the user wants answers in French\n- Lesson: pip failed; uv worked"


def trajectory() -> list[Msg]:
    """The core's messages (on 2.x: the plain 1.x-form twin): a failing test, a read, a run."""
    return [
        Msg("user", "tests/test_parser.py fails, please fix it. Don't edit the tests.", "user"),
        Msg(
            "Friday",
            [{"type": "tool_use", "id": "c1", "name": "read_file", "input": {"file_path": "p.py"}}],
            "assistant",
        ),
        Msg(
            "system",
            [
                {
                    "type": "tool_result",
                    "id": "c1",
                    "name": "read_file",
                    "output": [{"type": "text", "text": "def parse_header(line): ..."}],
                }
            ],
            "system",
        ),
        Msg(
            "Friday",
            "ValueError: bad header. I will strip the CR in src/app/parser.py.",
            "assistant",
        ),
    ]


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter("cl100k_base")


def compactor(model: FakeChatModel | None, counter: TokenCounter, **config: Any) -> Compactor:
    """On 2.x the model owns its formatter: none is passed."""
    return Compactor(
        CompactorConfig(**config),
        model=model,
        formatter=None,
        counter=counter,
        max_input_tokens=32_000,
    )


# -- Compactor ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_compactor_writes_the_model_summary(counter: TokenCounter, stream: bool) -> None:
    model = FakeChatModel([summary()], stream=stream)
    result = await compactor(model, counter).compact("", trajectory())

    assert result == CompactionResult(summary(), "model", None, 1)
    assert validate_summary(result.summary) is None
    [call] = model.calls
    assert "context compactor" in said(call, "system") and "## Critical Context" in said(
        call, "system"
    )
    user = said(call, "user")
    assert "(none: this is the first summary)" in user
    assert "def parse_header(line)" in user and "Don't edit the tests" in user
    # a prompt we sized ourselves: no runtime-state hint was added to it
    assert "<system-reminder>" not in json.dumps(call["formatted"])


async def test_compactor_sends_no_tools_tool_choice_or_response_format(
    counter: TokenCounter,
) -> None:
    # a stray tool call: the one-iteration agent then asks for a text answer (2.x: with
    # tool_choice="none", which the runner drops: it has no tools)
    model = FakeChatModel([tool_call("bash", cmd="ls"), summary()])
    result = await compactor(model, counter).compact("", trajectory())

    assert result.summary == summary() and result.source == "model"
    assert len(model.calls) == 2
    for call in model.calls:
        assert not call["tools"] and call["tool_choice"] is None
        assert set(call) == {"messages", "formatted", "tools", "tool_choice"}  # no extras


@pytest.mark.parametrize("script", [[summary()], [tool_call("bash", cmd="ls"), summary()]])
async def test_a_provider_rejecting_tools_and_structured_output_still_summarises(
    counter: TokenCounter, script: list[Any]
) -> None:
    # context_size 500: the prompt is over the agent's own compression trigger, so its
    # built-in compression (a structured-output call) would run if the runner let it
    model = StrictChatModel(script, context_size=500)
    result = await compactor(model, counter).compact("", trajectory())

    assert result == CompactionResult(summary(), "model", None, 1)
    assert not any(call.get("rejected") for call in model.calls)


async def test_the_strict_provider_does_reject_structured_output() -> None:
    class Schema(BaseModel):
        goal: str

    model = StrictChatModel(["{}"])
    with pytest.raises(ValueError, match="does not support tools"):
        await model.generate_structured_output([UserMsg(name="user", content="hi")], Schema)


@pytest.mark.parametrize(
    "model",
    [
        FakeChatModel(default=hang),
        FakeChatModel(default=hang, stream=True),
        StallingStream(default=summary(), stream=True),
    ],
    ids=["call", "stream-start", "mid-stream"],
)
async def test_a_hanging_model_times_out_to_the_extractive_summary(
    counter: TokenCounter, model: FakeChatModel
) -> None:
    task = compactor(model, counter, timeout_seconds=0.05).compact("", trajectory())
    # (the outer limit only turns a hang of the test into a failure)
    result = await asyncio.wait_for(task, 10)

    assert result.source == "extractive" and len(model.calls) == 1
    assert "timed out after 0.05 s" in (result.reason or "")
    assert validate_summary(result.summary) is None


async def test_cancelling_a_compaction_propagates(counter: TokenCounter) -> None:
    # AgentScope 2.x answers a cancelled model call with an empty response; the runner's agent
    # still ends with the cancellation, as on 1.x
    started = asyncio.Event()

    async def wait_forever(messages: list[Any]) -> str:
        started.set()
        return await hang(messages)

    model = FakeChatModel(default=wait_forever)
    task = asyncio.ensure_future(compactor(model, counter).compact("", trajectory()))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_no_model_is_extractive_without_a_formatter_too(counter: TokenCounter) -> None:
    result = await compactor(None, counter).compact("", trajectory())
    assert result.source == "extractive" and result.reason == "no model configured"


async def test_run_agent_with_its_defaults_returns_the_text() -> None:
    """No tools, one iteration: the Compactor's and consolidation's call."""
    model = FakeChatModel(["pong"])
    answer = await run_agent(model, None, name="probe", sys_prompt="Answer.", prompt="ping")
    assert answer == "pong"
    assert "ping" in said(model.calls[0], "user") and said(model.calls[0], "system") == "Answer."


# -- Summarizer --------------------------------------------------------------------------------


def summarizer(model: FakeChatModel, memory_dir: Path, **kwargs: Any) -> Summarizer:
    return Summarizer(model=model, formatter=None, memory_dir=memory_dir, **kwargs)


async def test_summarizer_writes_notes_with_its_tools(tmp_path: Path) -> None:
    memory_dir = tmp_path / "memory"
    model = FakeChatModel(
        [
            tool_call("read_memory_file", file_path="2026-03-14.md"),
            tool_call("write_memory_file", file_path="2026-03-14.md", content=NOTES),
            text("Recorded one preference and one lesson."),
        ]
    )
    answer = await summarizer(model, memory_dir).run(trajectory(), today=TODAY)

    assert answer == "Recorded one preference and one lesson."
    assert (memory_dir / "2026-03-14.md").read_text() == f"# 2026-03-14\n\n{NOTES}\n"
    # each tool's text reached the model as the call's result (no permission was asked)
    assert "2026-03-14.md does not exist yet" in sent_tool(model.calls[1])
    assert "Appended 2 line(s) to 2026-03-14.md." in sent_tool(model.calls[2])
    names = {tool["function"]["name"] for tool in model.calls[0]["tools"]}
    assert names == {"read_memory_file", "write_memory_file"}
    assert "write_memory_file" in said(model.calls[0], "system")


def sent_tool(call: dict[str, Any]) -> str:
    return "\n".join(
        str(message["content"]) for message in call["formatted"] if message["role"] == "tool"
    )


@pytest.mark.parametrize("path", ["../outside.md", "/tmp/agentscope_ctx_outside.md", ".lock"])
async def test_summarizer_cannot_write_outside_memory(tmp_path: Path, path: str) -> None:
    memory_dir = tmp_path / "memory"
    memory_dir.mkdir()
    model = FakeChatModel(
        [tool_call("write_memory_file", file_path=path, content="- pwned"), text("Done.")]
    )
    answer = await summarizer(model, memory_dir).run(trajectory(), today=TODAY)

    assert answer == "Done."
    assert sent_tool(model.calls[1]).startswith("Error: file_path")
    assert not (tmp_path / "outside.md").exists() and not (memory_dir / ".lock").exists()
    assert not Path("/tmp/agentscope_ctx_outside.md").exists()
    assert list(memory_dir.iterdir()) == []


async def test_notes_written_before_a_hang_are_kept(tmp_path: Path) -> None:
    model = FakeChatModel(
        [tool_call("write_memory_file", file_path="2026-03-14.md", content=NOTES)], default=hang
    )
    run = summarizer(model, tmp_path, timeout_seconds=0.2).run(trajectory(), today=TODAY)
    assert await asyncio.wait_for(run, 10) == ""
    assert NOTES in (tmp_path / "2026-03-14.md").read_text()


# -- the main agent's memory tools on 2.x --------------------------------------------------------


async def test_remember_and_log_today_as_function_tools(tmp_path: Path) -> None:
    memory = LongTermMemory(tmp_path)
    model = FakeChatModel(
        [
            tool_call("remember", fact="The user prefers pytest"),
            tool_call("log_today", note="Fixed the CR bug"),
            text("Noted."),
        ]
    )
    agent = Agent(
        name="main",
        system_prompt="You help.",
        model=model,
        toolkit=Toolkit(
            tools=[
                function_tool(memory.remember, read_only=False),
                function_tool(memory.log_today, read_only=False),
            ]
        ),
    )
    reply = await agent.reply(UserMsg(name="user", content="remember: I prefer pytest"))

    assert reply.get_text_content() == "Noted."
    assert "- The user prefers pytest" in memory.memory_path.read_text()
    assert "- Fixed the CR bug" in memory.daily_path().read_text()
    assert sent_tool(model.calls[1]) == f"Saved to {memory.memory_path}."
    schema = {tool["function"]["name"]: tool["function"] for tool in model.calls[0]["tools"]}
    assert schema["remember"]["description"].startswith("Save a durable fact")
    assert schema["remember"]["parameters"]["required"] == ["fact"]


# -- consolidation -------------------------------------------------------------------------------


def write_note(working_dir: Path, day: str, body: str) -> None:
    path = working_dir / "memory" / f"{day}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {day}\n\n{body}\n")


async def test_consolidation_merges_with_the_model(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "MEMORY.md").write_text("# Long-term memory\n- Fact: uses pip\n")
    write_note(tmp_path, "2026-03-13", "- Fact: switched from pip to uv")
    new_body = "# Long-term memory\n\n- Fact: uses uv (switched from pip on 2026-03-13)"
    model = StrictChatModel([f"```markdown\n{new_body}\n```"], context_size=500)

    report = await consolidate(tmp_path, model=model, now=NOW)

    assert report.source == "model" and report.changed and report.notes == ("2026-03-13",)
    [call] = model.calls
    assert "Merge the recent daily notes" in said(call, "system")
    assert "- Fact: uses pip" in said(call, "user") and "### 2026-03-13" in said(call, "user")
    assert (tmp_path / "memory" / "MEMORY.md").read_text() == (
        f"{new_body}\n\n## Change log\n- 2026-03-14: merged 1 notes from 2026-03-13 (model)\n"
    )


@pytest.mark.parametrize("script", [RuntimeError("down"), "I cannot help with that."])
async def test_consolidation_falls_back_to_extractive(tmp_path: Path, script: Any) -> None:
    write_note(tmp_path, "2026-03-13", "- Fact: uses uv")
    report = await consolidate(tmp_path, model=FakeChatModel([script]), now=NOW)
    assert report.source == "extractive" and report.reason
    assert "- Fact: uses uv" in (tmp_path / "memory" / "MEMORY.md").read_text()


async def test_consolidation_times_out_to_extractive(tmp_path: Path) -> None:
    write_note(tmp_path, "2026-03-13", "- Fact: uses uv")
    run = consolidate(tmp_path, model=FakeChatModel(default=hang), now=NOW, timeout_seconds=0.05)
    report = await asyncio.wait_for(run, 10)
    assert report.source == "extractive" and report.reason == "model timed out after 0.05 s"
