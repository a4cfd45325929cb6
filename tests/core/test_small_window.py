"""Small windows (issue #20), in the core on both lines: the current user turn never leaves
the prompt, a compaction that would not shrink the prompt is not made, and a prompt whose
fixed parts and current turn alone are over the budget raises `PromptTooLargeError` (a
`ContextUsageError`) naming the parts, instead of going to the model over budget."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentscope_ctx import ContextUsageError, PromptTooLargeError
from agentscope_ctx.core.context._turns import current_turn
from tests.core.test_pipeline import Agent, Result, attach, pipeline, run, turn
from tests.support.lines import IS_1X, Msg, reason_1x

PROMPT_PARTS = {"system prompt", "tool schemas", "summary", "current user turn", "other messages"}
"""The parts a `PromptTooLargeError` sizes (`core/ladder/_fits.py`)."""


class BigCompactor:
    """A compactor whose summary is longer than what it summarises."""

    def __init__(self) -> None:
        self.calls = 0

    async def compact(
        self, previous_summary: str, messages: Sequence[Msg], *, extra_instruction: Any = None
    ) -> Result:
        self.calls += 1
        return Result("## Goal\n" + "the goal, restated at length. " * 400)


async def test_the_current_user_turn_stays_when_the_work_after_it_is_compacted(
    tmp_path: Path,
) -> None:
    pipe, memory, compactor = pipeline(tmp_path)
    ask = Msg("user", "look at every file and tell me which are empty", "user")
    added = [Msg("user", "hello", "user"), Msg("bot", "hi", "assistant"), ask]
    added += [m for i in range(8) for m in turn(i)]
    await memory.add(added)
    report = await run(pipe, Agent())

    assert report.compacted > 0
    live = memory.messages()
    assert [m.content for m in live if m.id == ask.id] == [ask.content]  # still verbatim
    assert ask.id not in compactor.calls[0][1]  # the work around it is summarised
    assert current_turn(memory.content) == ask.id
    # dialog/ keeps the conversation's order: the request is written with the older part
    # (the store skips it when it leaves later); nothing lost, nothing twice
    stored, _ = pipe.dialog.read()
    ids = [m.id for m in stored]
    assert ask.id in ids
    assert ids + [m.id for m in live if m.id not in set(ids)] == [m.id for m in added]


async def test_a_forced_compaction_of_a_short_context_is_not_made(tmp_path: Path) -> None:
    """A manual `compact` of a short conversation: summarising it would only add the summary
    (before: the user's question went into a summary longer than the whole conversation)."""
    pipe, memory, compactor = pipeline(tmp_path)
    ask = Msg("user", "What is 2 + 2?", "user")
    await memory.add([Msg("user", "hi", "user"), Msg("bot", "hello", "assistant")])
    await memory.add([ask, Msg("bot", "4", "assistant")])
    ids = [m.id for m in memory.messages()]
    agent = attach(pipe, Agent())
    before = await pipe.prompt_tokens()
    report = await run(pipe, agent, force=True)
    assert report.compacted == 0 and "not made" in (report.note or "")
    assert any("compaction not made" in line for line in agent.printed)  # said so
    assert await pipe.prompt_tokens() == before
    assert [m.id for m in memory.messages()] == ids and memory.compact_summary == ""
    assert compactor.calls == []  # known to be too small: no model call for it
    assert pipe.dialog.read()[0] == []


async def test_a_forced_compaction_of_the_first_exchange_keeps_it(tmp_path: Path) -> None:
    pipe, memory, _ = pipeline(tmp_path)
    ask = Msg("user", "What is 2 + 2?", "user")
    await memory.add([ask, Msg("bot", "4", "assistant")])
    agent = attach(pipe, Agent())
    before = await pipe.prompt_tokens()
    report = await run(pipe, agent, force=True)
    assert report.compacted == 0 and report.note
    assert await pipe.prompt_tokens() == before
    assert memory.messages()[0].id == ask.id and memory.compact_summary == ""


async def test_a_summary_longer_than_what_it_replaces_is_not_applied(tmp_path: Path) -> None:
    """Shown whole (`summary_max_share` 1: at this budget the default would show it cut to
    its share, a summary message smaller than what it replaces)."""
    pipe, memory, _ = pipeline(tmp_path, summary_max_share=1)
    big = BigCompactor()
    pipe.compaction.compactor = big
    agent = attach(pipe, Agent())
    await memory.add([Msg("user", "go", "user"), *[m for i in range(4) for m in turn(i, 100)]])
    ids = [m.id for m in memory.messages()]
    before = await pipe.prompt_tokens()
    report = await run(pipe, agent, force=True)
    assert big.calls == 1  # asked, and the answer was too long to help
    assert report.compacted == 0 and "not made" in (report.note or "")
    assert [m.id for m in memory.messages()] == ids and memory.compact_summary == ""
    assert await pipe.prompt_tokens() <= before
    assert pipe.dialog.read()[0] == []  # nothing left, nothing written
    assert any("compaction not made" in line for line in agent.printed)  # and said so


async def test_fixed_parts_and_the_current_turn_over_the_budget_raise(tmp_path: Path) -> None:
    pipe, memory, compactor = pipeline(tmp_path, max_input_tokens=1_000)
    agent = Agent()
    agent.sys_prompt = "Follow the house rules. " * 180  # ~900 tokens
    ask = Msg("user", "Please review this paragraph carefully. " * 40, "user")
    await memory.add([ask])
    with pytest.raises(PromptTooLargeError) as caught:
        await run(pipe, agent)
    error = caught.value
    assert isinstance(error, ContextUsageError)
    assert error.budget == 1_000
    assert set(error.parts) == PROMPT_PARTS
    assert error.parts["system prompt"] > 850 and error.parts["current user turn"] > 200
    for name, tokens in error.parts.items():
        assert f"{name} {tokens}" in str(error)
    assert compactor.calls == []


async def test_a_prompt_that_fits_without_the_work_does_not_raise(tmp_path: Path) -> None:
    """Over the budget because of the agent's own work: the ladder's job, not an error."""
    pipe, memory, _ = pipeline(tmp_path, max_input_tokens=1_500)
    await memory.add([Msg("user", "go", "user"), *[m for i in range(6) for m in turn(i, 40)]])
    report = await run(pipe, Agent())
    assert report.tokens_after <= 1_500


# -- the invariants, over budgets, sizes and shapes -----------------------------------

shapes = st.lists(
    st.tuples(st.sampled_from(["user", "call", "answer"]), st.integers(1, 120)),
    min_size=1,
    max_size=14,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(shape=[("user", 3), ("answer", 1)], budget=1_000, force=True)
@example(shape=[("user", 3), ("call", 120), ("answer", 1)], budget=128_000, force=True)
@given(
    shape=shapes,
    budget=st.integers(1_000, 5_000) | st.sampled_from([8_000, 32_000, 128_000]),
    force=st.booleans(),
)
async def test_no_compaction_grows_the_prompt_and_the_newest_user_turn_stays(
    tmp_path_factory: pytest.TempPathFactory,
    shape: list[tuple[str, int]],
    budget: int,
    force: bool,
) -> None:
    tmp = tmp_path_factory.mktemp("w")
    pipe, memory, _ = pipeline(tmp, max_input_tokens=budget)
    msgs: list[Msg] = []
    for i, (kind, size) in enumerate(shape):
        if kind == "user":
            msgs.append(Msg("user", f"request {i}: " + "please " * size, "user"))
        elif kind == "answer":
            msgs.append(Msg("bot", f"answer {i}: " + "done " * size, "assistant"))
        else:
            msgs += turn(i, size)
    await memory.add(msgs)
    newest = current_turn(memory.content)
    agent = attach(pipe, Agent())
    before = await pipe.prompt_tokens()
    try:
        report = await run(pipe, agent, force=force)
    except PromptTooLargeError as error:  # only when the fixed parts and the turn are over
        assert error.total == math.ceil(sum(error.parts.values()) * pipe.scale) > budget
        parts = error.parts
        never_leave = parts["system prompt"] + parts["tool schemas"] + parts["current user turn"]
        assert math.ceil(never_leave * error.scale) > budget, str(error)
        return
    after = await pipe.prompt_tokens()
    if report.compacted or "not made" in (report.note or ""):
        assert after < before or (not report.compacted and after <= before)
    if newest is not None:
        assert newest in [m.id for m in memory.messages()]


# -- through the 1.x manager (a real ReActAgent) ----------------------------------------


@pytest.mark.skipif(not IS_1X, reason=reason_1x("ReActAgent and ContextManager"))
async def test_1x_manual_compact_of_a_short_context_does_not_grow_it(tmp_path: Path) -> None:
    from agentscope.agent import ReActAgent
    from agentscope.formatter import OpenAIChatFormatter

    from agentscope_ctx import ContextConfig, ContextManager
    from tests.support.fakes import FakeChatModel

    model = FakeChatModel(["hello", "4"])
    agent = ReActAgent(name="a", sys_prompt="s", model=model, formatter=OpenAIChatFormatter())
    agent.set_console_output_enabled(False)
    manager = ContextManager(ContextConfig(working_dir=tmp_path))
    memory = manager.attach(agent)
    await agent(Msg("user", "hi", "user"))
    await agent(Msg("user", "What is 2 + 2?", "user"))
    ids = [m.id for m in memory.messages()]
    before = await manager.context_usage(agent)
    report = await manager.compact(agent, extra_instruction="keep the numbers")
    after = await manager.context_usage(agent)
    assert report.compacted == 0 and "not made" in (report.note or "")
    assert after.total <= before.total and memory.compact_summary == ""
    assert [m.id for m in memory.messages()] == ids
    await manager.close()


@pytest.mark.skipif(not IS_1X, reason=reason_1x("ReActAgent and ContextManager"))
async def test_1x_our_tool_schemas_are_short(tmp_path: Path) -> None:
    """Every prompt carries them: they took 790 tokens (issue #20)."""
    import json

    from agentscope.agent import ReActAgent
    from agentscope.formatter import OpenAIChatFormatter

    from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
    from tests.support.fakes import FakeChatModel

    agent = ReActAgent(
        name="a", sys_prompt="s", model=FakeChatModel(), formatter=OpenAIChatFormatter()
    )
    ContextManager(ContextConfig(working_dir=tmp_path)).attach(agent)
    schemas = agent.toolkit.get_json_schemas()
    tokens = await TokenCounter("o200k_base").count_text(json.dumps(schemas, ensure_ascii=False))
    assert tokens <= 620, tokens
    search = next(s for s in schemas if s["function"]["name"] == "search_history")
    role = search["function"]["parameters"]["properties"]["role"]
    assert role["type"] == "string" and "anyOf" not in role
