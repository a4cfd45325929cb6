"""Masking down to a low-water mark (`ContextConfig.mask_to_ratio`, issue 45 item 3): a firing
of the cheap rungs rewrites the prompt once, from the oldest output it masks, and frees enough
that the steps after it only append, on both AgentScope lines."""

from __future__ import annotations

import itertools
from pathlib import Path

from agentscope_ctx.core.context._memory import ContextMemory
from agentscope_ctx.core.truncation._truncation import parse_notice
from tests.core.test_pipeline import Agent, pipeline, run, turn

BUDGET = 20_000
STEPS = 30


def _prompt(memory: ContextMemory) -> list[str]:
    return [str(m.content) for m in memory.messages()]


async def _session(tmp_path: Path, mask_to_ratio: float | None) -> tuple[list[int], list[int]]:
    """Thirty tool steps of ~1,000-token outputs at a 20,000-token budget (masking after 4):
    the tokens after each run, and the index of the first message each rewrite changed (a
    step whose prompt does not begin with the whole previous one)."""
    pipe, memory, compactor = pipeline(
        tmp_path,
        max_input_tokens=BUDGET,
        compact_trigger_ratio=0.75,
        mask_to_ratio=mask_to_ratio,
        clear_at_least=None,
        # the outputs enter whole (bytes only: no share of the budget cuts them)
        tool_result={
            "recent_n": 2,
            "mask_after": 4,
            "recent_max_bytes": 8_000,
            "recent_max_share": None,
        },
    )
    agent = Agent()
    after: list[int] = []
    prompts: list[list[str]] = []
    for i in range(STEPS):
        await memory.add(turn(i, size=300))
        after.append((await run(pipe, agent)).tokens_after)
        prompts.append(_prompt(memory))
    assert compactor.calls == []  # the cheap rungs are enough here
    starts = [
        next(k for k, (a, b) in enumerate(zip(before, now, strict=False)) if a != b)
        for before, now in itertools.pairwise(prompts)
        if now[: len(before)] != before
    ]
    for i, msg in enumerate(m for m in memory.messages() if m.get_content_blocks("tool_result")):
        text = msg.get_content_blocks("tool_result")[0]["output"][0]["text"]  # type: ignore[index]
        whole = "".join(f"file_{i}_{k}.txt\n" for k in range(300))
        assert text == whole or parse_notice(text) is not None  # whole, or cut and reachable
    return after, starts


async def test_a_firing_masks_down_to_the_low_water_mark_and_then_only_appends(
    tmp_path: Path,
) -> None:
    """With the low-water mark the prompt is rewritten less than half as often as without,
    each rewrite starts where the previous masked run ends (never before it: what was
    masked stays as it was), and the budget holds at every step."""
    after, starts = await _session(tmp_path / "low", 0.3)
    plain_after, plain_starts = await _session(tmp_path / "plain", None)
    assert max(after) <= BUDGET and max(plain_after) <= BUDGET
    assert 1 <= len(starts) <= len(plain_starts) // 2, (starts, plain_starts)
    assert starts == sorted(starts)  # each rewrite starts at or after the one before
    fired = [n for n, (a, b) in enumerate(itertools.pairwise(after), 1) if b < a]
    for n in fired:  # the low-water mark, give or take the newest output (never masked)
        assert after[n] <= 0.3 * BUDGET + after[0], (n, after)


async def test_without_a_low_water_mark_masking_stops_under_the_trigger(tmp_path: Path) -> None:
    """The contrast (`mask_to_ratio: null`): a firing masks only what is past `mask_after`,
    and the prompt stays well above the low-water mark."""
    after, _ = await _session(tmp_path, None)
    fired = [n for n, (a, b) in enumerate(itertools.pairwise(after), 1) if b < a]
    assert fired
    assert all(after[n] > 0.3 * BUDGET + after[0] for n in fired), after
