"""`ContextPipeline.cache_marks` (issue 45): the call whose result ends what the ladder leaves
as it is until the next trigger, where the third cache breakpoint goes (`models._cache`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx.core.ladder._cut_plan import MASKED
from tests.core.test_pipeline import Agent, pipeline, run, turn
from tests.support.lines import Msg


@pytest.mark.parametrize(
    "policy", [{}, {"summary_max_share": 1, "compact_headroom": 0}], ids=["default", "no_policy"]
)
async def test_the_stable_call_ends_what_no_cut_will_touch(
    tmp_path: Path, policy: dict[str, Any]
) -> None:
    """At every step of a session that masks and compacts: at or before the stable call's
    result no tool message has a cut due or to come (each is at its last level, masked),
    and the next tool message has one. With the small-window policy (the default at this
    4,000-token budget) a compaction takes every settled result away: the call marked before
    is not marked again."""
    pipe, memory, _ = pipeline(
        tmp_path,
        **policy,
        tool_result={
            "recent_n": 1,
            "recent_max_bytes": 3_000,
            "old_max_bytes": 1_100,
            "mask_after": 2,
        },
        clear_at_least=None,
    )
    agent = Agent()
    await memory.add(Msg("user", "read everything", "user"))
    seen: list[str | None] = []
    for i in range(16):
        for msg in turn(i, size=120):
            await memory.add(msg)
        await run(pipe, agent)
        summary, calls = pipe.cache_marks()
        assert summary == (memory.summary_message() is not None)
        stable = pipe.ladder.stable_call()
        assert calls[-1:] == ((stable,) if stable is not None else ())
        assert len(calls) <= 2 and (len(calls) < 2 or calls[0] == seen[-1])
        seen.append(stable)
        plan = pipe.ladder.plan
        t = pipe.accountant.ledger
        settled = {m for m in t.tool_msgs if m not in plan.due and plan.applied.get(m, 0) >= MASKED}

        if stable is None:
            assert not t.tool_msgs or t.tool_msgs[0] not in settled or not t.results
            continue
        (at,) = [
            k
            for k, mid in enumerate(t.tool_msgs)
            if any(b.get("id") == stable for b in t.msgs[mid].get_content_blocks("tool_result"))
        ]
        assert all(mid in settled for mid in t.tool_msgs[: at + 1])
        later = t.tool_msgs[at + 1 :]
        assert later and not all(mid in settled for mid in later)
    assert any(s is not None for s in seen)
