"""Pinned messages and their units (`core/context/_pins.py`; line-neutral core: runs on both lines).

Issue 29, item 6: pins whose messages share a tool-call id made each pipeline run cubic (1.x:
200 messages 1.2 s, 400 -> 8.1 s, 800 -> 75 s): every pin over `pin_max_share` walked its
whole unit again, and each step of that walk went through every message of the call id. The
units are now found once (union-find). The tests count the work (reads of the messages' ids,
which every walk does), never the time; the growth in seconds is in `python -m benchmarks
pins`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from agentscope_ctx.core.context._pins import PIN_MARK, protected, units
from benchmarks.pipeline.pins import shared_calls, walked_pins
from tests.core.test_pipeline import Agent, pipeline, run
from tests.support.lines import Msg, ToolResultBlock, ToolUseBlock


class CountedMsg(Msg):  # type: ignore[misc, valid-type]
    """A message that counts the reads of its id: the unit of work of every walk over
    messages, calls and results (the walks read ids, never the time)."""

    reads = 0

    @property  # type: ignore[misc]
    def id(self) -> str:
        CountedMsg.reads += 1
        return self._counted_id  # type: ignore[no-any-return]

    @id.setter
    def id(self, value: str) -> None:
        self._counted_id = value


def shared(n: int) -> list[Msg]:
    """`n` pinned calls and results sharing one call id (one unit), their ids counted."""
    return shared_calls(n, make=CountedMsg)


def reads_of_protected(n: int) -> int:
    msgs = shared(n)
    counts = {str(m.id): 50 for m in msgs}
    CountedMsg.reads = 0
    kept, dropped = protected(msgs, counts, 1_000)  # the unit is over: each pin is dropped
    assert kept == set() and dropped == n
    return CountedMsg.reads


def test_pins_sharing_a_call_id_are_found_in_linear_work() -> None:
    """Before: 100 -> 200 -> 400 pins read ids ~8x more at each doubling (cubic)."""
    work = [reads_of_protected(n) for n in (100, 200, 400)]
    assert work[1] <= 2.2 * work[0] and work[2] <= 2.2 * work[1], work


async def test_a_pipeline_run_over_pins_sharing_a_call_id_is_near_linear(tmp_path: Path) -> None:
    """The whole run (the ladder's cuts, compaction, the fit), which asks for the pins several
    times: its work grows about as the messages do."""
    work = []
    for n in (100, 200, 400):
        pipe, memory, _ = pipeline(tmp_path / str(n), max_input_tokens=4_000)
        await memory.add(shared(n))
        CountedMsg.reads = 0
        await run(pipe, Agent())
        work.append(CountedMsg.reads)
    assert work[1] <= 2.5 * work[0] and work[2] <= 2.5 * work[1], work


# -- the same units and pins as the walk they replace (`walked_pins`) -------------------------


MESSAGES = st.lists(
    st.tuples(
        st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=3),  # its call ids
        st.booleans(),  # a call (or a result)
        st.booleans(),  # pinned
        st.integers(0, 300),  # its tokens
    ),
    max_size=14,
)


def build(spec: list[tuple[list[str], bool, bool, int]]) -> tuple[list[Msg], dict[str, int]]:
    msgs: list[Msg] = []
    counts: dict[str, int] = {}
    for calls, is_call, pinned, tokens in spec:
        blocks: list[Any] = [
            ToolUseBlock(type="tool_use", id=c, name="t", input={})
            if is_call
            else ToolResultBlock(type="tool_result", id=c, name="t", output=[])
            for c in calls
        ]
        msg = Msg("bot", blocks or "text", "assistant", metadata={PIN_MARK: pinned})
        msgs.append(msg)
        counts[msg.id] = tokens
    return msgs, counts


@given(MESSAGES, st.integers(0, 1_500))
@example([(["a"], True, True, 100), (["a"], False, False, 100), (["a"], True, True, 100)], 150)
def test_protected_keeps_what_the_walk_kept(
    spec: list[tuple[list[str], bool, bool, int]], max_tokens: int
) -> None:
    msgs, counts = build(spec)
    assert protected(msgs, counts, max_tokens) == walked_pins(msgs, counts, max_tokens)
    unit_of = units(msgs)
    for call in "abcde":  # every message of a call id is in one unit
        holders = {unit_of[m.id] for m, s in zip(msgs, spec, strict=True) if call in s[0]}
        assert len(holders) <= 1
