"""The Summarizer agent and its confined memory-file tools."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(reason_1x("the Summarizer runs as a 1.x ReActAgent"), allow_module_level=True)

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg
from agentscope.tool import ToolResponse
from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_ctx import ConfigError, ContextConfig, ContextManager, TokenCounter
from agentscope_ctx.core.truncation._truncation import excerpt_with_notice
from agentscope_ctx.memory._summarizer import SILENT, MemoryFiles, Summarizer
from agentscope_ctx.memory._summarizer_input import bounded_transcript
from agentscope_ctx.memory._summarizer_queue import SummarizerQueue
from tests.core.test_extractive import call, result, trajectory
from tests.support.agent_line import said
from tests.support.fakes import FakeChatModel, hang, text, tool_call

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
    system, user = said(model.calls[0], "system"), said(model.calls[0], "user")
    assert "`2026-03-14.md`" in system and SILENT in system and "Lesson" in system
    assert "Today is 2026-03-14" in user and "E   ValueError: bad header" in user
    names = {schema["function"]["name"] for schema in model.calls[0]["tools"]}
    assert names == {"read_memory_file", "write_memory_file"}

    # A second run over the same facts: the model reads the file (which holds them) and the
    # write tool refuses the duplicate lines anyway.
    model.enqueue(*script())  # type: ignore[arg-type]
    await summarizer.run(trajectory(), today=TODAY)
    assert note.read_text(encoding="utf-8") == f"# 2026-03-14\n\n{NOTES}\n"
    tool_results = said(model.calls[-1], "tool")
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
        max_input_tokens=80,
    )
    await summarizer.run(trajectory())
    user = said(model.calls[0], "user")
    assert "older message(s) left out]" in user
    assert "rerun pytest" in user  # the newest message is there
    assert "please fix it" not in user


def test_write_appends_and_skips_duplicates(tmp_path: Path) -> None:
    files = MemoryFiles(tmp_path, TODAY)
    n = "2026-03-14.md"
    assert reply_text(files.write_memory_file(n, "- a\n- b")) == f"Appended 2 line(s) to {n}."
    reply = reply_text(files.write_memory_file(n, "- b\n-  A\n- c"))
    assert reply == f"Appended 1 line(s) to {n}; skipped 2 line(s) it already held."
    assert (tmp_path / n).read_text() == "# 2026-03-14\n\n- a\n- b\n- c\n"


def test_read_any_memory_file_write_only_todays_notes(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# Long-term memory\n- Fact: uses vim\n")
    (tmp_path / "2026-03-13.md").write_text("# 2026-03-13\n\n- Lesson: old\n")
    files = MemoryFiles(tmp_path, TODAY)
    assert "does not exist yet" in reply_text(files.read_memory_file("2026-03-14.md"))
    assert "- Fact: uses vim" in reply_text(files.read_memory_file("MEMORY.md"))
    for name in ("MEMORY.md", "2026-03-13.md", "n.md", str(tmp_path / "MEMORY.md")):
        reply = reply_text(files.write_memory_file(name, "- Fact: uses emacs"))
        assert reply.startswith("Error: file_path") and "'2026-03-14.md'" in reply
    assert (tmp_path / "MEMORY.md").read_text() == "# Long-term memory\n- Fact: uses vim\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2026-03-13.md", "MEMORY.md"]


@pytest.mark.parametrize(
    "path",
    ["../outside.md", "sub/../../outside.md", "/etc/passwd", "", ".consolidate.lock", "."],
)
def test_paths_outside_memory_dir_are_refused(tmp_path: Path, path: str) -> None:
    memory_dir = tmp_path / "memory"
    memory_dir.mkdir()
    files = MemoryFiles(memory_dir)
    for response in (files.read_memory_file(path), files.write_memory_file(path, "- pwned")):
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
    files = MemoryFiles(tmp_path, TODAY)
    reply = reply_text(files.write_memory_file(str(tmp_path / "2026-03-14.md"), "- a"))
    assert reply.startswith("Appended 1 line(s)")
    assert (tmp_path / "2026-03-14.md").exists()


# -- time limits (issue 11, item 12) ---------------------------------------------------------


async def test_i11_12_close_returns_while_a_summarizer_waits_on_a_hanging_model(
    tmp_path: Path,
) -> None:
    agent = ReActAgent(
        name="a", sys_prompt="s", model=FakeChatModel(), formatter=OpenAIChatFormatter()
    )
    agent.set_console_output_enabled(False)
    config = ContextConfig(
        working_dir=tmp_path,
        max_input_tokens=2_000,  # room for the tools and the summary
        compactor={"enabled": False},
        summarizer={"min_batch_tokens": 0},  # a run at every compaction
    )
    model = FakeChatModel(default=hang)  # the Compactor's and Summarizer's model
    manager = ContextManager(config, model=model, formatter=OpenAIChatFormatter())
    memory = manager.attach(agent)
    await memory.add([m for _ in range(4) for m in trajectory()])  # worth a summary
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


# -- the Summarizer pays its way (issue 12, item 4) ------------------------------------------

COUNTER = TokenCounter()
TAG = re.compile(r"\[m\d+[ab]\]")


def tool_log(tag: str, lines: int = 3_000) -> str:
    """A long tool output with one error line in its middle."""
    body = [f"{tag} log line {i}: " + "x" * 60 for i in range(lines)]
    body[lines // 2] = f"E   RuntimeError: {tag} broke"
    return "\n".join(body)


def busy_session(rounds: int) -> list[Msg]:
    """Each round: a user preference, a call with a huge argument, a huge log, an answer."""
    msgs: list[Msg] = []
    for k in range(rounds):
        msgs += [
            Msg("user", f"[u{k}] I prefer tabs. " + "detail " * 50, "user"),
            call(f"c{k}", "write_file", path=f"f{k}.py", content="y" * 20_000),
            result(f"c{k}", "write_file", tool_log(f"t{k}")),
            Msg("Friday", f"[a{k}] Done round {k}.", "assistant"),
        ]
    return msgs


async def test_i12_04_transcript_has_bounded_tool_bodies_and_fits_the_cap(
    tmp_path: Path,
) -> None:
    model = FakeChatModel([SILENT])
    summarizer = Summarizer(model=model, formatter=OpenAIChatFormatter(), memory_dir=tmp_path)
    await summarizer.run(busy_session(6), today=TODAY)

    user = said(model.calls[0], "user")
    assert await COUNTER.count_text(user) <= 8_000  # the default cap
    for k in range(6):
        assert f"[u{k}] I prefer tabs." in user and f"[a{k}] Done round {k}." in user
        # a tool output: its first and last lines and the error between, not the log
        assert f"t{k} log line 0:" in user and f"t{k} log line 2999:" in user
        assert f"E   RuntimeError: t{k} broke" in user
        assert f"t{k} log line 1000:" not in user
        assert f'"path": "f{k}.py"' in user
    assert "y" * 201 not in user  # arguments shortened


async def test_i12_04_a_cut_output_is_shown_without_its_notice(tmp_path: Path) -> None:
    excerpt = excerpt_with_notice(tool_log("t0"), max_bytes=4_096, file_path="/w/t.txt")
    transcript = await bounded_transcript([result("c0", "run", excerpt)], COUNTER, 8_000)
    assert "cut: the full output is saved" in transcript and "t0 log line 0:" in transcript
    assert "<<<TRUNCATED>>>" not in transcript and "read_file" not in transcript


async def test_i12_04_a_newest_message_over_the_cap_alone_is_clipped_to_fit() -> None:
    msgs = [Msg("user", "a" * 5_000, "user"), Msg("user", "m1: " + "漢" * 8_000, "user")]
    transcript = await bounded_transcript(msgs, COUNTER, 300)
    assert transcript.startswith("[... 1 older message(s) left out]\n\n[user user]\nm1: 漢漢")
    assert 250 <= await COUNTER.count_text(transcript) <= 300


@settings(max_examples=20, deadline=None)
@given(
    shapes=st.lists(
        st.tuples(st.integers(0, 500), st.integers(0, 4_000), st.sampled_from("x漢🙂 ")),
        max_size=15,
    ),
    cap=st.integers(1_000, 3_000),
)
def test_i12_04_transcript_fits_any_cap_and_keeps_the_newest(
    shapes: list[tuple[int, int, str]], cap: int
) -> None:
    msgs: list[Msg] = []
    for i, (lines, chars, char) in enumerate(shapes):
        msgs.append(Msg("user", f"m{i}: " + char * chars, "user"))
        msgs.append(result(f"c{i}", "run", "\n".join(char * (i % 300) for i in range(lines))))
    transcript = asyncio.run(bounded_transcript(msgs, COUNTER, cap))
    assert asyncio.run(COUNTER.count_text(transcript)) <= cap
    if msgs:
        assert "<- result of run" in transcript  # the newest message is shown
    for i in range(len(shapes)):  # whatever is shown of a text is its start (and its end)
        assert transcript.count(f"m{i}: ") <= 1


async def test_i12_04_read_memory_file_shows_the_end_of_a_long_file(tmp_path: Path) -> None:
    lines = [f"- Lesson {i}: " + "z" * 40 for i in range(2_000)]
    (tmp_path / "n.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    shown = reply_text(MemoryFiles(tmp_path).read_memory_file("n.md"))
    assert len(shown) <= 8_100
    first, rest = shown.split("\n", 1)
    assert re.fullmatch(r"\[\.\.\. the first \d+ of \d+ characters left out\]", first)
    assert rest.startswith("- Lesson ") and rest.endswith(lines[-1] + "\n")  # whole lines


def test_i12_04_min_batch_tokens_is_checked_against_the_cap() -> None:
    with pytest.raises(ConfigError, match="min_batch_tokens"):
        ContextConfig(summarizer={"max_input_tokens": 1_000, "min_batch_tokens": 1_001})


def words(tag: str, n: int = 200) -> str:
    """About 2n tokens of text starting with `tag`."""
    return tag + " " + " ".join(f"word{i}" for i in range(n))


def attached(
    tmp_path: Path, model: FakeChatModel, **summarizer: int
) -> tuple[ReActAgent, ContextManager]:
    """An agent whose manager compacts with no model: `model` serves the Summarizer alone."""
    agent = ReActAgent(
        name="a", sys_prompt="s", model=FakeChatModel(), formatter=OpenAIChatFormatter()
    )
    agent.set_console_output_enabled(False)
    config = ContextConfig(
        working_dir=tmp_path,
        # room for the tools (about 700 tokens) and the summary of a long user message
        max_input_tokens=2_000,
        keep_recent_ratio=0.125,
        summary_max_share=1,  # (the small-window policy off: these batches as they were)
        compact_headroom=0,
        compactor={"enabled": False, "carry_max_chars": 400},
        summarizer=summarizer,
    )
    manager = ContextManager(config, model=model, formatter=OpenAIChatFormatter())
    manager.attach(agent)
    return agent, manager


async def compact_round(agent: ReActAgent, manager: ContextManager, k: int) -> None:
    """A long user message (over the kept part: it is evicted) and a short answer, then the
    user's next short turn (the current user turn stays in the prompt)."""
    memory = manager.memory_of(agent)
    long = words(f"[m{k}a]")  # longer than what a summary carries of the user's words
    await memory.add([Msg("user", long, "user"), Msg("a", f"[m{k}b]", "assistant")])
    await memory.add(Msg("user", "go on", "user"))
    assert (await manager.compact(agent)).compacted


def run_tags(model: FakeChatModel) -> list[list[str]]:
    """The message tags each Summarizer run was shown (one model call per run here)."""
    prompts = [said(c, "user") for c in model.calls]
    assert all(p.startswith("Today is ") for p in prompts)
    return [TAG.findall(p) for p in prompts]


def evicted_tags(manager: ContextManager) -> list[str]:
    stored, _ = manager.dialog.read()
    return [tag for msg in stored for tag in TAG.findall(msg.get_text_content() or "")]


async def settle(manager: ContextManager) -> None:
    """Let the background runs started so far finish."""
    for _ in range(5):
        await asyncio.sleep(0)
    while manager._background:
        await asyncio.gather(*manager._background)


async def test_i12_04_three_small_compactions_make_one_run(tmp_path: Path) -> None:
    model = FakeChatModel()
    agent, manager = attached(tmp_path, model, min_batch_tokens=1_000)
    for k in range(2):
        await compact_round(agent, manager, k)
        await settle(manager)
        assert model.calls == []  # about 400 and 800 tokens of conversation: not yet
    await compact_round(agent, manager, 2)
    await settle(manager)

    (tags,) = run_tags(model)
    assert tags == evicted_tags(manager) == ["[m0a]", "[m0b]", "[m1a]", "[m1b]", "[m2a]"]
    assert await COUNTER.count_text(said(model.calls[0], "user")) <= 8_000
    await manager.close()
    assert len(model.calls) == 1  # nothing was pending


async def test_i12_04_close_flushes_the_pending_batch(tmp_path: Path) -> None:
    model = FakeChatModel()
    agent, manager = attached(tmp_path, model, min_batch_tokens=1_000, max_input_tokens=1_000)
    await compact_round(agent, manager, 0)
    await settle(manager)
    assert model.calls == []

    await manager.close()

    assert run_tags(model) == [["[m0a]"]]
    assert await COUNTER.count_text(said(model.calls[0], "user")) <= 1_000
    await manager.close()  # nothing more to flush
    assert len(model.calls) == 1


class Gated:
    """A model answer that waits at `gate`, counting how many calls wait at once (`peak`)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.active = self.peak = 0

    async def answer(self, messages: list[dict[str, Any]]) -> str:
        self.active += 1
        self.peak = max(self.peak, self.active)
        await self.gate.wait()
        self.active -= 1
        return "Done."


async def test_i12_04_one_run_at_a_time_and_no_evicted_message_lost(tmp_path: Path) -> None:
    gated = Gated()
    gate, model = gated.gate, FakeChatModel(default=gated.answer)
    agent, manager = attached(tmp_path, model, min_batch_tokens=0)
    await compact_round(agent, manager, 0)  # starts a run, which waits at the gate
    await asyncio.sleep(0)
    for k in range(1, 4):  # while it waits: three more compactions
        await compact_round(agent, manager, k)
        await asyncio.sleep(0)
    assert len(model.calls) == 1
    gate.set()
    await settle(manager)  # the run in progress took the next batch after it
    await compact_round(agent, manager, 4)
    await manager.close()

    assert gated.peak == 1
    runs = run_tags(model)
    assert runs == [
        ["[m0a]"],
        ["[m0b]", "[m1a]", "[m1b]", "[m2a]", "[m2b]", "[m3a]"],
        ["[m3b]", "[m4a]"],
    ]
    assert [tag for tags in runs for tag in tags] == evicted_tags(manager)


async def test_i12_04_a_batch_of_tool_output_alone_runs_when_full(tmp_path: Path) -> None:
    model = FakeChatModel()
    summarizer = Summarizer(model=model, formatter=OpenAIChatFormatter(), memory_dir=tmp_path)
    tasks: list[asyncio.Task[None]] = []
    queue = SummarizerQueue(
        summarizer.run, COUNTER, min_batch_tokens=1_000, max_batch_tokens=200, on_start=tasks.append
    )
    k = 0
    while not tasks:  # compactions evicting nothing but tool calls and their output
        await queue.add([call(f"c{k}", "run", cmd="make"), result(f"c{k}", "run", tool_log("t"))])
        k += 1
        assert k < 20
    await asyncio.gather(*tasks)
    (user,) = [said(c, "user") for c in model.calls]
    assert user.count("-> call run") == k and user.count("lines shown to the agent") == k
    assert not queue.pending and await COUNTER.count_text(user) <= 8_000


@settings(max_examples=20, deadline=None)
@given(
    steps=st.lists(
        st.one_of(st.integers(0, 400), st.sampled_from(["release", "flush"])), max_size=12
    ),
    min_batch=st.integers(0, 800),
    max_batch=st.integers(100, 2_000),
)
def test_i12_04_each_evicted_message_reaches_exactly_one_run(
    steps: list[int | str], min_batch: int, max_batch: int
) -> None:
    """Batches of any size, runs finishing at any time, flushes: every message added goes to
    exactly one run, in order, and runs never overlap."""

    async def scenario(memory_dir: Path) -> None:
        gated = Gated()
        gate, model = gated.gate, FakeChatModel(default=gated.answer)
        summarizer = Summarizer(model=model, formatter=OpenAIChatFormatter(), memory_dir=memory_dir)
        tasks: list[asyncio.Task[None]] = []
        queue = SummarizerQueue(
            summarizer.run,
            COUNTER,
            min_batch_tokens=min_batch,
            max_batch_tokens=max_batch,
            on_start=tasks.append,
        )
        added: list[str] = []
        for i, step in enumerate(steps):
            if step == "release":
                gate.set()
                await asyncio.gather(*tasks)
                gate.clear()
            elif step == "flush":
                queue.flush()
            else:
                tag = f"[m{i}a]"
                added.append(tag)
                await queue.add([Msg("user", words(tag, int(step)), "user")])
            await asyncio.sleep(0)
            assert len(tasks) - sum(t.done() for t in tasks) <= 1
        gate.set()
        queue.flush()
        await asyncio.gather(*tasks)
        assert gated.peak <= 1 and not queue.pending and not queue.busy
        assert [tag for tags in run_tags(model) for tag in tags] == added

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp)))
