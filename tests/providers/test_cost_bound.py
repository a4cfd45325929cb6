"""The cost benchmarks' append-only bound (`benchmarks.cost.bound`, issue 45): a call reads at
most all of the previous prompt, and never what the session added since, whether the prompt
grew by it or a rung made it smaller. The old bound, ``min(previous, prompt)``, counted a
shrunken call's new tool output as read from the cache."""

from __future__ import annotations

import asyncio
from typing import Any

from benchmarks.cost import bound

TOOLS = [{"name": "view_text_file", "input_schema": {"type": "object"}}]


def _body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"system": "You are a reviewer.", "tools": TOOLS, "messages": list(messages)}


def _call(n: int) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": f"c{n}", "input": {}}]}


def _result(n: int, text: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": f"c{n}", "content": text}
    return {"role": "user", "content": [block]}


USER = {"role": "user", "content": "Task 1: review these files"}
LONG, MASKED = "line of output\n" * 300, "[masked: saved as tool_result/c1.txt]"

BODIES = [
    _body(USER),
    _body(USER, _call(1), _result(1, LONG)),
    # the ladder masked the first output as the second arrived: the prompt shrank
    _body(USER, _call(1), _result(1, MASKED), _call(2), _result(2, LONG)),
    _body(USER, _call(1), _result(1, MASKED), _call(2), _result(2, LONG), _call(3)),
]


def test_added_counts_new_messages_not_rewrites() -> None:
    pieces = [bound.pieces(b) for b in BODIES]
    assert bound.added([], pieces[0]) == len(pieces[0])
    assert bound.added(pieces[0], pieces[1]) == 2
    # the masked output holds the previous prompt's call id: a rewrite, not new
    assert bound.added(pieces[1], pieces[2]) == 2
    assert bound.added(pieces[2], pieces[3]) == 1
    assert bound.added(pieces[3], pieces[3]) == 0  # the same request again: nothing new
    # a compaction: the summary is the run's rewrite, not something the session added
    summary = {"role": "user", "content": "<compact_summary>Read one file.</compact_summary>"}
    compacted = bound.pieces(_body(summary, _call(2), _result(2, LONG)))
    assert bound.added(pieces[1], compacted) == 2


def test_a_shrunken_call_writes_what_it_added() -> None:
    from tests.support.chat_sim import encode

    prompts = [sum(len(encode(p)) for p in bound.pieces(b)) for b in BODIES]
    assert prompts[2] < prompts[1] + 100  # masking made room for the new output
    added = bound.added_tokens(BODIES, prompts)
    reads = bound.reads(prompts, added)
    assert reads[0] == 0 and reads[1] == prompts[0] and reads[3] == prompts[2]  # appended
    # call 3 added a ~1,200-token output: it cannot be read, however the prompt shrank
    assert added[2] > 1_000
    assert reads[2] == prompts[2] - added[2] < min(prompts[1], prompts[2]) - 1_000


def test_a_call_after_the_cache_expired_reads_nothing_at_the_bound() -> None:
    """`paced` (`benchmarks.cost.providers`): the first call after a pause past the cache's
    TTL finds nothing to read, even append-only; the calls after it read as before."""
    prompts, added = [1_000, 1_500, 2_000, 2_500], [1_000, 500, 500, 500]
    assert bound.reads(prompts, added) == [0, 1_000, 1_500, 2_000]
    assert bound.reads(prompts, added, cold={2}) == [0, 1_000, 0, 2_000]


def test_the_meter_bound_leaves_out_the_new_pieces() -> None:
    from agentscope_ctx import TokenCounter
    from benchmarks.cost.meter import PromptMeter, encoding

    async def run() -> list[Any]:
        meter = PromptMeter(TokenCounter("cl100k_base"), encoding())
        for body in BODIES:
            await meter.measure(bound.messages_of(body), TOOLS)
        return meter.calls

    calls = asyncio.run(run())
    first, grown, shrunk, appended = calls
    assert grown.bound == first.tokens and appended.bound == shrunk.tokens
    new = shrunk.tokens - shrunk.bound
    assert new > 1_000 and shrunk.bound < min(grown.tokens, shrunk.tokens) - 1_000
    assert all(c.prefix <= c.bound for c in calls)
