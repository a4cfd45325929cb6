"""The last-resort fit of the summary message (`ladder._summary_fit.fit_summary`): the whole
summary is saved once per fit, whatever the number of cuts it tries; the cut's byte limit
holds its notice, so the head shown is as long as the budget allows (the notice was counted
twice: some 120 tokens cut too many); and the saved file is recorded as the summary's saved
text, not a tool's output (`core.search._saved_summary`), as `cap_writer`'s is."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_ctx.core.ladder._summary_fit import cap_writer, fit_summary
from agentscope_ctx.core.search._saved_summary import SAVED_SUMMARY
from agentscope_ctx.core.summary._carry_text import CarryState
from agentscope_ctx.core.summary._kept import Kept
from agentscope_ctx.core.truncation._truncation import notice_paths
from tests.core.test_pipeline import Agent, attach, pipeline
from tests.support.lines import Msg

DENSE_HEAD = "## Goal\n" + "".join(f"- {k * 7919 % 100003:06x} {k * 104729:x}\n" for k in range(40))
"""Hex figures: more tokens a byte than the plain lines after them, so that a cut in
proportion to the whole leaves too much, and the fit tries again (a file per try before)."""
SUMMARY = DENSE_HEAD + "- the same plain words about the task again\n" * 300
PLAIN = "## Goal\n" + "- the same plain words about the task again\n" * 300
SPARSE_HEAD = (
    "## Goal\n"
    + "- plain words here again and again\n" * 200
    + "".join(f"- {k * 7919 % 100003:06x} {k * 104729:x}\n" for k in range(200))
)
"""Plain lines, then figures: fewer tokens a byte in the head than in the whole, so that a cut
in proportion takes too much (830 tokens too many at a 1,500-token cut, before `_widen`)."""


class Described:
    """The recall's `describe_saved`, recorded: (paths, tool, args) of each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str, str]] = []

    async def __call__(self, paths: list[str], tool: str, args: str) -> None:
        self.calls.append((paths, tool, args))


@pytest.mark.parametrize(
    ("summary", "slack"),
    [(SUMMARY, 50), (PLAIN, 50), (SPARSE_HEAD, 100)],
    ids=["dense_head", "plain", "sparse_head"],
)
async def test_one_fit_saves_the_summary_once_and_cuts_no_more_than_needed(
    tmp_path: Path, summary: str, slack: int
) -> None:
    """Before: 2 files for the dense head; 428, 107 and 829 tokens under the target."""
    pipe, memory, _ = pipeline(tmp_path, max_input_tokens=3_000)
    attach(pipe, Agent())
    described = Described()
    pipe.cutter.describe = described
    await memory.update_compressed_summary(summary)
    await memory.add(Msg("user", "go on", "user"))
    target = await pipe.accountant.calibrated() - 1_500
    assert await fit_summary(memory, pipe.accountant, pipe.cutter, target) == 1
    saved = list((tmp_path / "tool_result").iterdir())
    assert len(saved) == 1 and saved[0].read_text(encoding="utf-8") == summary  # (2 before)
    after = await pipe.accountant.calibrated()
    assert target - slack <= after <= target
    trimmed = memory.trimmed_summary()
    assert trimmed is not None and list(notice_paths(trimmed)) == [str(saved[0])]
    assert described.calls == [([str(saved[0])], SAVED_SUMMARY, "")]
    assert memory.compact_summary == summary  # stored whole


async def test_the_summary_cut_to_its_share_is_recorded_as_the_summarys_text(
    tmp_path: Path,
) -> None:
    pipe, memory, _ = pipeline(tmp_path)
    described = Described()
    pipe.cutter.describe = described
    kept = await cap_writer(
        memory, pipe.accountant.counter, pipe.cutter, SUMMARY, Kept(CarryState(), (), ""), 800, 1.0
    )
    (saved,) = (tmp_path / "tool_result").iterdir()
    assert kept.shown is not None and list(notice_paths(kept.shown)) == [str(saved)]
    assert described.calls == [([str(saved)], SAVED_SUMMARY, "")]


@pytest.mark.parametrize("writer", [PLAIN, SPARSE_HEAD], ids=["plain", "sparse_head"])
async def test_the_writers_text_is_cut_no_more_than_its_share_needs(
    tmp_path: Path, writer: str
) -> None:
    """`cap_writer` widens a cut in proportion that took too much (before: the sparse head
    shown 307 tokens under its cap of 1,000)."""
    pipe, memory, _ = pipeline(tmp_path)
    counter = pipe.accountant.counter
    cap = 1_000
    kept = await cap_writer(
        memory, counter, pipe.cutter, writer, Kept(CarryState(), (), ""), cap, 1.0
    )
    assert kept.shown is not None
    msg = memory.summary_message_for(kept.shown_summary(writer))
    assert msg is not None
    assert cap - 100 <= await counter.count_msg(msg) <= cap
    assert len(list((tmp_path / "tool_result").iterdir())) == 1
