"""Extended thinking through the context manager, on the installed AgentScope line (issue 45):
long sessions through the real `AnthropicChatModel` against the Anthropic simulator, with
masking and compactions inside tool loops, are never refused; the cache marks the package
places are read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.thinking_session import run_session


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_a_thinking_session_compacted_inside_its_loops_is_never_refused(
    tmp_path: Path, stream: bool
) -> None:
    sim, seen = await run_session(tmp_path, stream=stream)
    assert [(c.status, c.error) for c in sim.calls if c.status != 200] == []
    assert len(sim.calls) == 3 * 11
    # a compaction inside a loop: the summary changed between two calls of one loop
    inside = [
        i
        for i in range(1, len(seen.firsts))
        if seen.loop_steps[i] > 0 and seen.firsts[i] != seen.firsts[i - 1]
    ]
    assert inside, "no compaction happened inside a tool loop"
    # masking: some output went down to its notice alone
    last = sim.requests[-1]["messages"]
    results = [
        b
        for m in last
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    texts = ["".join(p.get("text", "") for p in b["content"]) for b in results]
    assert any(0 <= t.find("<<<TRUNCATED>>>") < 10 for t in texts)
    # every request of a loop opens the loop with its signed thinking block
    for body in sim.requests:
        messages = body["messages"]
        task = max(i for i, m in enumerate(messages) if _text(m).startswith("Task "))
        steps = [m for m in messages[task + 1 :] if m["role"] == "assistant"]
        if steps:
            opening = steps[0]["content"][0]
            assert opening["type"] == "thinking" and opening["signature"]


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


async def test_the_marks_are_read_back(tmp_path: Path) -> None:
    """Cache breakpoints placed by the package (at most 4, Anthropic's rule, else refused):
    most of each prompt is read from the cache."""
    sim, _ = await run_session(tmp_path, turns=2, steps=6, budget=12_000)
    assert all(c.status == 200 for c in sim.calls)
    assert all(1 <= c.breakpoints <= 4 for c in sim.calls)
    totals = sim.summary()
    assert totals["read_ratio"] > 0.5, totals
