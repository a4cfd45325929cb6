"""A thinking model speaking ``reasoning_content`` through the context manager, on the
installed AgentScope line (issue 45): long sessions through the real model classes against
the Chat Completions simulator, masked and compacted inside their tool loops, are never
refused, whether the provider wants the reasoning back in a tool loop (DeepSeek's thinking
mode, 2.x `DeepSeekChatModel`) or refuses it (DeepSeek-R1, `OpenAIChatModel`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx._line import IS_1X
from tests.support.reasoning_session import run_session

MODELS = ["openai"] if IS_1X else ["deepseek", "openai"]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_reasoning_session_compacted_inside_its_loops_is_never_refused(
    tmp_path: Path, model: str, stream: bool
) -> None:
    sim = await run_session(tmp_path, model=model, stream=stream)  # type: ignore[arg-type]
    assert [(c.status, c.error) for c in sim.calls if c.status != 200] == []
    assert len(sim.calls) == 3 * 11
    summaries = [
        next((_text(m) for m in body["messages"] if "<compact_summary>" in _text(m)), "")
        for body in sim.requests
    ]
    in_loop = [body["messages"][-1]["role"] == "tool" for body in sim.requests]
    changed = [
        i
        for i in range(1, len(summaries))
        if in_loop[i] and in_loop[i - 1] and summaries[i] != summaries[i - 1]
    ]
    assert changed, "no compaction happened inside a tool loop"
    results = [_text(m) for m in sim.requests[-1]["messages"] if m["role"] == "tool"]
    assert any(0 <= t.find("<<<TRUNCATED>>>") < 10 for t in results), "nothing was masked"
    sent_back = [
        "reasoning_content" in m
        for body in sim.requests
        for m in body["messages"]
        if m["role"] == "assistant" and m.get("tool_calls")
    ]
    # DeepSeek's thinking mode gets the reasoning back in its loops; R1's rule gets none
    assert all(sent_back) if model == "deepseek" else not any(sent_back)
