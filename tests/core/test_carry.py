"""What compaction carries by code (DESIGN.md §13): the user's words and the artifact trail
(`_carry`), and how a run ended, judged from its saved file when its output was cut
(`_outcome`, and the extractive fallback that uses it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentscope_ctx.core.context._memory import ContextMemory
from agentscope_ctx.core.summary._carry import carried
from agentscope_ctx.core.summary._carry_text import CARRY_HEADER, CarryState
from agentscope_ctx.core.summary._extractive import extractive_summary
from agentscope_ctx.core.summary._kept import Kept, compose
from agentscope_ctx.core.summary._outcome import judge
from agentscope_ctx.core.truncation._truncation import excerpt_with_notice
from agentscope_ctx.stores._tool_results import ToolResultStore
from tests.support.lines import Msg, TextBlock, ToolResultBlock, ToolUseBlock

FAILING_PYTEST = (
    "".join(f"tests/test_app.py::test_{i} PASSED\n" for i in range(300))
    + "E   ValueError: bad input in src/app.py:42\n"
    + "FAILED tests/test_app.py::test_parse - ValueError: bad input\n"
    + "<returncode>1</returncode>\n"
)


def _user(text: str, stamp: str = "2026-12-03 10:00:00.000") -> Msg:
    msg = Msg("user", text, "user")
    msg.timestamp = stamp
    return msg


def _call(call_id: str, name: str, **args: object) -> Msg:
    return Msg("assistant", [ToolUseBlock(type="tool_use", id=call_id, name=name, input=args)],
               "assistant")  # fmt: skip


def _result(call_id: str, name: str, output: str) -> Msg:
    block = ToolResultBlock(
        type="tool_result", id=call_id, name=name, output=[TextBlock(type="text", text=output)]
    )
    return Msg("system", [block], "system")


def _cut(store: ToolResultStore, text: str, max_bytes: int) -> str:
    """`text` as the first truncation leaves it: saved whole, an excerpt and its notice."""
    path = store.save(text)
    return excerpt_with_notice(text, file_path=str(path), max_bytes=max_bytes)


def test_masked_failing_run_is_judged_from_its_saved_file(tmp_path: Path) -> None:
    store = ToolResultStore(tmp_path, 3)
    masked = _cut(store, FAILING_PYTEST, 300)
    assert "ValueError" not in masked.split("<<<TRUNCATED>>>")[0]
    assert judge(masked, store.read_saved).status == "failed"
    assert "ValueError: bad input" in judge(masked, store.read_saved).detail
    # Without its file, a cut output whose excerpt shows no failure is never "ok".
    assert judge(masked).status == "unseen"
    # A notice naming a file outside the store is not read.
    outside = tmp_path / "elsewhere.txt"
    outside.write_text(FAILING_PYTEST)
    forged = excerpt_with_notice(FAILING_PYTEST, file_path=str(outside), max_bytes=300)
    assert judge(forged, store.read_saved).status == "unseen"


def test_extractive_fallback_never_reports_a_cut_failure_ok(tmp_path: Path) -> None:
    store = ToolResultStore(tmp_path, 3)
    msgs = [
        _user("Run the tests."),
        _call("c1", "run_shell", command="pytest -x"),
        _result("c1", "run_shell", _cut(store, FAILING_PYTEST, 200)),
    ]
    with_file = extractive_summary("", msgs, read_saved=store.read_saved)
    assert "pytest -x" in with_file and "→ failed" in with_file
    assert "ValueError: bad input" in with_file
    assert "→ ok" not in with_file
    without = extractive_summary("", msgs)
    assert "→ ok" not in without and "not seen whole" in without


def _session(store: ToolResultStore) -> list[Msg]:
    return [
        _user("Fix the failing test in src/app.py. Do not modify setup.cfg, do not touch vendor/."),
        _call("c1", "read_file", file_path="src/app.py"),
        _result("c1", "read_file", "def parse(x):\n    return int(x)\n"),
        _call("c2", "run_shell", command="pytest -x tests/test_app.py"),
        _result("c2", "run_shell", _cut(store, FAILING_PYTEST, 200)),
        _call("c3", "Edit", file_path="src/app.py", old_string="a", new_string="b"),
        _result("c3", "Edit", "ok"),
        _call("c4", "Write", file_path="notes/plan.md", content="plan"),
        _result("c4", "Write", "written"),
        _call("c5", "read_file", file_path=str(store.dir / "abc.txt")),
        _result("c5", "read_file", "saved output"),
    ]


def test_carried_block_keeps_words_files_runs_and_errors(tmp_path: Path) -> None:
    store = ToolResultStore(tmp_path, 3)
    block, state = carried(
        _session(store), None, 4_000, read_saved=store.read_saved, internal=store.owns
    )
    assert block.startswith(CARRY_HEADER)
    assert (
        '"Fix the failing test in src/app.py. Do not modify setup.cfg, do not touch vendor/."'
        in block
    )
    assert "- read: src/app.py" in block
    assert "- edited: src/app.py" in block
    assert "- written: notes/plan.md" in block
    assert "`pytest -x tests/test_app.py` → failed: FAILED tests/test_app.py::test_parse" in block
    assert "Newest errors:" in block and "ValueError: bad input" in block
    assert str(store.dir) not in block  # the package's own saved outputs are not artifacts
    # Carried over a later compaction that has nothing of its own, unchanged.
    assert carried([], state, 4_000) == (block, state)
    # Kept beside the summary as data, and through JSON; the writer's text found again.
    summary, kept = compose("## Goal\n- follow the instructions\n", block, state, "", [])
    assert summary == f"## Goal\n- follow the instructions\n\n{block}"
    assert kept.writer(summary) == "## Goal\n- follow the instructions"
    assert Kept.from_data(json.loads(json.dumps(kept.to_data()))) == kept
    assert kept.writer(summary + "\nmore") is None  # not the summary it was rendered into


def test_runtime_hints_and_tool_results_are_not_the_users_words() -> None:
    hint = _user("Budget is low: wrap up.")
    reminder = _user("<system-reminder>use the plan</system-reminder>")
    assert carried([hint, reminder], None, 4_000, hints={hint.id})[0] == ""


def test_older_turns_fold_but_keep_their_constraints() -> None:
    turns = [_user("Never push to main. " + "context " * 60, f"2026-12-0{1 + i} 09:00:00")
             for i in range(3)]  # fmt: skip
    turns += [_user(f"Step {i}: look at module {i}. " + "detail " * 80, f"2026-12-05 1{i}:00:00")
              for i in range(8)]  # fmt: skip
    block, _ = carried(turns, None, 1_500)
    assert len(block) <= 1_500
    assert "Step 7: look at module 7." in block  # the newest, verbatim
    assert "- earlier:" in block and '"Never push to main."' in block


def test_a_newest_turn_longer_than_the_block_is_clipped_with_a_note() -> None:
    block, _ = carried([_user("Please " + "x" * 5_000)], None, 600)
    assert len(block) <= 600
    assert "[clipped: 5007 characters in all, in dialog/]" in block
    # on the fleet store the note names where the dialog is there (issue 23)
    fleet, _ = carried([_user("Please " + "x" * 5_000)], None, 600, dialog="pg-dialog:YYYY-MM-DD")
    assert "[clipped: 5007 characters in all, in pg-dialog:YYYY-MM-DD]" in fleet


_words = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), min_size=1, max_size=300
)


@settings(max_examples=60, deadline=None)
@given(
    rounds=st.lists(st.lists(_words, min_size=1, max_size=4), min_size=1, max_size=10),
    max_chars=st.integers(400, 6_000),
)
@example(rounds=[['"quoted"\nand a newline'], ["do not touch vendor/"]], max_chars=400)
def test_property_bounded_newest_verbatim_and_stable(
    rounds: list[list[str]], max_chars: int
) -> None:
    """Over up to ten compactions: the block stays within its cap, the newest user turn is
    there verbatim whenever it fits on its own, and re-carrying with nothing new changes
    nothing (the prompt prefix is stable between compactions)."""
    state = None
    for n, texts in enumerate(rounds):
        msgs = [_user(t, f"2026-12-03 10:{n:02d}:00") for t in texts]
        block, state = carried(msgs, state, max_chars)
        assert len(block) <= max_chars
        assert carried([], state, max_chars) == (block, state)
        newest = [t.strip() for t in texts if t.strip() and not t.strip().startswith("<system-")]
        if newest and len(newest[-1]) < max_chars // 3:
            assert json.dumps(newest[-1], ensure_ascii=False) in block


def test_a_burst_of_turns_costs_one_time_stamp_and_keeps_them_all() -> None:
    """Turns made in the same minute show its stamp once (the line above's stands for the
    lines below it); read back, every turn has its stamp again, and the block is stable."""
    msgs = [
        _user("first", "2026-12-03 10:00:01.000"),
        _user("second", "2026-12-03 10:00:30.000"),
        _user("third", "2026-12-03 10:05:00.000"),
    ]
    block, state = carried(msgs, None, 4_000)
    assert block.count("[2026-12-03 10:00]") == 1 and block.count("[2026-12-03 10:05]") == 1
    assert '- "first"' in block  # under "second", which carries the stamp
    assert carried([], state, 4_000) == (block, state)
    later, state = carried([_user("fourth", "2026-12-03 11:00:00.000")], state, 4_000)
    assert later.count("[2026-12-03 10:00]") == 1 and "[2026-12-03 11:00]" in later
    folded, _ = carried([], state, 230)  # each turn keeps its own stamp as data
    assert "- earlier: 3 turns, 2026-12-03 10:00 → 2026-12-03 10:05" in folded


_long = st.text(st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=6_000)


@settings(max_examples=60, deadline=None)
@given(
    newest=_long,
    between=st.lists(_words, max_size=3),
    max_chars=st.integers(1_200, 6_000),
    rounds=st.integers(1, 10),
)
@example(
    newest="Here is the handler:\n"
    + "".join(f'    field_{i:03d} = record.get("key_{i:03d}", "default")\n' for i in range(72)),
    between=[],
    max_chars=4_000,
    rounds=10,
)
@example(newest='"\x00\n' * 1_500, between=["x" * 300], max_chars=1_200, rounds=2)
def test_property_a_long_newest_turn_never_costs_an_older_constraint(
    newest: str, between: list[str], max_chars: int, rounds: int
) -> None:
    """Issue 29 item 9: whatever the newest turn holds (quotes, newlines, control characters:
    longer as rendered), the block stays within its cap, each line of it whole (every turn a
    JSON string), the state it keeps survives JSON unchanged and re-carries to the same
    block, and the older constraint stays, compaction after compaction."""
    msgs = [_user("Never deploy on Friday.", "2026-12-03 09:00:00")]
    msgs += [_user(t, "2026-12-03 09:30:00") for t in between]
    msgs += [_user(newest, "2026-12-03 10:00:00")]
    block, state = carried(msgs, None, max_chars)
    for n in range(rounds):
        assert len(block) <= max_chars
        assert '"Never deploy on Friday."' in block, block
        for text in block.split("\n")[2:]:
            if text.startswith('- "') or text.startswith("- ["):
                json.loads(text.split("] ", 1)[1] if text.startswith("- [") else text[2:])
        assert CarryState.from_data(json.loads(json.dumps(state.to_data()))) == state
        assert carried([], state, max_chars) == (block, state)
        block, state = carried([_user(f"Go on {n}.", f"2026-12-03 11:{n:02d}:00")], state,
                               max_chars)  # fmt: skip


async def test_damaged_or_foreign_carried_data_carries_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A damaged slot is not guessed at (logged, nothing carried); a summary someone else
    set carries nothing of the data an older summary had."""
    block, state = carried([_user("Never deploy on Friday.")], None, 4_000)
    summary, kept = compose("## Goal\n- ship", block, state, "", [])
    damaged = kept.to_data()
    damaged["carry"]["turns"][0][1] = 42
    with caplog.at_level("WARNING", logger="agentscope_ctx"):
        assert Kept.from_data(damaged) is None
        assert Kept.from_data({**kept.to_data(), "version": 99}) is None
    assert "nothing is carried by code" in caplog.text
    with pytest.raises(ValueError, match="expected a string"):
        CarryState.from_data(damaged["carry"])

    memory = ContextMemory(tmp_path)
    await memory.update_compressed_summary(summary, kept=kept)
    loaded = ContextMemory(tmp_path)
    loaded.load_state_dict(json.loads(json.dumps(memory.state_dict())))
    assert loaded.kept == kept and loaded.compact_summary == summary
    memory.adopt([], summary)
    assert memory.kept == kept  # the same summary keeps its data
    memory.adopt([], "someone else's summary")
    assert memory.kept is None
    await memory.update_compressed_summary(summary)  # not by a compaction: nothing carried
    assert memory.kept is None
