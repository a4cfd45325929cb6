"""Issue 29, item 10: a run's outcome is judged from its WHOLE saved output (line-neutral
core: runs on both lines; the same on the PostgreSQL store: `tests/fleet/test_store_contract`).

A 408,935-byte log whose only error is at line 5,001 was judged from its first and last 64 KB:
the extractive summary and the carried trail both said "`make -k all` → ok". The saved output
is now streamed through (in chunks: a 1 GB output is never held whole)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from agentscope_ctx.core.summary._carry import carried
from agentscope_ctx.core.summary._extractive import extractive_summary
from agentscope_ctx.core.summary._outcome import (
    _EXIT_STATUS,
    ERROR_LINE,
    error_lines,
    exit_status,
    judge,
)
from agentscope_ctx.core.summary._scan import LINE_MAX, scan
from agentscope_ctx.core.truncation._truncation import excerpt_with_notice
from agentscope_ctx.stores._tool_results import ToolResultStore
from tests.core.test_pipeline import Agent, pipeline, run, turn
from tests.support.lines import Msg, TextBlock, ToolResultBlock, ToolUseBlock

ERROR = "src/net/socket.c:812:5: error: 'struct conn' has no member named 'fd'"


def make_log() -> str:
    """`make -k all`: 10,000 lines of compiling, its only error at line 5,001, and a last line
    that looks fine (`make -k` goes on after an error)."""
    lines = [f"cc -O2 -c src/module_{i:05d}.c -o build/module_{i:05d}.o\n" for i in range(10_000)]
    lines[5_000] = ERROR + "\n"
    lines[-1] = "make: Target 'all' not remade because of errors.\n"
    return "".join(lines)


def cut_call(store: ToolResultStore) -> list[Msg]:
    log = make_log()
    path = store.save(log)
    cut = excerpt_with_notice(log, file_path=str(path), max_bytes=3_000)
    use = ToolUseBlock(type="tool_use", id="m1", name="run_shell", input={"command": "make -k all"})
    out = [TextBlock(type="text", text=cut)]
    result = ToolResultBlock(type="tool_result", id="m1", name="run_shell", output=out)
    return [Msg("assistant", [use], "assistant"), Msg("system", [result], "system")]


def test_the_log_is_the_issues_shape() -> None:
    log = make_log()
    assert len(log.encode()) > 2 * 65_536 + 200_000  # the error is far from both ends
    assert log.splitlines().index(ERROR) == 5_000


def test_an_error_in_the_middle_of_a_saved_output_fails_the_run(tmp_path: Path) -> None:
    store = ToolResultStore(tmp_path, 3)
    calls = cut_call(store)
    (block,) = calls[1].get_content_blocks("tool_result")
    outcome = judge(block["output"][0]["text"], store.read_saved)  # type: ignore[index]
    assert (outcome.status, outcome.detail) == ("failed", ERROR)
    msgs = [Msg("user", "Build everything.", "user"), *calls]
    summary = extractive_summary("", msgs, read_saved=store.read_saved)
    assert f"failed: {ERROR}" in summary and "→ ok" not in summary
    block_text, _ = carried(msgs, None, 4_000, read_saved=store.read_saved, internal=store.owns)
    assert f"`make -k all` → failed: {ERROR}" in block_text


async def test_compaction_carries_the_failure_from_the_whole_output(tmp_path: Path) -> None:
    """Through the pipeline: the compaction's carried trail reads the store it was given."""
    pipe, memory, _ = pipeline(tmp_path)  # its output store: tool_result/ under tmp_path
    store = ToolResultStore(tmp_path, 7)
    reads: list[tuple[str, threading.Thread]] = []

    def read(ref: str) -> Iterator[bytes] | None:  # the store's, noting where it is read
        reads.append((ref, threading.current_thread()))
        return store.read_saved(ref)

    pipe.compaction.read_saved = read
    await memory.add(Msg("user", "Build everything.", "user"))
    await memory.add(cut_call(store))
    await memory.add([m for i in range(6) for m in turn(i)])
    await memory.add(Msg("assistant", "The build finished.", "assistant"))
    await memory.add(Msg("user", "Now write the release notes.", "user"))
    report = await run(pipe, Agent(), force=True)
    assert report.compacted >= 3
    assert f"`make -k all` → failed: {ERROR}" in memory.compact_summary
    assert "`make -k all` → ok" not in memory.compact_summary
    # each saved output read once, off the event loop (1 GB takes seconds to read through)
    refs = [ref for ref, _ in reads]
    assert refs and len(refs) == len(set(refs))
    assert all(thread is not threading.current_thread() for _, thread in reads)


# -- the stream: the same judgement as the whole text, whatever the chunks -----------------

FRAGMENTS = st.sampled_from(
    [
        "ok", "compiling", " ", "\n", "\r\n", "→", "E   ValueError: bad", "FAILED test_x",
        "src/a.c:3: error: no", "ERROR x", "panic: y", "fatal: z", "error[E0425]: w",
        "exit code 2", "exit code: 3", "<returncode>1</returncode>", "<returncode>0</returncode>",
        "Command failed: make", "SomeError", "Exception", "reason ValueError", "  ",
    ]
)  # fmt: skip


def chunked(data: bytes, sizes: list[int]) -> list[bytes]:
    """`data` cut into chunks of the given sizes (cycled), which may split a character."""
    chunks, at, k = [], 0, 0
    while at < len(data):
        size = sizes[k % len(sizes)]
        chunks.append(data[at : at + size])
        at, k = at + size, k + 1
    return chunks


@given(st.lists(FRAGMENTS, max_size=40).map("".join), st.lists(st.integers(1, 40), min_size=1))
@example("x" * 10 + "\nE   ValueError: bad\n" + "y" * 10, [7])
@example("<returncode>2</returncode>", [13])  # the status cut between two chunks
@example("Command failed: make\nok", [3])
@example("okexit code 2", [6])  # no word boundary: no status
@example("exit code 2<returncode>1</returncode>", [1])  # "2" might have gone on: "23"
@example("Command failed: make exit code 2", [1])  # the first report is at the start
def test_the_stream_judges_as_the_whole_text(text: str, sizes: list[int]) -> None:
    found = scan(chunked(text.encode(), sizes), ERROR_LINE, _EXIT_STATUS)
    errors = error_lines(text)
    assert found.error == (errors[-1] if errors else None)
    assert found.exit_label() == exit_status(text)
    assert found.whole


def test_a_line_longer_than_line_max_is_judged_by_its_head() -> None:
    head = "E   RuntimeError: the head says it\n"[:-1] + " x" * LINE_MAX + "\nnext line\n"
    found = scan(chunked(head.encode(), [4_096]), ERROR_LINE, _EXIT_STATUS)
    assert found.error is not None and found.error.startswith("RuntimeError: the head says it")
    tail = "ok " * LINE_MAX + "ValueError: past the head\nfine\n"
    assert scan(chunked(tail.encode(), [4_096]), ERROR_LINE, _EXIT_STATUS).error is None


def test_an_output_that_cannot_be_read_whole_is_never_ok(tmp_path: Path) -> None:
    store = ToolResultStore(tmp_path, 3)
    log = make_log()
    path = str(store.save(log))
    cut = excerpt_with_notice(log, file_path=path, max_bytes=3_000)

    def broken(head: bytes) -> Callable[[str], Iterator[bytes]]:
        def read(ref: str) -> Iterator[bytes]:
            yield head
            raise OSError("the disk went away")

        return read

    assert judge(cut, broken(b"cc -c a.c\n")).status == "unseen"
    failed = judge(cut, broken(b"FAILED early\n"))
    assert (failed.status, failed.detail) == ("failed", "FAILED early")


def test_a_saved_output_is_read_once(tmp_path: Path) -> None:
    """The extractive fallback asks again as it shrinks, and the carried trail too: a saved
    output never changes, and is read once."""
    store = ToolResultStore(tmp_path, 3)
    calls = cut_call(store)
    reads: list[str] = []

    def read(ref: str) -> Iterator[bytes] | None:
        reads.append(ref)
        return store.read_saved(ref)

    msgs = [Msg("user", "Build everything.", "user"), *calls]
    for max_chars in (12_000, 6_000, 3_000):
        assert f"failed: {ERROR}" in extractive_summary(
            "", msgs, max_chars=max_chars, read_saved=read
        )
    block_text, _ = carried(msgs, None, 4_000, read_saved=read, internal=store.owns)
    assert f"failed: {ERROR}" in block_text
    assert len(reads) == 1
