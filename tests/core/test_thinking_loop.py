"""A thinking model's tool loop through the pipeline (DESIGN.md §18, issue 45): compaction
inside the loop keeps the loop's first step, whose signed thinking block the provider wants
back first in the turn, and no rung changes a thinking block (line-neutral core)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentscope_ctx.core.context._turns import turn_ids
from tests.core.test_pipeline import Agent, pipeline, run, turn
from tests.support.lines import Msg, TextBlock, ToolUseBlock


def _thinking(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": f"sig:{text}", **extra}


def _head(i: int, first: dict[str, Any]) -> list[Msg]:
    """A loop's first step: `first` (a thinking block) before the call, and its result."""
    step, result = turn(i)
    step.content = [first, *step.get_content_blocks()]
    return [step, result]


def test_turn_ids_hold_the_loops_thinking_head_with_its_results() -> None:
    ask = Msg("user", "review the logs", "user")
    head = _head(1, _thinking("plan the review"))
    later = turn(2)
    content = [(m, []) for m in (ask, *head, *later)]
    assert turn_ids(content) == {ask.id, head[0].id, head[1].id}
    # a redacted block opens the loop just as well (1.x's own type)
    redacted = _head(3, {"type": "redacted_thinking", "data": "enc"})
    assert turn_ids([(m, []) for m in (ask, *redacted)]) == {ask.id, *(m.id for m in redacted)}
    # a loop that does not open with thinking holds nothing more
    plain = turn(4)
    assert turn_ids([(m, []) for m in (ask, *plain, *head)]) == {ask.id}


async def test_compaction_inside_a_thinking_loop_keeps_its_signed_head(tmp_path: Path) -> None:
    """A long tool loop of one user turn, compacted mid-loop: the prompt still opens the
    turn with the thinking block, its signature and text unchanged, then its call and result
    (cut or masked, never parted); the later steps may have left for the summary."""
    pipe, memory, compactor = pipeline(tmp_path)
    agent = Agent()
    ask = Msg("user", "review every module", "user")
    first = _thinking("I will read the modules one by one. " * 20)
    head = _head(0, first)
    await memory.add(ask)
    for msg in head:
        await memory.add(msg)
    for i in range(1, 14):
        for msg in turn(i, size=300):
            await memory.add(msg)
        await run(pipe, agent)
    assert compactor.calls, "the loop outgrew the budget: compaction ran inside it"
    kept = memory.messages()
    assert [m.id for m in kept[:3]] == [ask.id, head[0].id, head[1].id]
    opening = kept[1].get_content_blocks()[0]
    assert opening == first  # signature and text byte for byte
    left = {i for _, ids, _ in compactor.calls for i in ids}
    assert head[0].id not in left and head[1].id not in left
    # every call still has its result right after it
    uses = [b["id"] for m in kept for b in m.get_content_blocks("tool_use")]
    results = [b["id"] for m in kept for b in m.get_content_blocks("tool_result")]
    assert uses == results


async def test_no_rung_rewrites_a_thinking_block(tmp_path: Path) -> None:
    """The fit under pressure cuts texts and outputs, never a thinking block."""
    pipe, memory, _ = pipeline(tmp_path, max_input_tokens=2_000)
    agent = Agent()
    await memory.add(Msg("user", "go", "user"))
    words = " ".join(f"w{i}" for i in range(900))
    blocks = [_thinking(words[:600]), TextBlock(type="text", text=words)]
    use = ToolUseBlock(type="tool_use", id="c", name="shell", input={"cmd": "ls"})
    step = Msg("bot", [*blocks, use], "assistant")
    await memory.add(step)
    for msg in turn(9, size=400)[1:]:
        msg.content = [{**msg.get_content_blocks()[0], "id": "c"}]
        await memory.add(msg)
    report = await run(pipe, agent)
    assert report.tokens_after <= 2_000
    (kept,) = [m for m in memory.messages() if m.id == step.id]
    text = kept.get_content_blocks("text")[0]["text"]
    assert len(text) < len(words)  # the fit cut the step's text ...
    assert kept.get_content_blocks()[0] == blocks[0]  # ... and left its thinking whole


def test_the_newest_hint_stays_in_a_thinking_session() -> None:
    """AgentScope 2.x injects its runtime state (the time) again when none is left: a hint
    injected mid-loop would open a new turn for the provider, one without thinking. So the
    newest hint stays in a session whose model thinks: inside a loop, and at a turn's first
    step, before the loop has a head (a compaction there took it: the next step's injection
    came after the head). Without thinking, hints leave like any message."""
    from agentscope_ctx.core.context._turns import HINT_MARK

    old_hint = Msg("user", "<system-reminder>time 10:00</system-reminder>", "user")
    hint = Msg("user", "<system-reminder>time 11:00</system-reminder>", "user")
    ask = Msg("user", "go on", "user")
    head = _head(1, _thinking("plan"))
    content = [(old_hint, [HINT_MARK]), (hint, [HINT_MARK]), (ask, []), *((m, []) for m in head)]
    assert turn_ids(content) == {hint.id, ask.id, *(m.id for m in head)}
    earlier = _head(2, _thinking("an earlier turn's plan"))
    ask2 = Msg("user", "and now this", "user")
    first_step = [*((m, []) for m in earlier), (hint, [HINT_MARK]), (ask2, [])]
    assert turn_ids(first_step) == {hint.id, ask2.id}
    plain = [(old_hint, [HINT_MARK]), (hint, [HINT_MARK]), (ask, []), *((m, []) for m in turn(2))]
    assert turn_ids(plain) == {ask.id}
