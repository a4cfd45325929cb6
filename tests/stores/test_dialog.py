"""Tests for `DialogStore`: round trips, idempotency, torn lines, concurrent processes, errors."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import multiprocessing
import os
import re
import sys
import tempfile
import time
from collections import Counter
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentscope_ctx.stores._dialog as dialog_module
from agentscope_ctx.core._errors import ContextUsageError, PersistenceError
from agentscope_ctx.stores._dialog import DialogStore
from tests.support.lines import Msg, TextBlock, ToolResultBlock, ToolUseBlock

ROOT = Path(__file__).resolve().parents[2]


def make_msg(msg_id: str, text: str = "hi", day: str = "2026-12-02", **kw: Any) -> Msg:
    msg = Msg(name=kw.pop("name", "user"), content=text, role=kw.pop("role", "user"), **kw)
    msg.id = msg_id
    msg.timestamp = f"{day} 17:01:49.123"
    return msg


def tool_pair(call_id: str, day: str) -> list[Msg]:
    use = Msg(
        "assistant",
        [
            TextBlock(type="text", text="让我看看 🔍\r\nline two"),
            ToolUseBlock(
                type="tool_use", id=call_id, name="read_file", input={"file_path": "a.py"}
            ),
        ],
        "assistant",
        timestamp=f"{day} 09:00:00.000",
    )
    result = Msg(
        "system",
        [
            ToolResultBlock(
                type="tool_result",
                id=call_id,
                name="read_file",
                output=[TextBlock(type="text", text="def f():\r\n    return '✓'\n")],
            )
        ],
        "system",
        timestamp=f"{day} 09:00:01.000",
    )
    return [use, result]


def lines_of(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return data.split(b"\n")[:-1]


# -- round trip -----------------------------------------------------------------------------

DAYS = ["2026-11-30", "2026-12-01", "2026-12-02"]
texts = st.text(max_size=40)
text_block = st.builds(lambda t: TextBlock(type="text", text=t), texts)
tool_use_block = st.builds(
    lambda i, n, v: ToolUseBlock(type="tool_use", id=i, name=n, input={"arg": v, "n": [1, 2]}),
    st.text(min_size=1, max_size=8),
    st.sampled_from(["read_file", "shell", "搜索"]),
    texts,
)
tool_result_block = st.builds(
    lambda i, out: ToolResultBlock(type="tool_result", id=i, name="shell", output=out),
    st.text(min_size=1, max_size=8),
    st.one_of(texts, st.lists(text_block, max_size=2)),
)
contents = st.one_of(
    texts,
    st.sampled_from(["你好，世界 🌏", "a\r\nb\rc\n", "\u2028sep\u2029", "\x00\x85"]),
    st.lists(st.one_of(text_block, tool_use_block, tool_result_block), max_size=3),
)


@st.composite
def message_lists(draw: st.DrawFn) -> list[Msg]:
    msgs = []
    for n in range(draw(st.integers(0, 12))):
        role: Literal["user", "assistant", "system"] = draw(
            st.sampled_from(["user", "assistant", "system"])
        )
        msg = Msg(name=draw(texts), content=draw(contents), role=role)
        msg.id = f"m{n}"
        day = draw(st.sampled_from(DAYS))
        msg.timestamp = (
            f"{day} {draw(st.integers(0, 23)):02d}:{draw(st.integers(0, 59)):02d}:00.000"
        )
        msg.metadata = draw(st.sampled_from([{}, {"k": "v", "n": 1.5, "nested": [None, True]}]))
        msgs.append(msg)
    return msgs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=message_lists())
def test_round_trip_property(msgs: list[Msg]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = DialogStore(Path(tmp))
        assert asyncio.run(store.append(msgs)) == len(msgs)
        read, report = store.read()
        assert report.bad_lines == []
        assert [m.to_dict() for m in read] == [m.to_dict() for m in msgs]  # append order
        # each message goes to its own day's file, or to the newest one already written
        filed = [max(m.timestamp[:10] for m in msgs[: i + 1]) for i in range(len(msgs))]
        assert store.days() == sorted(set(filed))
        for day in store.days():
            day_msgs, _ = store.read(day)
            assert [m.id for m in day_msgs] == [
                m.id for m, d in zip(msgs, filed, strict=True) if d == day
            ]
        for path in store.dialog_dir.glob("*.jsonl"):
            for line in lines_of(path):
                assert json.loads(line)["v"] == 1


async def test_round_trip_tool_blocks_and_text(tmp_path: Path) -> None:
    store = DialogStore(tmp_path)
    msgs = [make_msg("u1", "修复这个测试 🙏\r\nplease"), *tool_pair("call_1", "2026-12-02")]
    assert await store.append(msgs) == 3
    read, report = await store.aread()
    assert [m.to_dict() for m in read] == [m.to_dict() for m in msgs]
    assert report.files == ["2026-12-02.jsonl"] and report.messages == 3
    raw = (store.dialog_dir / "2026-12-02.jsonl").read_text(encoding="utf-8")
    assert "修复这个测试 🙏" in raw  # written unescaped
    assert raw.count("\n") == 3  # \r\n inside text is escaped, never a line break


async def test_lone_surrogate_round_trips(tmp_path: Path) -> None:
    store = DialogStore(tmp_path)
    msg = make_msg("s1", "bad \ud800 half")
    assert await store.append([msg]) == 1
    read, report = store.read()
    assert report.bad_lines == [] and read[0].content == "bad \ud800 half"


async def test_surrogate_pairs_of_code_points_round_trip(tmp_path: Path) -> None:
    """A pair of surrogate code points stays two code points (JSON reads their escapes as
    one character), beside the character they would make, lone halves, in keys and values."""
    pair, astral = "\ud800\udc00", "\U00010000"
    texts = [pair, f"{astral}{pair} \udc00\ud800 {pair}{astral}", f"\udbff{pair}\udfff"]
    msg = make_msg("p1", texts[1])
    msg.metadata = {pair: [texts[0], {"k": texts[2]}], astral: texts[1], "n": 1}
    other = make_msg("p2", [TextBlock(type="text", text=t) for t in texts])
    store = DialogStore(tmp_path)
    assert await store.append([msg, other]) == 2
    read, report = store.read()
    assert report.bad_lines == []
    assert [m.to_dict() for m in read] == [msg.to_dict(), other.to_dict()]
    # a reader that does not know `split` reads each pair as its one character, as before
    record = json.loads(lines_of(store.dialog_dir / "2026-12-02.jsonl")[0])
    assert record["msg"]["content"] == f"{astral}{astral} \udc00\ud800 {astral}{astral}"


async def test_a_record_without_split_reads_as_before(tmp_path: Path) -> None:
    store = DialogStore(tmp_path)
    store.dialog_dir.mkdir(parents=True, exist_ok=True)
    (store.dialog_dir / "2026-12-02.jsonl").write_bytes(
        record_line(make_msg("old", "\ud800\udc00 \udc80"))  # as the older writer did
    )
    read, report = store.read()
    assert report.bad_lines == [] and read[0].content == "\U00010000 \udc80"


async def test_unparseable_timestamp_goes_to_today(tmp_path: Path) -> None:
    store = DialogStore(tmp_path)
    msg = make_msg("t1")
    msg.timestamp = "not a time"
    await store.append([msg, make_msg("t2", day="2026-13-45")])
    assert store.days() == [date.today().isoformat()]


def test_read_missing_dir_and_bad_day(tmp_path: Path) -> None:
    store = DialogStore(tmp_path / "nowhere")
    msgs, report = store.read()
    assert msgs == [] and report.files == [] and report.bad_lines == []
    assert store.days() == [] and store.ids() == set()
    assert store.read("2026-12-02")[0] == []
    with pytest.raises(ContextUsageError, match="'12/02/2026'"):
        store.read("12/02/2026")
    assert not (tmp_path / "nowhere").exists()


# -- idempotency ------------------------------------------------------------------------------


async def test_append_is_idempotent_by_id(tmp_path: Path) -> None:
    msgs = [make_msg("a"), make_msg("b", day="2026-12-03"), make_msg("a")]
    store = DialogStore(tmp_path)
    assert await store.append(msgs) == 2
    assert await store.append(msgs) == 0
    assert await store.append([make_msg("b", day="2026-12-03"), make_msg("c")]) == 1
    restarted = DialogStore(tmp_path)
    assert await restarted.append(msgs) == 0
    assert restarted.ids() == {"a", "b", "c"}
    read, _ = restarted.read()
    assert [m.id for m in read] == ["a", "b", "c"]  # c (12-02) went to the newest file, 12-03
    assert [m.id for m in restarted.read("2026-12-03")[0]] == ["b", "c"]


async def test_sees_appends_from_another_instance(tmp_path: Path) -> None:
    first, second = DialogStore(tmp_path), DialogStore(tmp_path)
    assert await first.append([make_msg("a")]) == 1
    assert await second.append([make_msg("b")]) == 1  # second has now scanned both
    assert await first.append([make_msg("b"), make_msg("c")]) == 1  # first re-reads the tail
    assert await second.append([make_msg("c")]) == 0


# -- torn lines ---------------------------------------------------------------------------------


async def test_torn_last_line_is_reported_and_followed_by_valid_lines(tmp_path: Path) -> None:
    store = DialogStore(tmp_path)
    await store.append([make_msg("a"), make_msg("b")])
    path = store.dialog_dir / "2026-12-02.jsonl"
    with path.open("ab") as file:
        file.write(b'{"v": 1, "msg": {"id": "torn", "na')
    read, report = store.read()
    assert [m.id for m in read] == ["a", "b"]
    assert len(report.bad_lines) == 1
    name, number, reason = report.bad_lines[0]
    assert (name, number) == ("2026-12-02.jsonl", 3) and "torn" in reason

    assert await DialogStore(tmp_path).append([make_msg("c"), make_msg("a")]) == 1
    read, report = store.read()
    assert [m.id for m in read] == ["a", "b", "c"]
    assert [(n, line) for n, line, _ in report.bad_lines] == [("2026-12-02.jsonl", 3)]
    assert "torn" not in report.bad_lines[0][2]  # now a whole (bad) line
    assert json.loads(lines_of(path)[3])["msg"]["id"] == "c"


async def test_complete_record_without_newline_counts_as_stored(tmp_path: Path) -> None:
    store = DialogStore(tmp_path)
    await store.append([make_msg("a")])
    path = store.dialog_dir / "2026-12-02.jsonl"
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # crash right before the final newline
    assert [m.id for m in store.read()[0]] == ["a"]
    assert await DialogStore(tmp_path).append([make_msg("a"), make_msg("b")]) == 1
    assert [json.loads(line)["msg"]["id"] for line in lines_of(path)] == ["a", "b"]


async def test_corrupt_lines_are_skipped_and_reported(tmp_path: Path) -> None:
    store = DialogStore(tmp_path)
    store.dialog_dir.mkdir()
    good = json.dumps({"v": 1, "msg": make_msg("ok").to_dict()}).encode()
    (store.dialog_dir / "2026-12-01.jsonl").write_bytes(
        b"\n".join(
            [
                b"not json",
                b'{"v": 2, "msg": {}}',
                b"[1, 2]",
                b'{"v": 1, "msg": {"id": "x"}}',
                b"\xff\xfe",
                b"",
                good,
                b"",
            ]
        )
    )
    (store.dialog_dir / "notes.txt").write_text("ignored")
    read, report = store.read()
    assert [m.id for m in read] == ["ok"]
    assert [number for _, number, _ in report.bad_lines] == [1, 2, 3, 4, 5]
    assert "version 2" in report.bad_lines[1][2] and "UTF-8" in report.bad_lines[4][2]
    assert store.ids() == {"ok"}  # stored means readable: "x" may still be appended


# -- two processes --------------------------------------------------------------------------------


def _writer(work: Path, tag: str, go: Path) -> None:
    """One process's appends (a forked child: it starts at once, AgentScope is imported)."""
    from agentscope_ctx.core._entry import Msg

    append_file = dialog_module.append_file

    def slow_append_file(*args: Any) -> tuple[int, int]:  # widen the check-then-write window
        time.sleep(0.002)
        return append_file(*args)

    dialog_module.append_file = slow_append_file  # in this process only
    while not go.exists():
        time.sleep(0.001)

    def msg(i: int, mid: str) -> Any:
        m = Msg("w", f"{mid} 文本 " + "x" * (i % 50) * 40, "assistant")
        m.id = mid
        m.timestamp = f"2026-12-0{1 + i % 2} 10:00:00.000"
        return m

    async def main() -> None:
        store = DialogStore(work)
        ids = [f"{tag}-{i}" for i in range(150)] + [f"shared-{i}" for i in range(50)]
        ids.sort(key=lambda s: int(s.split("-")[1]))
        for start in range(0, len(ids), 7):
            await store.append([msg(i, mid) for i, mid in enumerate(ids[start : start + 7], start)])

    asyncio.run(main())


def test_two_processes_append_concurrently(tmp_path: Path) -> None:
    go = tmp_path / "go"
    context = multiprocessing.get_context("fork")
    procs = [
        context.Process(target=_writer, args=(tmp_path / "work", tag, go)) for tag in ("p1", "p2")
    ]
    for proc in procs:
        proc.start()
    time.sleep(0.1)
    go.touch()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0  # a failure's traceback is in the captured stderr

    store = DialogStore(tmp_path / "work")
    ids: Counter[str] = Counter()
    for path in sorted(store.dialog_dir.glob("*.jsonl")):
        for line in lines_of(path):
            ids[json.loads(line)["msg"]["id"]] += 1
    assert len(ids) == 350 and set(ids.values()) == {1}
    read, report = store.read()
    assert report.bad_lines == [] and len(read) == 350


async def test_instances_in_one_process_exclude_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    append_file = dialog_module.append_file

    def slow_append_file(*args: Any) -> tuple[int, int]:
        time.sleep(0.05)
        return append_file(*args)

    monkeypatch.setattr(dialog_module, "append_file", slow_append_file)
    shared = DialogStore(tmp_path)
    stores = [DialogStore(tmp_path), DialogStore(tmp_path), shared, shared]
    counts = await asyncio.gather(
        *(s.append([make_msg("same"), make_msg(f"own{i}")]) for i, s in enumerate(stores))
    )
    assert sorted(counts) == [1, 1, 1, 2]
    assert [
        json.loads(line)["msg"]["id"] for line in lines_of(shared.dialog_dir / "2026-12-02.jsonl")
    ].count("same") == 1


# -- write errors ---------------------------------------------------------------------------------


async def test_unwritable_dialog_dir_raises_persistence_error(tmp_path: Path) -> None:
    (tmp_path / "dialog").write_text("a file where the directory should be")
    store = DialogStore(tmp_path)
    with pytest.raises(PersistenceError, match=re.escape(str(tmp_path / "dialog"))) as info:
        await store.append([make_msg("a")])
    assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(PersistenceError, match="dialog"):
        store.read()


async def test_failed_write_raises_and_retry_does_not_duplicate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DialogStore(tmp_path)
    await store.append([make_msg("a")])

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(PersistenceError, match=r"2026-12-02\.jsonl.*No space left") as info:
        await store.append([make_msg("a"), make_msg("b"), make_msg("c")])
    assert isinstance(info.value.__cause__, OSError)
    monkeypatch.undo()
    await store.append([make_msg("a"), make_msg("b"), make_msg("c")])  # the caller retries
    path = store.dialog_dir / "2026-12-02.jsonl"
    assert [json.loads(line)["msg"]["id"] for line in lines_of(path)] == ["a", "b", "c"]


# -- odd messages (issue 11, item 4) --------------------------------------------------------------


class Opaque:
    """An object that cannot even be printed."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class Labelled:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        return "Labelled()"


def odd_metadata() -> dict[Any, Any]:
    loop: dict[str, Any] = {"name": "loop"}
    loop["self"] = loop
    return {
        "when": datetime(2026, 12, 3, 0, 0, 5),
        "tags": {"b"},
        "raw": b"\x00",
        ("a", 1): "tuple key",
        2: "int key",
        "nested": [1, {"at": date(2026, 12, 3)}],
        "loop": loop,
        "opaque": Opaque(),
        "labelled": Labelled(),
        "ok": "kept",
        "n": 1.5,
    }


async def test_i11_04_odd_metadata_is_stored_as_strings_and_flagged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = DialogStore(tmp_path)
    odd = make_msg("odd", metadata=odd_metadata())
    with caplog.at_level(logging.WARNING, logger="agentscope_ctx"):
        assert await store.append([make_msg("a"), odd, make_msg("b")]) == 3
        assert await store.append([odd, make_msg("c")]) == 1  # stored once
    read, report = store.read()
    assert report.bad_lines == [] and [m.id for m in read] == ["a", "odd", "b", "c"]
    assert read[1].metadata == {
        "when": "2026-12-03 00:00:05",
        "tags": "{'b'}",
        "raw": "b'\\x00'",
        "('a', 1)": "tuple key",
        "2": "int key",
        "nested": [1, {"at": "2026-12-03"}],
        "loop": {"name": "loop", "self": "<circular reference>"},
        "opaque": "<unprintable Opaque>",
        "labelled": "Labelled()",
        "ok": "kept",
        "n": 1.5,
    }
    records = [json.loads(line) for line in lines_of(store.dialog_dir / "2026-12-02.jsonl")]
    assert [r.get("lossy") for r in records] == [
        None,
        [
            "metadata.when",
            "metadata.tags",
            "metadata.raw",
            "metadata.('a', 1)",
            "metadata.2",
            "metadata.nested[1].at",
            "metadata.loop.self",
            "metadata.opaque",
            "metadata.labelled",
        ],
        None,
        None,
    ]
    warned = [r for r in caplog.records if "'odd'" in r.getMessage()]
    assert len(warned) == 1 and "metadata.when" in warned[0].getMessage()  # logged once


async def test_i11_04_content_none_is_stored_and_read_back(tmp_path: Path) -> None:
    store = DialogStore(tmp_path)
    empty, single = make_msg("none"), make_msg("single")
    empty.content = None  # type: ignore[assignment]
    single.content = {"type": "text", "text": "one block"}  # type: ignore[assignment]
    assert await store.append([empty, single, make_msg("after")]) == 3
    read, report = store.read()
    assert report.bad_lines == []  # readable: Msg.from_dict refuses content None
    assert [(m.id, m.content) for m in read] == [
        ("none", []),
        ("single", [{"type": "text", "text": "one block"}]),
        ("after", "hi"),
    ]
    records = [json.loads(line) for line in lines_of(store.dialog_dir / "2026-12-02.jsonl")]
    assert [r.get("lossy") for r in records] == [["content"], ["content"], None]
    assert await DialogStore(tmp_path).append([empty, single]) == 0  # counted as stored


json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
)
odd_leaf = st.one_of(
    st.datetimes(),
    st.dates(),
    st.frozensets(st.integers(), max_size=3),
    st.binary(max_size=4),
    st.builds(Labelled),
    st.builds(Opaque),
)
plain_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=5,
)  # fmt: skip
odd_keys = st.one_of(st.text(max_size=4), st.integers(), st.tuples(st.integers()))
odd_value = st.recursive(
    st.one_of(json_leaf, odd_leaf),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(odd_keys, inner, max_size=3),
    max_leaves=5,
)  # fmt: skip


@st.composite
def odd_messages(draw: st.DrawFn, n: int) -> Msg:
    """A message whose metadata (and maybe content) may hold anything."""
    odd = draw(st.booleans())
    msg = make_msg(f"m{n}", day=draw(st.sampled_from(DAYS)))
    if odd:
        msg.metadata = draw(st.dictionaries(odd_keys, odd_value, max_size=3))
        if draw(st.booleans()):
            msg.content = None  # type: ignore[assignment]
    else:
        msg.metadata = draw(st.dictionaries(st.text(max_size=4), plain_value, max_size=3))
    return msg


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), n=st.integers(1, 8))
def test_i11_04_any_message_is_stored_and_read_back_once_in_append_order(
    data: st.DataObject, n: int
) -> None:
    msgs = [data.draw(odd_messages(i)) for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        store = DialogStore(Path(tmp))
        cut = len(msgs) // 2

        async def append_twice() -> list[int]:  # the first part is re-offered: stored once
            return [await store.append(msgs[:cut]), await store.append(msgs)]

        assert asyncio.run(append_twice()) == [cut, len(msgs) - cut]
        read, report = store.read()
        assert report.bad_lines == []
        assert [m.id for m in read] == [m.id for m in msgs]
        lossy = {
            record["msg"]["id"]: record.get("lossy")
            for path in store.dialog_dir.glob("*.jsonl")
            for record in map(json.loads, lines_of(path))
        }
        for original, back in zip(msgs, read, strict=True):
            if lossy[original.id] is None:  # stored exactly
                assert back.to_dict() == original.to_dict()
            else:
                assert back.metadata.keys() <= {str(k) for k in original.metadata}
                assert isinstance(back.content, (str, list))


# -- planted links, FIFOs, a clock going back (issue 11, item 13) ---------------------------------

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="symlinks and FIFOs: POSIX")


def record_line(msg: Msg) -> bytes:
    return json.dumps({"v": 1, "msg": msg.to_dict()}).encode() + b"\n"


@posix_only
@pytest.mark.parametrize("target_exists", [True, False])
async def test_i11_13_symlinked_day_file_is_refused(tmp_path: Path, target_exists: bool) -> None:
    outside = tmp_path / "elsewhere.jsonl"
    if target_exists:
        outside.write_bytes(record_line(make_msg("planted", day="2026-12-03")))
    store = DialogStore(tmp_path / "work")
    await store.append([make_msg("a", day="2026-12-02")])
    link = store.dialog_dir / "2026-12-03.jsonl"
    link.symlink_to(outside)

    with pytest.raises(PersistenceError, match=re.escape(repr(str(link)))) as info:
        await store.append([make_msg("b", day="2026-12-03")])
    assert "symbolic link" in str(info.value)
    assert outside.exists() == target_exists  # neither created nor written
    if target_exists:
        assert b'"b"' not in outside.read_bytes()
    read, report = store.read()
    assert [m.id for m in read] == ["a"]  # what the link points to is not read either
    assert report.bad_lines == [("2026-12-03.jsonl", 0, "a symbolic link: not read")]
    assert store.read("2026-12-03")[1].bad_lines == report.bad_lines
    assert store.days() == ["2026-12-02"] and store.ids() == {"a"}
    assert await store.append([make_msg("c", day="2026-12-04")]) == 1  # the next day works


@posix_only
async def test_i11_13_symlinked_dialog_dir_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "dialog").symlink_to(outside, target_is_directory=True)
    store = DialogStore(tmp_path / "work")
    with pytest.raises(PersistenceError, match=re.escape(repr(str(store.dialog_dir)))):
        await store.append([make_msg("a")])
    assert list(outside.iterdir()) == []  # no day file, no .lock
    for read in (store.read, store.ids, store.days):
        with pytest.raises(PersistenceError, match="symbolic link"):
            read()


@posix_only
async def test_i11_13_symlinked_lock_is_refused(tmp_path: Path) -> None:
    store = DialogStore(tmp_path / "work")
    await store.append([make_msg("a")])
    lock = store.dialog_dir / ".lock"
    lock.unlink()
    lock.symlink_to(tmp_path / "elsewhere.lock")
    with pytest.raises(PersistenceError, match=re.escape(repr(str(lock)))):
        await store.append([make_msg("b")])
    assert not (tmp_path / "elsewhere.lock").exists()
    assert [m.id for m in store.read()[0]] == ["a"]  # a reader goes on without the lock


@posix_only
async def test_i11_13_fifo_day_file_or_lock_is_refused_without_blocking(tmp_path: Path) -> None:
    store = DialogStore(tmp_path)
    await store.append([make_msg("a", day="2026-12-02")])
    os.mkfifo(store.dialog_dir / "2026-12-03.jsonl")
    with pytest.raises(PersistenceError, match="not a regular file"):
        await store.append([make_msg("b", day="2026-12-03")])
    read, report = store.read()
    assert [m.id for m in read] == ["a"]
    assert report.bad_lines == [("2026-12-03.jsonl", 0, "not a regular file: not read")]
    (store.dialog_dir / ".lock").unlink()
    os.mkfifo(store.dialog_dir / ".lock")
    with pytest.raises(PersistenceError, match=r"\.lock"):
        await store.append([make_msg("c", day="2026-12-04")])


async def test_i11_13_clock_back_across_midnight_keeps_append_order(tmp_path: Path) -> None:
    store = DialogStore(tmp_path)
    a, b = make_msg("A"), make_msg("B")
    a.timestamp, b.timestamp = "2026-12-02 00:00:05.000", "2026-12-01 23:59:59.000"
    await store.append([a])
    await store.append([b])
    read, _ = store.read()
    assert [(m.id, m.timestamp) for m in read] == [(a.id, a.timestamp), (b.id, b.timestamp)]
    assert store.days() == ["2026-12-02"]  # B went to the newest file, after A
    restarted = DialogStore(tmp_path)  # the rule holds across instances and processes
    await restarted.append([make_msg("C", day="2026-12-01"), make_msg("D", day="2026-12-03")])
    assert [m.id for m in restarted.read()[0]] == ["A", "B", "C", "D"]
    assert restarted.days() == ["2026-12-02", "2026-12-03"]


async def test_i11_13_files_written_before_the_rule_stay_readable(tmp_path: Path) -> None:
    store = DialogStore(tmp_path)
    store.dialog_dir.mkdir()
    (store.dialog_dir / "2026-12-01.jsonl").write_bytes(
        record_line(make_msg("old1", day="2026-12-01"))
    )
    (store.dialog_dir / "2026-12-02.jsonl").write_bytes(record_line(make_msg("old2")))
    assert await store.append([make_msg("old1", day="2026-12-01"), make_msg("new")]) == 1
    read, report = store.read()
    assert report.bad_lines == [] and [m.id for m in read] == ["old1", "old2", "new"]
