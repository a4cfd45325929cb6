"""The last-resort fit of the summary message (`ladder._summary_fit.fit_summary`): the whole
summary is saved once per fit, whatever the number of cuts it tries; the cut's byte limit
holds its notice, so the head shown is as long as the budget allows (the notice was counted
twice: some 120 tokens cut too many); and the saved file is recorded as the summary's saved
text, not a tool's output (`core.search._saved_summary`), as `cap_writer`'s is. Below, what
each of the two keeps of the loop they share: a summary within its target left whole, the
long-term note left out first, a store that cannot save (`cap_writer` shows the whole, the
last resort a marked cut), the least cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_ctx.core._pipeline import ContextPipeline
from agentscope_ctx.core.context._memory import ContextMemory
from agentscope_ctx.core.ladder._cuts import _MASK_BYTES, unsaved_excerpt
from agentscope_ctx.core.ladder._summary_fit import cap_writer, fit_summary
from agentscope_ctx.core.search._saved_summary import SAVED_SUMMARY
from agentscope_ctx.core.summary._carry_text import CarryState
from agentscope_ctx.core.summary._kept import Kept
from agentscope_ctx.core.truncation._truncation import excerpt_with_notice, notice_paths
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


@pytest.mark.parametrize(
    "writer", [PLAIN, SPARSE_HEAD, SUMMARY], ids=["plain", "sparse_head", "dense_head"]
)
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


# -- what each caller keeps of the loop they share ----------------------------------------

TAIL = "\n## Carried\n- the user said: keep the logs\n"
"""What code carried after the writer's text (`Kept.tail`): `cap_writer` keeps it whole."""


async def _fit(
    tmp_path: Path, summary: str, less: int, kept: Kept | None = None, note: str | None = None
) -> tuple[ContextPipeline, ContextMemory, Described, int]:
    """`fit_summary` on `summary` and the user's "go on" at 3,000 tokens, `less` tokens under
    the prompt as it is: (pipeline, memory, describe calls, target), after the fit."""
    pipe, memory, _ = pipeline(tmp_path, max_input_tokens=3_000)
    attach(pipe, Agent())
    described = Described()
    pipe.cutter.describe = described
    await memory.update_compressed_summary(summary, kept=kept)
    memory.offer_long_term(note)
    await memory.add(Msg("user", "go on", "user"))
    target = await pipe.accountant.calibrated() - less
    await fit_summary(memory, pipe.accountant, pipe.cutter, target)
    return pipe, memory, described, target


def _unsaved(tmp_path: Path) -> None:
    """`tool_result/` cannot be written: a file stands where the folder would be."""
    (tmp_path / "tool_result").write_text("not a folder\n", encoding="utf-8")


async def test_a_summary_within_its_target_or_its_share_is_left_whole(tmp_path: Path) -> None:
    pipe, memory, described, _ = await _fit(tmp_path, PLAIN, -5)
    assert memory.trimmed_summary() is None and memory.summary_message() is not None
    kept = Kept(CarryState(), (), "")
    counter = pipe.accountant.counter
    assert await cap_writer(memory, counter, pipe.cutter, PLAIN, kept, 5_000, 1.0) is kept
    assert not (tmp_path / "tool_result").exists() and described.calls == []


async def _held(tmp_path: Path, summary: str) -> Kept:
    """What a compaction at 4,000 tokens keeps of `summary` (its writer's text, then `TAIL`):
    the writer's text held to a share of 1,000 tokens (`cap_writer`), saved under `tmp_path`."""
    pipe, memory, _ = pipeline(tmp_path)
    counter = pipe.accountant.counter
    kept = Kept(CarryState(), (), TAIL)
    kept = await cap_writer(memory, counter, pipe.cutter, summary, kept, 1_000, 1.0)
    assert kept.shown is not None
    return kept


@pytest.mark.parametrize("held", [False, True], ids=["whole", "held_to_its_share"])
async def test_leaving_the_long_term_note_out_may_be_enough(tmp_path: Path, held: bool) -> None:
    """The first step of the fit: the note left out (a pointer to MEMORY.md instead), the
    summary shown as it was (held to its share, or whole), nothing saved."""
    note = "remember: " + "the user likes short answers. " * 100
    summary = PLAIN + TAIL
    kept = await _held(tmp_path / "cap", summary) if held else None
    _, memory, described, _ = await _fit(tmp_path, summary, 5, kept=kept, note=note)
    text = str(memory.summary_message().content)  # type: ignore[union-attr]
    assert "the user likes short answers" not in text and "MEMORY.md" in text
    assert (kept.shown_summary(summary) if kept else summary) in text
    assert not (tmp_path / "tool_result").exists() and described.calls == []


async def test_a_summary_held_to_its_share_is_cut_again_from_its_whole(tmp_path: Path) -> None:
    """The fit measures the summary as shown (the writer's text held to its share,
    `Kept.shown`) first, and cuts the whole summary (the carried tail too) when that is over:
    a second file, the whole summary's, beside the writer's text `cap_writer` saved."""
    summary = PLAIN + TAIL
    kept = await _held(tmp_path / "cap", summary)
    pipe, memory, described, target = await _fit(tmp_path, summary, 50, kept=kept)
    (saved,) = (tmp_path / "tool_result").iterdir()
    assert saved.read_text(encoding="utf-8") == summary
    trimmed = memory.trimmed_summary()
    assert trimmed is not None and list(notice_paths(trimmed)) == [str(saved)]
    assert trimmed.startswith(PLAIN[:200]) and TAIL not in trimmed
    assert target - 50 <= await pipe.accountant.calibrated() <= target
    assert described.calls == [([str(saved)], SAVED_SUMMARY, "")]


@pytest.mark.parametrize("cap", [100, 150])
async def test_under_the_notice_alone_the_share_gets_the_least_cut(
    tmp_path: Path, cap: int
) -> None:
    """A share smaller than the notice and the guide: the writer's text is shown at its
    least (the notice and a character or so, as `_MASK_BYTES` cuts), saved once; and the
    first repeat of that cut ends the tries, as in `fit_summary` (`cap_writer` lost that stop
    in 52d1687 and tried every byte limit down to `_MASK_BYTES`, each giving the same cut: at
    150, 188 messages counted, now 3)."""
    pipe, memory, _ = pipeline(tmp_path)
    counter = pipe.accountant.counter
    before = sum(counter.cache_info())
    kept = await cap_writer(
        memory, counter, pipe.cutter, PLAIN, Kept(CarryState(), (), ""), cap, 1.0
    )
    (saved,) = (tmp_path / "tool_result").iterdir()
    assert kept.shown == excerpt_with_notice(PLAIN, max_bytes=_MASK_BYTES, file_path=str(saved))
    assert sum(counter.cache_info()) - before < 10  # (messages counted, one a try)


async def test_a_store_that_cannot_save_leaves_the_writers_text_whole(tmp_path: Path) -> None:
    """`cap_writer` cuts nothing it has not saved: the summary is shown whole, as with no
    share, and the last-resort fit still holds the budget."""
    _unsaved(tmp_path)
    pipe, memory, _ = pipeline(tmp_path)
    described = Described()
    pipe.cutter.describe = described
    kept = Kept(CarryState(), (), "")
    counter = pipe.accountant.counter
    assert await cap_writer(memory, counter, pipe.cutter, PLAIN, kept, 1_000, 1.0) is kept
    assert described.calls == []


@pytest.mark.parametrize("less", [1_500, 3_500], ids=["a_head", "at_its_least"])
async def test_a_store_that_cannot_save_shows_a_marked_cut_at_the_last_resort(
    tmp_path: Path, less: int
) -> None:
    """`fit_summary` must fit: it shows the head and a note that the rest is kept in memory
    (`unsaved_excerpt`, no notice: no file to read on from), as the cutter shows any part it
    could not save; at its least (a target no cut reaches), the whole message's (`fit_summary`'s
    last step: the guide and the pointer to MEMORY.md go too)."""
    _unsaved(tmp_path)
    pipe, memory, described, target = await _fit(tmp_path, PLAIN, less)
    trimmed = memory.trimmed_summary()
    assert trimmed is not None and "could not be saved" in trimmed
    assert list(notice_paths(trimmed)) == [] and described.calls == []
    if less == 1_500:
        assert target - 50 <= await pipe.accountant.calibrated() <= target
    else:
        whole = memory.whole_summary_message()
        assert whole is not None and trimmed == unsaved_excerpt(whole.content, _MASK_BYTES)
    assert memory.compact_summary == PLAIN
