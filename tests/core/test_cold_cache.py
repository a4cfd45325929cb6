"""Cuts due under the trigger wait for a batch (`clear_at_least`) to spare the provider's
cached prefix, unless that cache has expired: no model call for longer than its life
(`ContextPipeline.cache_life`, issue 45 item 3). Then the next call writes the whole prompt
anyway, and the cuts due are applied at once (`ContextPipeline.cold`, `Ladder.relieve`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx.core._pipeline import ContextPipeline, PipelineReport
from agentscope_ctx.core.context._memory import ContextMemory
from agentscope_ctx.core.tokens._calibration import PromptUsage
from tests.core.test_pipeline import Agent, pipeline, run, turn

COLD = "cold cache cuts"


class Clock:
    """A virtual clock in seconds (`ContextPipeline.clock`)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _pipe(tmp_path: Path, **overrides: Any) -> tuple[ContextPipeline, ContextMemory, Clock]:
    """A budget the session never nears (no trigger), outputs cut to the old limits once
    out of the newest one, `clear_at_least` at its default (under the trigger, due cuts
    wait), and a virtual clock."""
    pipe, memory, _ = pipeline(
        tmp_path,
        max_input_tokens=1_000_000,
        clear_at_least=None,
        tool_result={"recent_n": 1, "recent_max_bytes": 3_000, "old_max_bytes": 1_100},
        **overrides,
    )
    clock = Clock()
    pipe.clock, pipe.cache_life = clock, 300.0  # (the adapter sets it from the model)
    return pipe, memory, clock


async def _step(
    pipe: ContextPipeline, memory: ContextMemory, agent: Agent, i: int, clock: Clock, wait: float
) -> PipelineReport:
    """One model call's run after `wait` seconds: an output added, the pipeline run, the
    provider's usage observed (its answer)."""
    clock.now += wait
    await memory.add(turn(i, size=200))
    report = await run(pipe, agent)
    pipe.observe_usage(PromptUsage(report.tokens_after, complete=True))
    return report


def _cut(memory: ContextMemory) -> list[bool]:
    """For each output, oldest first: whether it was cut to the old limits (1,100 bytes)."""
    return [
        len(m.content[0]["output"][0]["text"].encode()) <= 1_100  # type: ignore[index]
        for m in memory.messages()
        if m.has_content_blocks("tool_result")
    ]


async def test_due_cuts_wait_while_warm_and_go_at_once_when_cold(tmp_path: Path) -> None:
    """Outputs slide out of the newest one, a call every 5 s: nothing is rewritten (the
    prompt before the newest messages keeps its bytes). After 6 minutes idle, the next run
    cuts all five due at once; then, warm again, the next slide waits."""
    pipe, memory, clock = _pipe(tmp_path)
    agent = Agent()
    for i in range(5):
        report = await _step(pipe, memory, agent, i, clock, 5)
        assert COLD not in report.freed
    assert _cut(memory) == [False] * 5
    report = await _step(pipe, memory, agent, 5, clock, 360)
    assert report.freed[COLD] > 0
    assert _cut(memory) == [True] * 5 + [False]
    report = await _step(pipe, memory, agent, 6, clock, 5)
    assert COLD not in report.freed
    assert _cut(memory) == [True] * 5 + [False, False]


@pytest.mark.parametrize(
    ("life", "idle", "cold"),
    [
        (300, 299, False),
        (300, 301, True),
        (3_600, 301, False),
        (3_600, 3_599, False),
        (3_600, 3_601, True),
        (None, 86_400, False),
    ],
)
async def test_cold_after_the_caches_life(
    tmp_path: Path, life: float | None, idle: float, cold: bool
) -> None:
    """The cache is cold once the idle time passes its life (`cache_life`: Anthropic's TTL
    of 5 minutes or an hour, `models.cache_life`); never where its life is not known."""
    pipe, memory, clock = _pipe(tmp_path)
    pipe.cache_life = life
    agent = Agent()
    await _step(pipe, memory, agent, 0, clock, 5)
    await _step(pipe, memory, agent, 1, clock, 5)
    assert pipe.cold is False
    clock.now += idle
    assert pipe.cold is cold
    report = await _step(pipe, memory, agent, 2, clock, 0)
    assert (COLD in report.freed) is cold
    assert _cut(memory)[0] is cold


async def test_no_call_noted_counts_as_warm(tmp_path: Path) -> None:
    """A session with no model call's usage noted (a provider that reports none) cannot
    tell how old the cache is: it counts it warm, and the due cuts wait as before."""
    pipe, memory, clock = _pipe(tmp_path)
    agent = Agent()
    for i in range(3):
        clock.now += 3_600
        await memory.add(turn(i, size=200))
        report = await run(pipe, agent)
        assert COLD not in report.freed
    assert pipe.cold is False
    assert _cut(memory) == [False] * 3


async def test_the_last_calls_time_travels_with_the_session(tmp_path: Path) -> None:
    """The next turn runs on another worker (a new pipeline, the session's state loaded):
    it knows from that state when the last call was, and so whether the cache is cold."""
    pipe, memory, clock = _pipe(tmp_path / "one")
    agent = Agent()
    for i in range(3):
        await _step(pipe, memory, agent, i, clock, 5)
    state = memory.state_dict()
    for idle, cold in ((60, False), (400, True)):
        other, resumed, other_clock = _pipe(tmp_path / f"two-{idle}")
        resumed.load_state_dict(state)
        other_clock.now = clock.now + idle
        assert other.cold is cold
        await resumed.add(turn(3, size=200))
        report = await run(other, agent)
        assert (COLD in report.freed) is cold
        assert _cut(resumed) == [cold, cold, cold, False]
