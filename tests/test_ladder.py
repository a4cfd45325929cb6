"""The pressure ladder (issue 12, items 1-3): cheap rungs before any model call, batched cuts
that break the cached prompt prefix rarely, and a fresh output bounded in tokens."""

from __future__ import annotations

import itertools
from pathlib import Path

from agentscope.message import Msg

from agentscope_ctx._truncation import parse_notice
from tests.test_pipeline import Agent, pipeline, run, turn


def outputs(memory_msgs: list[Msg]) -> list[str]:
    return [
        m.content[0]["output"][0]["text"]  # type: ignore[index]
        for m in memory_msgs
        if m.has_content_blocks("tool_result")
    ]


async def test_masking_relieves_pressure_without_a_model_call(tmp_path: Path) -> None:
    """Over the trigger, the second truncation and masking free enough: no compaction,
    every masked output still ends with a notice (the chain stays lossless)."""
    pipe, memory, compactor = pipeline(
        tmp_path,
        max_input_tokens=6_000,
        tool_result={
            "recent_n": 2,
            "mask_after": 3,
            "recent_max_bytes": 3_000,
            "old_max_bytes": 1_100,
        },
    )
    agent = Agent()
    reports = []
    for i in range(12):
        await memory.add(turn(i, size=200))
        reports.append(await run(pipe, agent))
    assert compactor.calls == []
    freed = {rung for r in reports for rung in r.freed}
    assert "second truncation" in freed or "batched cuts" in freed
    texts = outputs(memory.messages())
    assert len(texts) == 12
    for text in texts:
        assert parse_notice(text) is not None
    assert all(len(t.encode()) < 600 for t in texts[:-3])  # masked: the notice alone
    assert all(r.tokens_after <= 6_000 for r in reports)


async def test_compaction_only_when_the_cheap_rungs_are_not_enough(tmp_path: Path) -> None:
    """Large user turns cannot be masked: the ladder goes on to a model compaction."""
    pipe, memory, compactor = pipeline(
        tmp_path,
        max_input_tokens=6_000,
        tool_result={
            "recent_n": 2,
            "mask_after": 2,
            "recent_max_bytes": 3_000,
            "old_max_bytes": 1_100,
        },
    )
    agent = Agent()
    for i in range(8):
        await memory.add(Msg("user", f"note {i}: " + "words of the user " * 150, "user"))
        await memory.add(turn(i, size=200))
        report = await run(pipe, agent)
        assert report.tokens_after <= 6_000
    assert compactor.calls


async def test_clear_at_least_batches_cuts_and_keeps_the_prefix(tmp_path: Path) -> None:
    """Under the trigger, outputs sliding out of recent_n are not rewritten one by one: the
    prompt before the newest messages is byte-identical until a batch worth `clear_at_least`
    tokens is applied, all at once."""
    pipe, memory, _ = pipeline(
        tmp_path,
        max_input_tokens=1_000_000,
        clear_at_least=2_000,
        tool_result={"recent_n": 1, "recent_max_bytes": 3_000, "old_max_bytes": 1_100},
    )
    agent = Agent()
    prompts: list[list[str]] = []
    for i in range(10):
        await memory.add(turn(i, size=200))
        await run(pipe, agent)
        prompts.append([str(m.content) for m in await memory.get_memory()])
    rewrites = sum(a[: len(b)] != b for b, a in itertools.pairwise(prompts))
    # each output frees ~480 tokens when cut from 3,000 to 1,100 bytes: about one batch per
    # four or five slides, not one rewrite per step
    assert 1 <= rewrites <= 3, rewrites


async def test_without_clear_at_least_every_slide_rewrites(tmp_path: Path) -> None:
    """The contrast: clear_at_least=0 cuts each output as it slides out."""
    pipe, memory, _ = pipeline(
        tmp_path,
        max_input_tokens=1_000_000,
        clear_at_least=0,
        tool_result={"recent_n": 1, "recent_max_bytes": 3_000, "old_max_bytes": 1_100},
    )
    agent = Agent()
    prompts: list[list[str]] = []
    for i in range(10):
        await memory.add(turn(i, size=200))
        await run(pipe, agent)
        prompts.append([str(m.content) for m in await memory.get_memory()])
    rewrites = sum(a[: len(b)] != b for b, a in itertools.pairwise(prompts))
    assert rewrites == 9


async def test_fresh_output_is_bounded_by_its_token_share(tmp_path: Path) -> None:
    """A fresh output within the byte limit but over its token share is cut to the share."""
    pipe, memory, _ = pipeline(
        tmp_path,
        max_input_tokens=20_000,
        tool_result={"recent_n": 5, "recent_max_bytes": 60_000, "recent_max_share": 0.1},
    )
    agent = Agent()
    await memory.add(turn(0, size=3_000))  # ~40 KB, ~15k tokens
    await run(pipe, agent)
    (text,) = outputs(memory.messages())
    assert parse_notice(text) is not None
    assert await pipe.counter.count_text(text) <= 2_000 + 150  # the share, plus the notice
