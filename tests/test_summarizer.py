"""The Summarizer agent and its confined memory-file tools."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncGenerator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.model import ChatResponse
from agentscope.tool import ToolResponse

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx._summarizer import SILENT, MemoryFiles, Summarizer
from tests.fakes import FakeChatModel, text, tool_call
from tests.test_compactor import prompt_of
from tests.test_extractive import trajectory

TODAY = date(2026, 3, 14)
NOTES = "- Preference: the user wants tests run with pytest -x\n- Lesson: parse_header failed on CR"


def reply_text(response: ToolResponse) -> str:
    return "".join(block["text"] for block in response.content if block["type"] == "text")


def script() -> list[object]:
    """Read today's notes, append two items, then report."""
    return [
        tool_call("read_memory_file", file_path="2026-03-14.md"),
        tool_call("write_memory_file", file_path="2026-03-14.md", content=NOTES),
        text("Recorded one preference and one lesson."),
    ]


async def test_writes_todays_notes_and_does_not_duplicate(tmp_path: Path) -> None:
    memory_dir = tmp_path / "memory"
    model = FakeChatModel(script())  # type: ignore[arg-type]
    summarizer = Summarizer(model=model, formatter=OpenAIChatFormatter(), memory_dir=memory_dir)

    answer = await summarizer.run(trajectory(), today=TODAY)

    assert answer == "Recorded one preference and one lesson."
    note = memory_dir / "2026-03-14.md"
    assert note.read_text(encoding="utf-8") == f"# 2026-03-14\n\n{NOTES}\n"
    system, user = prompt_of(model.calls[0], "system"), prompt_of(model.calls[0])
    assert "`2026-03-14.md`" in system and SILENT in system and "Lesson" in system
    assert "Today is 2026-03-14" in user and "E   ValueError: bad header" in user
    names = {schema["function"]["name"] for schema in model.calls[0]["tools"]}
    assert names == {"read_memory_file", "write_memory_file", "edit_memory_file"}

    # A second run over the same facts: the model reads the file (which holds them) and the
    # write tool refuses the duplicate lines anyway.
    model.enqueue(*script())  # type: ignore[arg-type]
    await summarizer.run(trajectory(), today=TODAY)
    assert note.read_text(encoding="utf-8") == f"# 2026-03-14\n\n{NOTES}\n"
    tool_results = prompt_of(model.calls[-1], "tool")
    assert "- Lesson: parse_header failed on CR" in tool_results  # it read the file first
    assert "Nothing appended: 2026-03-14.md already holds every line." in tool_results


async def test_silent_when_nothing_is_worth_keeping(tmp_path: Path) -> None:
    model = FakeChatModel([SILENT])
    summarizer = Summarizer(model=model, formatter=OpenAIChatFormatter(), memory_dir=tmp_path)
    assert await summarizer.run(trajectory()[:2]) == SILENT
    assert list(tmp_path.iterdir()) == []


async def test_errors_are_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = FakeChatModel([RuntimeError("model down")])
    summarizer = Summarizer(model=model, formatter=OpenAIChatFormatter(), memory_dir=tmp_path)
    with caplog.at_level(logging.ERROR, logger="agentscope_ctx"):
        assert await summarizer.run(trajectory()) == ""
    assert "Summarizer failed" in caplog.text


async def test_transcript_is_capped_to_the_newest_messages(tmp_path: Path) -> None:
    model = FakeChatModel([SILENT])
    summarizer = Summarizer(
        model=model,
        formatter=OpenAIChatFormatter(),
        memory_dir=tmp_path,
        max_transcript_chars=600,
    )
    await summarizer.run(trajectory())
    user = prompt_of(model.calls[0])
    assert "[... older messages left out]" in user
    assert "rerun pytest" in user  # the newest message is there
    assert "please fix it" not in user


def test_write_appends_and_skips_duplicates(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    assert reply_text(files.write_memory_file("n.md", "- a\n- b")) == "Appended 2 line(s) to n.md."
    reply = reply_text(files.write_memory_file("n.md", "- b\n-  A\n- c"))
    assert reply == "Appended 1 line(s) to n.md; skipped 2 line(s) it already held."
    assert (tmp_path / "n.md").read_text() == "# n\n\n- a\n- b\n- c\n"
    assert reply_text(files.write_memory_file("n.md", "- x", mode="overwrite")) == "Wrote n.md."
    assert (tmp_path / "n.md").read_text() == "- x\n"
    assert "unknown" in reply_text(files.write_memory_file("n.md", "- y", mode="truncate"))


def test_read_and_edit(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    assert "does not exist yet" in reply_text(files.read_memory_file("n.md"))
    files.write_memory_file("n.md", "- Fact: uses vim\n- Fact: likes tea")
    assert reply_text(files.edit_memory_file("n.md", "uses vim", "uses emacs")) == "Edited n.md."
    assert "- Fact: uses emacs" in reply_text(files.read_memory_file("n.md"))
    assert "is not in" in reply_text(files.edit_memory_file("n.md", "uses vim", "x"))
    files.write_memory_file("n.md", "- Fact: likes tea too")
    assert "occurs 2 times" in reply_text(files.edit_memory_file("n.md", "likes tea", "x"))


@pytest.mark.parametrize(
    "path",
    ["../outside.md", "sub/../../outside.md", "/etc/passwd", "", ".consolidate.lock", "."],
)
def test_paths_outside_memory_dir_are_refused(tmp_path: Path, path: str) -> None:
    memory_dir = tmp_path / "memory"
    memory_dir.mkdir()
    files = MemoryFiles(memory_dir)
    for response in (
        files.read_memory_file(path),
        files.write_memory_file(path, "- pwned"),
        files.edit_memory_file(path, "a", "b"),
    ):
        assert reply_text(response).startswith("Error: file_path")
    assert not (tmp_path / "outside.md").exists()


def test_symlinks_are_refused(tmp_path: Path) -> None:
    memory_dir, outside = tmp_path / "memory", tmp_path / "secret"
    memory_dir.mkdir()
    outside.mkdir()
    (outside / "s.md").write_text("secret")
    os.symlink(outside / "s.md", memory_dir / "link.md")
    os.symlink(outside, memory_dir / "dir")
    files = MemoryFiles(memory_dir)
    assert "symlink" in reply_text(files.read_memory_file("link.md"))
    assert "symlink" in reply_text(files.write_memory_file("dir/s.md", "- pwned"))
    assert (outside / "s.md").read_text() == "secret"


def test_absolute_path_inside_is_accepted(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path)
    reply = reply_text(files.write_memory_file(str(tmp_path / "n.md"), "- a"))
    assert reply.startswith("Appended 1 line(s)")
    assert (tmp_path / "n.md").exists()


# -- time limits (issue 11, item 12) ---------------------------------------------------------


async def hang(messages: list[dict[str, Any]]) -> str:
    """A provider that never answers."""
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


class StallingStream(FakeChatModel):
    """Streams the first chunk of its answer, then nothing ever again."""

    @staticmethod
    async def _stream(response: ChatResponse) -> AsyncGenerator[ChatResponse, None]:
        yield response
        await asyncio.Event().wait()


@pytest.mark.parametrize(
    "model",
    [
        FakeChatModel(default=hang),
        FakeChatModel(default=hang, stream=True),
        StallingStream(default=tool_call("read_memory_file", file_path="x.md"), stream=True),
    ],
    ids=["call", "stream-start", "mid-stream"],
)
async def test_i11_12_a_hanging_model_call_ends_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, model: FakeChatModel
) -> None:
    summarizer = Summarizer(
        model=model, formatter=OpenAIChatFormatter(), memory_dir=tmp_path, timeout_seconds=0.05
    )
    with caplog.at_level(logging.WARNING, logger="agentscope_ctx"):
        # (the outer limit only turns a hang of the test into a failure)
        answer = await asyncio.wait_for(summarizer.run(trajectory(), today=TODAY), 10)
    assert answer == ""
    assert "a model call took over 0.05 s" in caplog.text
    assert len(model.calls) == 1


async def test_i11_12_close_returns_while_a_summarizer_waits_on_a_hanging_model(
    tmp_path: Path,
) -> None:
    agent = ReActAgent(
        name="a", sys_prompt="s", model=FakeChatModel(), formatter=OpenAIChatFormatter()
    )
    agent.set_console_output_enabled(False)
    config = ContextConfig(
        working_dir=tmp_path, max_input_tokens=1_000, compactor={"enabled": False}
    )
    model = FakeChatModel(default=hang)  # the Compactor's and Summarizer's model
    manager = ContextManager(config, model=model, formatter=OpenAIChatFormatter())
    memory = manager.attach(agent)
    await memory.add(trajectory())
    report = await manager.compact(agent)
    assert report.compacted  # and the Summarizer started in the background:
    (task,) = manager._background
    for _ in range(100):
        if model.calls:
            break
        await asyncio.sleep(0.01)
    assert model.calls  # it is waiting on the model (its own limit is 120 s)

    await asyncio.wait_for(manager.close(grace_seconds=0.05), 10)

    assert task.cancelled() and not manager._background
