"""Issue 48: `await manager.context_breakdown(agent)`, the live view of an agent's context as
Claude Code's ``/context`` shows it, through a real agent of the installed line: each part
found where the pipeline put it (a masked and a cut output, a pinned message, the summary
and its carried block), the parts adding up to `context_usage`'s count, and the same
breakdown left in the usage record for `agentscope-ctx inspect` and the viewer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx import ContextBreakdown, ContextConfig
from agentscope_ctx.core._errors import ContextUsageError
from agentscope_ctx.services._breakdown import PART_LABELS
from agentscope_ctx.stores._usage_file import read_usage
from tests.support.agent_line import Line, Session


def _dump(arg: str) -> str:
    return "".join(f"build step {n}: compiled module {arg}{n}\n" for n in range(300))


def _config(tmp_path: Path) -> ContextConfig:
    return ContextConfig(
        working_dir=tmp_path / "ctx",
        max_input_tokens=20_000,
        keep_recent_ratio=0.01,  # a compaction leaves the newest turn alone
        clear_at_least=0,  # a due cut is applied at once: the older output is masked
        tool_result={
            "recent_n": 1,
            "mask_after": 1,
            "recent_max_bytes": 2_000,
            "old_max_bytes": 1_024,
        },
        summarizer={"enabled": False},  # type: ignore[arg-type]
        token_counter="cl100k_base",
    )


def _newest_user_id(session: Session, line: Line) -> str:
    """The id of the agent's newest user message, as `manager.pin` takes it."""
    if line.is_1x:
        msgs = [m for m, _ in session.agent.memory.content]
    else:
        msgs = list(session.agent.state.context)
    return str([m for m in msgs if m.role == "user"][-1].id)


async def _checked(session: Session) -> ContextBreakdown:
    """The breakdown, checked against `context_usage`: the same prompt, counted once."""
    breakdown = await session.manager.context_breakdown(session.agent)
    usage = await session.manager.context_usage(session.agent)
    assert breakdown.total == usage.total
    assert breakdown.calibrated_total == usage.calibrated_total
    assert (breakdown.system_prompt, breakdown.tool_schemas) == (
        usage.system_prompt,
        usage.tool_schemas,
    )
    assert breakdown.long_term_memory + breakdown.summary + breakdown.carried == usage.summary
    messages = breakdown.pinned + breakdown.recent + breakdown.cut_outputs
    assert messages + breakdown.masked_outputs == usage.messages
    assert (breakdown.threshold, breakdown.budget) == (usage.threshold, usage.max_input_tokens)
    assert breakdown.free_below_trigger == max(0, usage.threshold - usage.calibrated_total)
    assert breakdown.free_below_budget == max(0, usage.max_input_tokens - usage.calibrated_total)
    assert ContextBreakdown.from_dict(breakdown.to_dict()) == breakdown
    return breakdown


async def test_each_part_is_where_the_pipeline_put_it(tmp_path: Path, line: Line) -> None:
    config = _config(tmp_path)
    session = line.session(config, None, {"dump": _dump}, sys_prompt="You build things.")
    try:
        await session.turn(
            "Build core and util; do not touch vendor/.",
            line.tool_call("dump", arg="core"),
            line.tool_call("dump", arg="util"),
            line.text("built both"),
        )
        first = await _checked(session)
        assert first.system_prompt > 0 and first.tool_schemas > 0
        assert (first.summary, first.carried, first.pinned) == (0, 0, 0)
        # the older output masked (the notice alone), the newer cut to its recent limit
        assert first.messages["masked_outputs"] == 1 and first.masked_outputs > 0
        assert first.messages["cut_outputs"] == 1
        assert first.cut_outputs > 2 * first.masked_outputs  # (a notice is ~120 tokens)
        assert first.recent > 0  # the user's words, the calls and the answer
        assert first.free_below_trigger > 0 and first.free_below_budget > first.free_below_trigger

        await session.turn("Which modules did you build?", line.text("core and util"))
        assert await session.compact() > 0
        await session.manager.pin(session.agent, _newest_user_id(session, line))
        after = await _checked(session)
        assert after.summary > 0
        assert after.carried > 0  # the user's words and the eviction index, by code
        assert after.messages["pinned"] == 1 and after.pinned > 0
        assert after.masked_outputs == 0  # compacted away with its turn
    finally:
        await session.close()


async def test_the_reply_leaves_its_breakdown_in_the_usage_record(
    tmp_path: Path, line: Line
) -> None:
    """`inspect` and the viewer show the context at the end of the last reply: the usage
    record carries its breakdown (`ContextBreakdown.to_dict`)."""
    config = _config(tmp_path)
    session = line.session(config, None, {"dump": _dump})
    try:
        await session.turn("Build core.", line.tool_call("dump", arg="core"), line.text("done"))
        live = await session.manager.context_breakdown(session.agent)
    finally:
        await session.close()
    (record,) = read_usage(config.working_dir)
    kept = ContextBreakdown.from_dict(record["context"])
    assert set(record["context"]["parts"]) == set(PART_LABELS)
    assert kept.messages["cut_outputs"] == 1 and kept.system_prompt == live.system_prompt
    assert record["context"]["total"] == kept.total == record["prompt_tokens"]


async def test_a_detached_agent_has_no_breakdown(tmp_path: Path, line: Line) -> None:
    session = line.session(_config(tmp_path), None, {"dump": _dump})
    other: Any = line.session(_config(tmp_path / "b"), None, {"dump": _dump}).agent
    try:
        with pytest.raises(ContextUsageError, match="not attached"):
            await session.manager.context_breakdown(other)
    finally:
        await session.close()


def test_a_record_that_is_no_breakdown_is_refused() -> None:
    with pytest.raises(ValueError, match="not a context breakdown"):
        ContextBreakdown.from_dict({"parts": {}})
