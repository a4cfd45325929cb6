"""Issue 19.1: what `read_file` showed stays reachable byte for byte once it is cut harder.

A `read_file` output's notice points at the file that was read. When the output is cut
harder (second truncation, masking, the last-resort fit) after the model saw it, the output
itself is saved to `tool_result/` first and cut from there (`Cutter`, `_cuts.py`): the chain
then gives back what the model was shown, even after the file was edited, and
`search_history` finds it. The property and the agent test run on both lines (the agent
test on the installed line: `line`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentscope_ctx import ContextConfig
from agentscope_ctx.core.config._config import ToolResultConfig
from agentscope_ctx.core.ladder._cuts import Cutter
from agentscope_ctx.core.truncation._truncation import parse_notice, utf8_len
from agentscope_ctx.recall._read_file import FileReader
from agentscope_ctx.stores._tool_results import ToolResultPolicy, ToolResultStore
from tests.support.agent_line import Line
from tests.support.chain import check_masked_read_chain, follow_chain
from tests.support.lines import Msg, TextBlock, ToolResultBlock, text_of

LINES = "".join(f"line {i:04d} alphaorig{i} of the original file 中文 😀\n" for i in range(3_000))
EDITED = LINES.replace("alphaorig", "betaedit")


def _result(call_id: str, text: str) -> Msg:
    output = [TextBlock(type="text", text=text)]
    block = ToolResultBlock(type="tool_result", id=call_id, name="read_file", output=output)
    return Msg("system", [block], "system")


def _output(msg: Msg | list[Any] | None) -> str:
    content = msg.content if isinstance(msg, Msg) else msg
    assert isinstance(content, list)
    return str(content[0]["output"][0]["text"])


_TEXTS = st.text(st.sampled_from("aé中😀\n\r z"), min_size=1, max_size=3_000)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    original=_TEXTS,
    edited=st.text(st.sampled_from(["x", "\n", "文"]), max_size=500),
    start=st.integers(1, 40),
    level=st.sampled_from(["old", "mask", "fit"]),
)
@example(original="a\n" * 1_500, edited="", start=1, level="mask")
@example(original="😀" * 2_000, edited="x", start=1, level="old")
async def test_a_harder_cut_of_read_file_chains_back_to_what_was_shown(
    tmp_path_factory: Any, original: str, edited: str, start: int, level: str
) -> None:
    """For any file and position: a `read_file` output cut harder after the file changed
    chains back (through `read_file`) to the output exactly, and the file is never copied:
    what is saved is the output."""
    root = tmp_path_factory.mktemp("snap")
    config = ToolResultConfig(recent_max_bytes=2_048, old_max_bytes=1_024)
    policy = ToolResultPolicy(config)
    store = ToolResultStore(root / "ctx", 7)
    reader = FileReader([root], policy, store_dir=store.dir)
    path = root / "work.txt"
    path.write_bytes(original.encode("utf-8"))
    lines = original.count("\n") + 1
    shown = text_of(await reader.read_file(str(path), min(start, lines), 0))
    if shown.startswith("Error:") or shown.endswith("is empty)"):
        return
    path.write_bytes(edited.encode("utf-8"))  # the agent edits the file afterwards

    cutter = Cutter(store, policy)
    msg = _result("c1", shown)
    calls = {"c1": ("read_file", {"file_path": str(path)})}
    if level == "fit":
        cut = await cutter.cut(msg, calls, old=True, everything=True)
    else:
        cut = await cutter.cut(msg, calls, old=True, mask=level == "mask")
    assert cut.view is None
    after = shown if cut.content is None else _output(cut.content)

    async def read(p: str, line: int, offset: int) -> str:
        return text_of(await reader.read_file(p, line, offset))

    if after == shown:  # nothing shrank: the model still has all it was shown
        assert utf8_len(shown) <= (1_024 if level == "old" else 768) or level == "fit"
        return
    assert await follow_chain(after, read) == shown
    if parse_notice(shown) is not None:
        parsed = parse_notice(after)
        assert parsed is not None and store.owns(parsed[1].file_path)
        assert Path(parsed[1].file_path).read_bytes() == shown.encode("utf-8")
        again = await cutter.cut(_result("c1", after), calls, old=True, mask=True)
        saved = sorted(store.dir.iterdir())
        chained = after if again.content is None else _output(again.content)
        assert await follow_chain(chained, read) == shown  # cut again: from the snapshot
        assert sorted(store.dir.iterdir()) == saved  # and no second copy


async def test_a_fresh_read_file_output_is_not_copied(tmp_path: Path) -> None:
    """Entering the context (a fresh cut, before the model saw it), a `read_file` output is
    cut from its own notice: nothing is copied, the chain goes on in the file."""
    config = ToolResultConfig(recent_max_bytes=8_000, old_max_bytes=1_024)
    policy = ToolResultPolicy(config)
    store = ToolResultStore(tmp_path / "ctx", 7)
    reader = FileReader([tmp_path], policy, store_dir=store.dir)
    path = tmp_path / "work.txt"
    path.write_text(LINES, encoding="utf-8")
    shown = text_of(await reader.read_file(str(path)))
    calls = {"c1": ("read_file", {"file_path": str(path)})}
    smaller = ToolResultConfig(recent_max_bytes=2_000, old_max_bytes=1_024)
    cutter = Cutter(store, ToolResultPolicy(smaller))
    cut = await cutter.cut(_result("c1", shown), calls, old=False)
    parsed = parse_notice(_output(cut.content))
    assert parsed is not None and parsed[1].file_path == str(path)
    assert not store.dir.exists()


def test_bench_read_snapshot_tiny(capsys: Any) -> None:
    from benchmarks.pipeline import read_snapshot as bench_read_snapshot

    rows = bench_read_snapshot.main(rounds=3)
    assert set(rows) == {"workspace_snapshot", "store_retruncate"}
    for row in rows.values():
        assert row["output_bytes"] > 30_000 and row["median_us"] > 0 and row["p90_us"] > 0
    assert "mask cut median" in capsys.readouterr().out


@pytest.mark.parametrize("edit", [True, False], ids=["edited", "unchanged"])
async def test_i19_1_masked_read_file_result_stays_reachable(
    line: Line, tmp_path: Path, edit: bool
) -> None:
    """The agent reads a 3,000-line workspace file, the file is edited (or not), pressure
    masks the old result: its notice then leads to exactly what the agent saw, and
    `search_history` finds a word of it."""
    work = tmp_path / "big.txt"
    work.write_text(LINES, encoding="utf-8")

    def run_shell(command: str) -> str:
        """Run a shell command.

        Args:
            command (str): the command line.
        """
        return "".join(f"{command}: build step {i} INFO ok\n" for i in range(90))

    config = ContextConfig(
        working_dir=tmp_path / "ctx",
        max_input_tokens=6_000,
        read_roots=[tmp_path],
        # 0.15: the excerpts the session was sized for (the notice chain fits `max_iters`)
        tool_result={
            "recent_n": 1,
            "mask_after": 2,
            "recent_max_bytes": 8_000,
            "recent_max_share": 0.15,
        },
        summarizer={"enabled": False},  # type: ignore[arg-type]
        token_counter="cl100k_base",
    )

    def edit_file(_: Any) -> Any:
        if edit:
            work.write_text(EDITED, encoding="utf-8")
        return line.tool_call("run_shell", call_id="s0", command="make 0")

    seen: dict[str, str] = {}  # each tool output as the model first saw it
    chain: list[str] = []  # the masked read_file result, then the reads that follow it

    def look() -> tuple[list[dict[str, Any]], str]:
        """Note each tool output of the prompt just sent (as the provider got it) as first
        seen; the prompt, and its newest tool output's call id."""
        messages = line.sent(model.calls[-1])
        ids = [str(m["tool_call_id"]) for m in messages if m.get("role") == "tool"]
        for call_id in ids:
            seen.setdefault(call_id, _content(messages, call_id))
        return messages, ids[-1]

    def follow(_: Any) -> Any:
        """The model's policy once it searched: follow the masked read_file result's
        notice with read_file, through the agent, until no notice is left."""
        messages, newest = look()
        chain.append(_content(messages, "r1") if newest == "q1" else seen[newest])
        parsed = parse_notice(chain[-1])
        if parsed is None:
            return line.text("done")
        notice = parsed[1]
        return line.tool_call(
            "read_file",
            call_id=f"f{len(chain)}",
            file_path=notice.file_path,
            start_line=notice.next.line,
            line_offset=notice.next.offset,
        )

    def search(_: Any) -> Any:
        look()
        return line.tool_call("search_history", call_id="q1", query="alphaorig5", tool="read_file")

    model = line.fake_model(
        [
            line.tool_call("read_file", call_id="r1", file_path="big.txt"),
            edit_file,
            *(
                line.tool_call("run_shell", call_id=f"s{i}", command=f"make {i}")
                for i in range(1, 6)
            ),
            search,
        ],
        default=follow,
    )
    session = line.session(config, None, [run_shell], model=model, sys_prompt="You work on files.")
    if line.is_1x:
        session.agent.max_iters = 20
    manager = session.manager
    try:
        assert await session.turn("Read big.txt, then build.") == "done"
        results = {
            b["id"]: b
            for m in session.memory.messages()
            for b in m.get_content_blocks("tool_result")
        }
    finally:
        await manager.close()

    # What the model was shown of read_file, as sent (the prompt right after the read).
    shown = _content(line.sent(model.calls[1]), "r1")
    assert parse_notice(shown) is not None and "alphaorig5 " in shown
    # The agent followed the masked result's notice through its own read_file: the excerpts
    # it was shown concatenate back to what it saw of the file first; so does the masked
    # output's notice, through the snapshot.
    masked = text_of_result(results["r1"])

    async def read(path: str, start: int, offset: int) -> str:
        return text_of(await manager.reader.read_file(path, start, offset))

    snapshot = await check_masked_read_chain(
        chain, masked, shown, store_dir=manager.store.dir, read=read
    )
    assert (work.read_text(encoding="utf-8") == EDITED) is edit

    found = text_of_result(results["q1"])
    assert "alphaorig5" in found and snapshot.name in found, found
    assert "saved output of read_file(file_path=" in found, found


def _content(messages: list[dict[str, Any]], call_id: str) -> str:
    """The text of the tool message answering `call_id` in a formatted prompt."""
    found = [m["content"] for m in messages if m.get("tool_call_id") == call_id]
    assert len(found) == 1
    content = found[0]
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


def text_of_result(block: Any) -> str:
    output = block["output"]
    return output if isinstance(output, str) else "".join(b["text"] for b in output)
