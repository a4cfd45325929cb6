"""Native mode (``compactor.mode: native``, issue 45 item 4): the provider compacts, the
package keeps its opaque block with the session and sends it back, on the installed line,
through AgentScope's real model classes against the offline simulators
(`tests.support.native_session`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx.models._native import NativeCall, anthropic_request, stand_in
from tests.support.lines import IS_1X
from tests.support.native_session import dialog_records, run_session

requires_2x = pytest.mark.skipif(IS_1X, reason="AgentScope 2.x only: OpenAIResponseModel")
NATIVE = "agentscope_ctx.native"


def _opening(body: dict[str, Any]) -> dict[str, Any] | None:
    """The compaction block (Anthropic) or item (OpenAI) a request opens with."""
    first = (body.get("messages") or body.get("input"))[0]
    if first.get("type") == "compaction":
        return dict(first)
    content = first.get("content")
    if isinstance(content, list) and content and content[0].get("type") == "compaction":
        return dict(content[0])
    return None


def _check_dialog(work: Path, compactions: int) -> None:
    """Each provider's block is in the dialog store right after the messages it replaced."""
    records = dialog_records(work)
    at = [i for i, r in enumerate(records) if NATIVE in (r.get("metadata") or {})]
    assert len(at) == compactions
    for i in at:
        kept = records[i]["metadata"][NATIVE]
        assert kept["block"]["type"] == "compaction" and kept["replaced"]
        before = [r["id"] for r in records[:i]]
        assert before[-len(kept["replaced"]) :] == kept["replaced"]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_a_native_session_on_anthropic_holds_the_budget(tmp_path: Path, stream: bool) -> None:
    session = await run_session(tmp_path, stream=stream)
    sim, budget = session.sim, 80_000
    totals = sim.summary()
    assert totals["rejected"] == 0 and totals["calls"] == 22
    assert totals["compactions"] == 2
    assert max(c.prompt_tokens for c in sim.calls) <= budget
    # each compaction is sent back from the next call on, signed as the provider issued it
    made = [i for i, c in enumerate(sim.calls) if c.iterations[0]["type"] == "compaction"]
    for i in made:
        block = _opening(sim.requests[i + 1])
        assert block is not None and block["signature"] and block["content"]
    assert all(_opening(body) is None for body in sim.requests[: made[0] + 1])
    for body in sim.requests:
        edits = body["context_management"]["edits"]
        assert edits == [
            {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
        ]
    _check_dialog(tmp_path, 2)


@requires_2x
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_a_native_session_on_openai_responses_holds_the_budget(
    tmp_path: Path, stream: bool
) -> None:
    session = await run_session(
        tmp_path,
        "responses",
        model="gpt-5",
        budget=12_000,
        lines=60,
        steps=8,
        stream=stream,
        # each output enters at 1,800 tokens, as the session was sized (three compactions)
        tool_result={"recent_max_share": 0.15},
    )
    sim = session.sim
    assert [c.status for c in sim.calls] == [200] * 18
    assert sim.summary()["compactions"] == 3
    assert max(c.prompt_tokens for c in sim.calls) <= 12_000
    made = [i for i, c in enumerate(sim.calls) if c.compaction_tokens]
    for i in made[:-1] + ([made[-1]] if made[-1] + 1 < len(sim.calls) else []):
        item = _opening(sim.requests[i + 1])
        assert item is not None and item["encrypted_content"].startswith("sim1.")
        assert sim.calls[i + 1].dropped_items == 0  # nothing before it: nothing to ignore
        assert "You read logs" in sim.requests[i + 1]["instructions"]  # the system prompt
    # the Responses API on OpenAI's URL gets the session's prompt_cache_key, every call
    keys = {body.get("prompt_cache_key") for body in sim.requests}
    assert len(keys) == 1 and None not in keys
    _check_dialog(tmp_path, 3)


async def test_a_refusal_leaves_the_local_ladder_alone(tmp_path: Path) -> None:
    """Claude Sonnet 4.5 has no server-side compaction: the first request is refused, made
    again as AgentScope made it, and from then on the local ladder alone holds the budget."""
    session = await run_session(
        tmp_path, model="claude-sonnet-4-5", budget=24_000, lines=120, turns=2, steps=10
    )
    sim = session.sim
    refused = [c for c in sim.calls if c.status != 200]
    assert len(refused) == 1 and sim.calls[0] is refused[0]
    assert "compact_20260112" in str(refused[0].error)
    assert len(sim.calls) == 1 + 22
    assert all("context_management" not in body for body in sim.requests[1:])
    assert max(c.prompt_tokens for c in sim.calls) <= 24_000
    assert not any(NATIVE in (r.get("metadata") or {}) for r in dialog_records(tmp_path))
    # the local ladder masked outputs
    last = sim.requests[-1]["messages"]
    texts = [
        "".join(p.get("text", "") for p in b["content"])
        for m in last
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert any(0 <= t.find("<<<TRUNCATED>>>") < 10 for t in texts)


@pytest.mark.parametrize(
    "provider",
    ["anthropic", pytest.param("responses", marks=requires_2x)],
)
async def test_the_block_survives_a_handoff_to_another_worker(
    tmp_path: Path, provider: str
) -> None:
    """Each turn runs on a fresh agent, manager and client loaded from the state the last
    turn left: the block is in that state, and the new worker sends it back."""
    if provider == "anthropic":
        session = await run_session(tmp_path, handoff=True, steps=10)
        per_turn = 11
    else:
        session = await run_session(
            tmp_path, "responses", model="gpt-5", budget=12_000, lines=60, steps=8, handoff=True
        )
        per_turn = 9
    sim = session.sim
    assert all(c.status == 200 for c in sim.calls)
    assert "compacted by" in session.handoffs[0]  # the stand-in, in the saved state
    last_of_turn = sim.requests[per_turn - 1]
    first_of_next = sim.requests[per_turn]  # the new worker's first request
    carried = _opening(last_of_turn)
    assert carried is not None and _opening(first_of_next) == carried


def test_a_stand_in_cut_short_goes_as_text() -> None:
    """The last resort may cut the summary: a stand-in no longer whole is not a block."""
    block = {"type": "compaction", "content": "The user reads logs.", "signature": "c2ln"}
    text = stand_in("anthropic", block, 3)
    call = NativeCall("anthropic", 50_000)
    whole = anthropic_request({"messages": [{"role": "user", "content": text}]}, call)
    assert whole["messages"][0] == {"role": "assistant", "content": [block]}
    assert call.sent_block
    cut = {"messages": [{"role": "user", "content": text[:-5]}]}
    call = NativeCall("anthropic", 50_000)
    assert anthropic_request(cut, call)["messages"] == cut["messages"]
    assert not call.sent_block
