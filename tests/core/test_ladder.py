"""The pressure ladder (issue 12, items 1-3): cheap rungs before any model call, batched cuts
that break the cached prompt prefix rarely, and a fresh output bounded in tokens."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("drives a ReActAgent through ContextManager's hooks"), allow_module_level=True
    )

from agentscope.agent import ReActAgent
from agentscope.message import Msg

from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
from agentscope_ctx.core._pipeline import ContextPipeline
from agentscope_ctx.core.context._memory import ContextMemory
from agentscope_ctx.core.truncation._truncation import parse_notice
from tests.core.test_pipeline import Agent, RecordingCompactor, pipeline, run, turn
from tests.support.fakes import FakeChatModel, text, tool_call
from tests.support.react1 import react, text_tools


def outputs(memory_msgs: list[Msg]) -> list[str]:
    return [
        m.content[0]["output"][0]["text"]  # type: ignore[index]
        for m in memory_msgs
        if m.has_content_blocks("tool_result")
    ]


def ladder(
    tmp_path: Path, mask_after: int
) -> tuple[ContextPipeline, ContextMemory, RecordingCompactor]:
    """A pipeline at a 6,000-token budget, outputs recent for 2 turns (3,000 bytes, then
    1,100) and masked after `mask_after`: its pipe, memory and recording compactor."""
    return pipeline(
        tmp_path,
        max_input_tokens=6_000,
        tool_result={
            "recent_n": 2,
            "mask_after": mask_after,
            "recent_max_bytes": 3_000,
            "old_max_bytes": 1_100,
        },
    )


async def test_masking_relieves_pressure_without_a_model_call(tmp_path: Path) -> None:
    """Over the trigger, the second truncation and masking free enough: no compaction,
    every masked output still ends with a notice (the chain stays lossless)."""
    pipe, memory, compactor = ladder(tmp_path, mask_after=3)
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
    for output in texts:
        assert parse_notice(output) is not None
    assert all(len(t.encode()) < 600 for t in texts[:-3])  # masked: the notice alone
    assert all(r.tokens_after <= 6_000 for r in reports)


async def test_compaction_only_when_the_cheap_rungs_are_not_enough(tmp_path: Path) -> None:
    """Large user turns cannot be masked: the ladder goes on to a model compaction."""
    pipe, memory, compactor = ladder(tmp_path, mask_after=2)
    agent = Agent()
    for i in range(8):
        await memory.add(Msg("user", f"note {i}: " + "words of the user " * 150, "user"))
        await memory.add(turn(i, size=200))
        report = await run(pipe, agent)
        assert report.tokens_after <= 6_000
    assert compactor.calls


async def rewrites_over_ten_slides(tmp_path: Path, clear_at_least: int) -> int:
    """Steps, of 9, whose prompt did not begin with the whole previous one: ten outputs slide
    out of recent_n=1 under the trigger."""
    pipe, memory, _ = pipeline(
        tmp_path,
        max_input_tokens=1_000_000,
        clear_at_least=clear_at_least,
        tool_result={"recent_n": 1, "recent_max_bytes": 3_000, "old_max_bytes": 1_100},
    )
    agent = Agent()
    prompts: list[list[str]] = []
    for i in range(10):
        await memory.add(turn(i, size=200))
        await run(pipe, agent)
        prompts.append([str(m.content) for m in await memory.get_memory()])
    return sum(a[: len(b)] != b for b, a in itertools.pairwise(prompts))


async def test_clear_at_least_batches_cuts_and_keeps_the_prefix(tmp_path: Path) -> None:
    """Under the trigger, outputs sliding out of recent_n are not rewritten one by one: the
    prompt before the newest messages is byte-identical until a batch worth `clear_at_least`
    tokens is applied, all at once. Each output frees ~480 tokens when cut from 3,000 to
    1,100 bytes: about one batch per four or five slides, not one rewrite per step."""
    assert 1 <= await rewrites_over_ten_slides(tmp_path, clear_at_least=2_000) <= 3


async def test_without_clear_at_least_every_slide_rewrites(tmp_path: Path) -> None:
    """The contrast: clear_at_least=0 cuts each output as it slides out."""
    assert await rewrites_over_ten_slides(tmp_path, clear_at_least=0) == 9


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


# -- through a real agent: one accountant, a stable prefix --------------------------------


def _agent_session(
    tmp_path: Path, **fields: Any
) -> tuple[ReActAgent, ContextManager, FakeChatModel]:
    def dump(part: int) -> str:
        """Dump a part of the log.

        Args:
            part (int): which part.
        """
        return "".join(f"part {part} line {i}: status ok, value {i * part}\n" for i in range(300))

    model = FakeChatModel()
    agent = react(model, text_tools(dump), sys_prompt="You read logs.", max_iters=40)
    config = ContextConfig(
        working_dir=tmp_path / "ctx",
        token_counter="cl100k_base",
        summarizer={"enabled": False},
        **fields,
    )
    manager = ContextManager(config, token_counter=TokenCounter("cl100k_base"))
    manager.attach(agent)
    return agent, manager, model


async def test_context_usage_and_the_pipeline_are_one_accountant(tmp_path: Path) -> None:
    agent, manager, model = _agent_session(tmp_path, max_input_tokens=8_000)
    model.enqueue(*[tool_call("dump", call_id=f"d{i}", part=i) for i in range(6)], text("ok"))
    await agent(Msg("user", "read the parts", "user"))
    usage = await manager.context_usage(agent)
    pipeline = manager._binding(agent).pipeline
    assert usage.total == await pipeline.prompt_tokens()
    assert usage.total == (
        usage.system_prompt + usage.tool_schemas + usage.summary + usage.messages
    )


async def test_prompt_prefix_is_byte_identical_between_compactions(tmp_path: Path) -> None:
    """Under the trigger nothing older is rewritten: each prompt begins with the whole
    previous prompt, byte for byte (the system prompt, summary, MEMORY.md note included),
    across replies too, even after the agent wrote to MEMORY.md."""
    agent, manager, model = _agent_session(
        tmp_path, max_input_tokens=200_000, tool_result={"recent_n": 1}
    )
    for n in range(3):
        model.enqueue(
            *[tool_call("dump", call_id=f"d{n}{i}", part=i) for i in range(4)],
            tool_call("remember", call_id=f"r{n}", fact=f"the user likes part {n}"),
            text(f"turn {n} done"),
        )
        await agent(Msg("user", f"read the parts, turn {n}", "user"))
    prompts = [json.dumps(call["messages"], sort_keys=True) for call in model.calls]
    assert len(prompts) == 18
    for before, after in itertools.pairwise(prompts):
        assert after.startswith(before[: before.rfind("}")]), "an older message was rewritten"
