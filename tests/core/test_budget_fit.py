"""Issue 19, item 6: the last-resort fit holds the budget whatever the byte limits and the
summary's size: it masks tool outputs (not only cuts them to `old_max_bytes`) and trims the
summary message, losslessly (line-neutral core: runs on both lines)."""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx import PromptTooLargeError
from agentscope_ctx.core._pipeline import ContextPipeline
from agentscope_ctx.core.compaction._prefix import Prefix
from agentscope_ctx.core.context._memory import ContextMemory
from agentscope_ctx.core.context._turns import turn_ids, waiting
from agentscope_ctx.core.truncation._truncation import (
    excerpt_with_notice,
    notice_paths,
    parse_notice,
)
from tests.core.test_pipeline import Agent, RecordingCompactor, pipeline, run
from tests.core.test_small_window import PROMPT_PARTS
from tests.support.lines import Msg, TextBlock, ToolResultBlock, ToolUseBlock


def parallel_unit(n: int, size: int) -> list[Msg]:
    """One reasoning step that called `n` tools at once, and their results: one unit, which
    compaction cannot split."""
    uses = [
        ToolUseBlock(type="tool_use", id=f"p{k}", name="shell", input={"cmd": f"cat {k}"})
        for k in range(n)
    ]
    msgs = [Msg("bot", uses, "assistant")]
    for k in range(n):
        out = "".join(f"row {k}-{i}: some output of the command\n" for i in range(size))
        block = ToolResultBlock(
            type="tool_result", id=f"p{k}", name="shell", output=[TextBlock(type="text", text=out)]
        )
        msgs.append(Msg("system", [block], "system"))
    return msgs


NOTE = "remember: " + "the user likes short answers. " * 200
"""A long MEMORY.md note, shown beside the summary."""


async def fit_summary(
    pipe: ContextPipeline,
    memory: ContextMemory,
    agent: Agent,
    summary: str,
    budget: int,
    note: bool = False,
) -> None:
    """Run the pipeline once on `summary`, `NOTE` if `note`, and the user's "go on": the prompt
    fits `budget`, estimated and calibrated."""
    await memory.update_compressed_summary(summary)
    if note:
        memory.offer_long_term(NOTE)
    await memory.add(Msg("user", "go on", "user"))
    report = await run(pipe, agent)
    assert report.tokens_after <= budget
    assert await pipe.accountant.calibrated() <= budget


async def test_fit_masks_outputs_when_their_old_limits_do_not_fit(tmp_path: Path) -> None:
    """12 outputs at their old limit (1,100 bytes, ~300 tokens each) are over a 2,400 budget;
    the fit stopped there before: now it masks them, oldest first, and the budget holds.

    (A masked output is its notice, which names its file: some 110 tokens here, more under a
    long `tmp_path`. At a 2,000 budget, under xdist's longer paths, twelve notices did not
    always fit, and the unit was compacted instead: right, but not what this test is about.
    The working dir here is 100 characters longer than `tmp_path`: at 2,000 it always was.)"""
    working_dir = tmp_path / ("a-long-working-dir-" * 5)[:100]
    working_dir.mkdir()
    pipe, memory, compactor = pipeline(
        working_dir, max_input_tokens=2_400, tool_result={"recent_n": 12, "old_max_bytes": 1_100}
    )
    agent = Agent()
    msgs = parallel_unit(12, 200)
    await memory.add(Msg("user", "read the twelve files", "user"))
    await memory.add(msgs)
    report = await run(pipe, agent)
    assert report.tokens_after <= 2_400 and report.compacted == 0
    assert await pipe.accountant.calibrated() <= 2_400
    # every output is still readable through its notice
    for msg in memory.messages()[-12:]:
        (block,) = msg.get_content_blocks("tool_result")
        text = block["output"][0]["text"]  # type: ignore[index]
        excerpt, notice = parse_notice(text)  # type: ignore[misc]
        assert Path(notice.file_path).read_text().startswith(excerpt.rstrip("\n")[:20])
    # the unit stayed whole in memory (compaction can only take what is before it)
    assert [m.id for m in memory.messages()][-13:] == [m.id for m in msgs]


async def test_fit_trims_the_summary_losslessly(tmp_path: Path) -> None:
    """A summary of ~6,000 tokens and a long MEMORY.md note, at a 2,000 budget: the model is
    shown the guide, a pointer to MEMORY.md and the head of the summary with a notice; the
    whole summary is saved to tool_result/ and stays whole in memory (the next compaction
    gets it all)."""
    pipe, memory, _ = pipeline(tmp_path, max_input_tokens=2_000)
    agent = Agent()
    summary = "## Goal\n" + "".join(f"- fact number {i} about the task\n" for i in range(900))
    await fit_summary(pipe, memory, agent, summary, 2_000, note=True)
    assert memory.compact_summary == summary  # stored whole
    shown = memory.summary_message()
    assert shown is not None
    text = str(shown.content)
    assert "the user likes short answers" not in text
    assert str(tmp_path / "memory" / "MEMORY.md") in text
    trimmed = memory.trimmed_summary()
    assert trimmed is not None and trimmed in text
    (path,) = notice_paths(trimmed)
    assert Path(path).read_text() == summary
    # a new summary is shown whole again (until it too is over)
    await memory.update_compressed_summary("## Goal\n- short now\n")
    assert "- short now" in str(memory.summary_message().content)  # type: ignore[union-attr]


def test_trim_holds_only_for_the_summary_it_was_made_for(tmp_path: Path) -> None:
    memory = ContextMemory(tmp_path)
    memory._compressed_summary = "## Goal\n- a\n"
    memory.offer_long_term("note")
    memory.trim_summary("## Goal\n[cut]", note=False)
    assert "[cut]" in str(memory.summary_message().content)  # type: ignore[union-attr]
    memory.offer_long_term("another note")
    text = str(memory.summary_message().content)  # type: ignore[union-attr]
    assert "[cut]" not in text and "another note" in text


async def test_fit_trims_a_summary_with_a_lone_surrogate(tmp_path: Path) -> None:
    """Found by test_fuzz_agent: a summary made from a message holding a lone surrogate; the
    fit measured it as UTF-8 and failed. It is trimmed like any other (the saved file holds
    it with the surrogate replaced, as tool output is)."""
    pipe, memory, _ = pipeline(tmp_path, max_input_tokens=1_000)
    agent = Agent()
    summary = "## Goal\n- \ud800 odd\n" + "".join(
        f"- fact {i} about the task\n" for i in range(400)
    )
    await fit_summary(pipe, memory, agent, summary, 1_000)
    trimmed = memory.trimmed_summary()
    assert trimmed is not None
    (path,) = notice_paths(trimmed)
    assert Path(path).read_text().endswith(summary[-200:])
    assert memory.compact_summary == summary


# -- at the least (issue 19 item 6, found by test_budget_small's property) ------------------

SUMMARY = "## Goal\n" + "".join(f"- fact number {i} about the task\n" for i in range(900))


async def sized_prompt(pipe: ContextPipeline, room: int) -> str:
    """A system prompt that leaves `room` tokens (raw estimate, before the margin) of the
    budget to the rest of the prompt."""
    budget = int(pipe.calibration.budget / pipe.scale)
    words = "Follow the house rules. "
    text = words * (budget // 5)
    while await pipe.counter.count_text(text) + 4 > budget - room:
        text = text[: -len(words)]
    return text


async def test_fit_shows_the_summary_as_a_notice_alone_at_its_least(tmp_path: Path) -> None:
    """At a 1,000-token budget with a long system prompt, the summary cut to its notice still
    came with the guide to dialog/ and the pointer to MEMORY.md (~130 tokens more): the
    prompt did not fit, and `PromptTooLargeError` was raised though the system prompt and the
    user's turn fit. Now the whole summary message is saved and shown as a notice alone."""
    pipe, memory, _ = pipeline(tmp_path, max_input_tokens=1_000)
    agent = Agent()
    # room for the notice alone (its path is as long as the test's tmp_path makes it) and
    # the user's turn, not for the guide and the pointer too (~130 tokens)
    path = str(tmp_path / "tool_result" / f"{uuid.uuid4().hex}.txt")
    notice = excerpt_with_notice(SUMMARY, max_bytes=4, file_path=path)
    bare = Msg("compact_summary", f"<compact_summary>\n{notice}\n</compact_summary>", "user")
    agent.sys_prompt = await sized_prompt(pipe, await pipe.counter.count_msg(bare) + 30)
    await fit_summary(pipe, memory, agent, SUMMARY, 1_000, note=True)
    shown = str(memory.summary_message().content)  # type: ignore[union-attr]
    (path,) = notice_paths(memory.trimmed_summary())
    saved = Path(path).read_text()
    # lossless: the saved text is the whole message, note, guide and summary
    assert "the user likes short answers" in saved and "dialog" in saved
    assert saved.endswith(SUMMARY + "\n</compact_summary>")
    assert "dialog" not in shown.replace(path, "")  # the guide is in the file only
    assert memory.compact_summary == SUMMARY  # stored whole


async def test_the_summary_leaves_the_view_when_only_that_makes_the_prompt_fit(
    tmp_path: Path,
) -> None:
    """The system prompt and the user's turn fit, with the summary's notice they do not:
    the summary message leaves the view (stored whole; a new summary is shown again) instead
    of a `PromptTooLargeError`."""
    pipe, memory, _ = pipeline(tmp_path, max_input_tokens=1_000)
    agent = Agent()
    agent.sys_prompt = await sized_prompt(pipe, 40)
    await fit_summary(pipe, memory, agent, SUMMARY, 1_000)
    assert memory.summary_message() is None
    assert memory.compact_summary == SUMMARY
    await memory.update_compressed_summary("## Goal\n- short now\n")
    assert "- short now" in str(memory.summary_message().content)  # type: ignore[union-attr]


async def test_newest_tool_calls_over_the_budget_at_their_least_are_compacted(
    tmp_path: Path,
) -> None:
    """Nine outputs of one step, masked to their notices (~120 tokens each), are over a
    1,000-token budget on their own: the prompt went to the model over the budget. Now all
    but the current user turn is compacted (saved to dialog/ first), the newest step too."""
    pipe, memory, compactor = pipeline(
        tmp_path, max_input_tokens=1_000, tool_result={"recent_n": 9, "old_max_bytes": 1_100}
    )
    agent = Agent()
    ask = Msg("user", "read the nine files", "user")
    msgs = parallel_unit(9, 200)
    await memory.add(ask)
    await memory.add(msgs)
    report = await run(pipe, agent)
    assert report.tokens_after <= 1_000
    assert await pipe.accountant.calibrated() <= 1_000
    assert report.compacted == len(msgs)
    assert [m.id for m in memory.messages()] == [ask.id]  # the current turn stays
    stored, _ = pipe.dialog.read()
    assert [m.id for m in stored] == [ask.id] + [m.id for m in msgs]  # nothing lost
    assert len(compactor.calls) == 1


async def test_prompt_too_large_only_when_what_never_leaves_is_over(tmp_path: Path) -> None:
    """A system prompt and a user turn over the budget alone: `PromptTooLargeError`, its
    parts named, the summary and the other messages at their least."""
    pipe, memory, _ = pipeline(tmp_path, max_input_tokens=1_000)
    agent = Agent()
    agent.sys_prompt = await sized_prompt(pipe, 10)
    await memory.update_compressed_summary(SUMMARY)
    await memory.add(Msg("user", "please look at every file in the project and report", "user"))
    await memory.add(parallel_unit(2, 200))
    with pytest.raises(PromptTooLargeError) as caught:
        await run(pipe, agent)
    error = caught.value
    assert set(error.parts) == PROMPT_PARTS
    never_leave = error.parts["system prompt"] + error.parts["current user turn"]
    assert math.ceil(never_leave * error.scale) > error.budget == 1_000


async def test_a_call_waiting_for_its_result_stays_with_the_current_turn(tmp_path: Path) -> None:
    """The compact-everything step took a tool call still waiting for its result (a call
    running, or awaiting the user's confirmation or an external result): the result then came
    without its call, a prompt the providers reject (found by AgentScope's
    `test_context_compression_keeps_reserved_read_cache`). Now the waiting call stays in
    place with the current user turn; the answered step before it is compacted."""
    pipe, memory, compactor = pipeline(tmp_path, max_input_tokens=1_000)
    agent = Agent()
    ask = Msg("user", "read the two files, then the third", "user")
    step = parallel_unit(2, 8)
    use = ToolUseBlock(type="tool_use", id="w1", name="shell", input={"cmd": "cat 3"})
    pending = Msg("bot", [use], "assistant")
    room = sum([await pipe.counter.count_msg(m) for m in (ask, pending)]) + 20
    agent.sys_prompt = await sized_prompt(pipe, room)
    await memory.add(ask)
    await memory.add(step)
    await memory.add(pending)
    report = await run(pipe, agent)
    assert report.tokens_after <= 1_000
    assert report.compacted == len(step)
    assert [m.id for m in memory.messages()] == [ask.id, pending.id]
    result = ToolResultBlock(
        type="tool_result", id="w1", name="shell", output=[TextBlock(type="text", text="3")]
    )
    await memory.add(Msg("system", [result], "system"))
    kept = [b.get("id") for m in memory.messages() for b in m.get_content_blocks()]
    assert kept.count("w1") == 2  # the call and its result, together


def test_turn_ids_waits_only_for_calls_after_the_turn_without_a_result() -> None:
    """An unanswered call before the user's turn (an interrupted reply) is not waited for;
    a call answered in its own message (AgentScope 2.x keeps both in one) is not either."""
    old = Msg("bot", [ToolUseBlock(type="tool_use", id="o", name="x", input={})], "assistant")
    ask = Msg("user", "go", "user")
    result = ToolResultBlock(type="tool_result", id="a", name="x", output="done")
    answered = Msg(
        "bot", [ToolUseBlock(type="tool_use", id="a", name="x", input={}), result], "assistant"
    )
    pending = Msg("bot", [ToolUseBlock(type="tool_use", id="w", name="x", input={})], "assistant")
    content = [(m, []) for m in (old, ask, answered, pending)]
    assert turn_ids(content) == {ask.id, pending.id}
    assert turn_ids([(old, [])]) == {old.id}  # no user turn: the step running waits
    # no user turn: an older unanswered call (an interrupted reply) does not wait
    assert turn_ids([(old, []), (answered, [])]) == set()
    # 1.x runs a step's tools one by one: the first result is in, the second call waits;
    # the first result stays with the message of its call
    step = Msg(
        "bot",
        [ToolUseBlock(type="tool_use", id=k, name="x", input={}) for k in ("s1", "s2")],
        "assistant",
    )
    first = Msg(
        "system", [ToolResultBlock(type="tool_result", id="s1", name="x", output="")], "system"
    )
    assert turn_ids([(m, []) for m in (ask, answered, step, first)]) == {ask.id, step.id, first.id}
    assert waiting([(m, []) for m in (ask, answered)]) == set()


class PrefixRecorder(RecordingCompactor):
    """Records what each compaction was given of the agent's last prompt (issue 22 item 5)."""

    def __init__(self) -> None:
        super().__init__()
        self.prefixes: list[Prefix | None] = []

    async def compact(self, *args: Any, prefix: Prefix | None = None, **options: Any) -> Any:
        """`CompactorLike.compact` (the pipeline's call), its `prefix` recorded."""
        self.prefixes.append(prefix)
        return await super().compact(*args, **options)


async def test_the_last_resort_compaction_gets_the_agents_last_prompt(tmp_path: Path) -> None:
    """The fit's compaction of everything (issue 19.6) with `compactor.request: prefix`
    (issue 22.5): the compactor is given the agent's last prompt, the step it did not show as
    the messages to add, no anchor (all the conversation shown is folded in); the budget
    holds, and the kept prompt is dropped once the messages it showed have left."""
    pipe, memory, _ = pipeline(
        tmp_path,
        max_input_tokens=1_000,
        tool_result={"recent_n": 9, "old_max_bytes": 1_100},
        compactor={"request": "prefix"},
    )
    compactor = PrefixRecorder()
    pipe.compaction.compactor = compactor
    agent = Agent()
    ask = Msg("user", "read the nine files", "user")
    await memory.add(ask)
    pipe.compaction.prompts.expect()  # the agent's reasoning call, as the adapter reports it
    sent = [{"role": "system", "content": "You are a test agent."}, {"role": "user"}]
    pipe.compaction.prompts.keep(sent, None, None, object())
    kept = pipe.compaction.prompts.last
    assert kept is not None and kept.shown == {ask.id}
    msgs = parallel_unit(9, 200)
    await memory.add(msgs)
    report = await run(pipe, agent)
    assert report.tokens_after <= 1_000
    assert report.compacted == len(msgs)
    (prefix,) = compactor.prefixes
    assert prefix is not None and prefix.prompt is kept
    assert [m.id for m in prefix.unseen] == [m.id for m in msgs]
    assert prefix.anchor is None
    assert pipe.compaction.prompts.last is None
    assert [m.id for m in memory.messages()] == [ask.id]
