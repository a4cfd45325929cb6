"""`read_file`: continuation reads, roots, and every bad input answered as a tool error."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_ctx.core.config._config import ToolResultConfig
from agentscope_ctx.core.truncation._truncation import excerpt_with_notice, parse_notice
from agentscope_ctx.recall._read_file import FileReader
from agentscope_ctx.stores._line_index import CHUNK
from agentscope_ctx.stores._tool_results import ToolResultPolicy, ToolResultStore
from tests.support.chain import follow_chain, position_to_index
from tests.support.lines import requires_1x, text_of


def make_reader(*roots: Path, recent: int = 2_048) -> FileReader:
    config = ToolResultConfig(
        recent_max_bytes=recent,
        old_max_bytes=1_024,
        markdown_recent_max_bytes=max(recent, 4_096),
        markdown_old_max_bytes=1_024,
    )
    return FileReader(list(roots), ToolResultPolicy(config))


async def read_text(reader: FileReader, path: str, line: int = 1, offset: int = 0) -> str:
    response = await reader.read_file(path, line, offset)
    return text_of(response)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


CASES = {
    "lines": "".join(f"{i}: some log line with words\n" for i in range(3_000)),
    "one_huge_line": "z" * 300_000,
    "crlf": "alpha\r\nbeta\r\n" * 2_000,
    "cjk_emoji": ("中文内容😀 mixed ascii\n" * 800) + "末尾没有换行",
    "marker_inside": "a\n<<<TRUNCATED>>>\nb\n" * 1_000,
}


@pytest.mark.parametrize("name", list(CASES))
async def test_reading_a_file_through_its_chain(tmp_path: Path, name: str) -> None:
    text = CASES[name]
    path = write(tmp_path / f"{name}.txt", text)
    reader = make_reader(tmp_path)

    async def read(p: str, line: int, offset: int) -> str:
        return await read_text(reader, p, line, offset)

    first = await read(str(path), 1, 0)
    assert parse_notice(first) is not None
    assert await follow_chain(first, read) == text
    # a tool output saved under tool_result/ and cut at a different budget chains the same way
    cut = excerpt_with_notice(text, max_bytes=5_000, file_path=str(path))
    assert await follow_chain(cut, read) == text


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(st.sampled_from("ab\n\r中😀 "), max_size=6_000))
async def test_file_chain_property(tmp_path: Path, text: str) -> None:
    path = write(tmp_path / "p.txt", text)
    reader = make_reader(tmp_path, recent=1_100)

    async def read(p: str, line: int, offset: int) -> str:
        return await read_text(reader, p, line, offset)

    first = excerpt_with_notice(text, max_bytes=1_500, file_path=str(path))
    assert await follow_chain(first, read) == text


async def test_relative_paths_try_each_root(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(b / "notes.txt", "from b\n")
    reader = make_reader(a, b)
    a.mkdir()
    assert await read_text(reader, "notes.txt") == "from b\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("missing.txt",), "does not exist"),
        (("../outside.txt",), "outside the readable roots"),
        (("/etc/hostname",), "outside the readable roots"),
        (("link_out.txt",), "outside the readable roots"),
        (("adir",), "is a directory"),
        (("small.txt", 99), "past the end"),
        (("small.txt", 0), "start_line must be >= 1"),
        (("small.txt", -3), "start_line must be >= 1"),
        (("small.txt", 1, -1), "line_offset must be >= 0"),
        (("small.txt", "two"), "start_line must be an integer"),
        (("small.txt", 1.5), "start_line must be an integer"),
        (("small.txt", True), "start_line must be an integer"),
        (("small.txt", 1, 50), "past the end of line 1"),
        (("blob.bin",), "binary file"),
        (("latin1.txt",), "not UTF-8"),
        (("",), "non-empty string"),
    ],
)
async def test_bad_input_is_a_tool_error(tmp_path: Path, args: tuple, expected: str) -> None:
    root = tmp_path / "root"
    write(root / "small.txt", "one\ntwo\n")
    (root / "adir").mkdir()
    (root / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    write(tmp_path / "outside.txt", "secret\n")
    os.symlink(tmp_path / "outside.txt", root / "link_out.txt")
    reader = make_reader(root)
    out = await read_text(reader, *args)
    assert out.startswith("Error: ") and expected in out
    assert "secret" not in out


async def test_numbers_given_as_strings_are_accepted(tmp_path: Path) -> None:
    write(tmp_path / "f.txt", "one\ntwo\nthree\n")
    reader = make_reader(tmp_path)
    assert await read_text(reader, "f.txt", "2", "1") == "wo\nthree\n"  # type: ignore[arg-type]


async def test_markdown_gets_larger_limit(tmp_path: Path) -> None:
    body = "# Title\n" + "".join(f"- rule {i}\n" for i in range(400))
    write(tmp_path / "SKILL.md", body)
    write(tmp_path / "plain.txt", body)
    reader = make_reader(tmp_path, recent=2_048)  # markdown limit 4096
    md = await read_text(reader, "SKILL.md")
    txt = await read_text(reader, "plain.txt")
    assert parse_notice(md)[1].n_bytes > parse_notice(txt)[1].n_bytes  # type: ignore[index]


async def test_reading_does_not_copy_to_tool_result(tmp_path: Path) -> None:
    write(tmp_path / "big.txt", "x\n" * 50_000)
    reader = make_reader(tmp_path)
    out = await read_text(reader, "big.txt")
    assert parse_notice(out)[1].file_path == str(tmp_path / "big.txt")  # type: ignore[index]
    assert not (tmp_path / "tool_result").exists()


async def test_empty_file(tmp_path: Path) -> None:
    write(tmp_path / "empty.txt", "")
    assert "is empty" in await read_text(make_reader(tmp_path), "empty.txt")


# -- issue 11: what read_file opens, and what it costs ---------------------------------

SECRET = "TOP-SECRET-OUTSIDE-THE-ROOTS"


@pytest.mark.parametrize("kind", ["fifo", "socket"])
async def test_i11_08_read_file_refuses_fifo(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "special"
    server = socket.socket(socket.AF_UNIX) if kind == "socket" else None
    if server is not None:
        server.bind(str(target))
    else:
        os.mkfifo(target)
    reader = make_reader(tmp_path)
    try:
        # a guard against a hang, not a speed check: the old reader blocked in open() forever
        out = await asyncio.wait_for(read_text(reader, "special"), timeout=30)
    except TimeoutError:
        os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK))  # a writer frees the thread
        pytest.fail("read_file blocked on a FIFO")
    finally:
        if server is not None:
            server.close()
    assert out.startswith("Error: ")
    assert ("FIFO" if kind == "fifo" else "socket") in out and "regular file" in out


def test_i11_09_symlink_swapped_in_is_never_followed(tmp_path: Path) -> None:
    """A thread swaps `f.txt` between a regular file and a symlink out of the root, and
    `d/` between a directory and a symlink to an outside directory, while `read_file` reads
    both. The old reader checked the resolved name and then opened it by name: it leaked the
    outside file within the first few hundred calls."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    write(outside / "f.txt", SECRET + "\n")
    write(root / "f.txt", "inside\n")
    write(root / "d" / "f.txt", "inside\n")
    reader = make_reader(root)
    stop = threading.Event()

    def swap() -> None:
        link, regular, parked = root / ".link", root / ".regular", root / ".d"
        while not stop.is_set():
            os.symlink(outside / "f.txt", link)
            os.replace(link, root / "f.txt")
            os.rename(root / "d", parked)
            os.symlink(outside, root / "d")
            regular.write_text("inside\n")
            os.replace(regular, root / "f.txt")
            os.unlink(root / "d")
            os.rename(parked, root / "d")

    async def read_many(calls: int) -> tuple[int, int]:
        leaks = inside = 0
        for i in range(calls):
            out = await read_text(reader, "f.txt" if i % 2 else "d/f.txt")
            leaks += SECRET in out
            inside += out == "inside\n"
            if leaks:
                break
        return leaks, inside

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        leaks, inside = asyncio.run(read_many(3_000))
    finally:
        stop.set()
        swapper.join()
    assert leaks == 0
    assert inside > 0  # the reads were real: the race was run, not refused wholesale


async def test_i11_09_hard_link_to_outside_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    secret = write(tmp_path / "secret.txt", SECRET + "\n")
    root.mkdir()
    os.link(secret, root / "linked.txt")
    out = await read_text(make_reader(root), "linked.txt")
    assert out.startswith("Error: ") and "2 hard links" in out and SECRET not in out


async def test_symlinks_inside_the_roots_are_followed(tmp_path: Path) -> None:
    write(tmp_path / "real" / "a.txt", "hello\n")
    os.symlink(tmp_path / "real", tmp_path / "alias")
    os.symlink(tmp_path / "real" / "a.txt", tmp_path / "b.txt")
    reader = make_reader(tmp_path)
    assert await read_text(reader, "alias/a.txt") == "hello\n"
    assert await read_text(reader, "b.txt") == "hello\n"


@pytest.mark.parametrize(
    ("line", "offset", "expected"),
    [
        (1, 10**12, "line_offset=1000000000000 is past the end of line 1 (100000 characters)"),
        (2, 10**12, "line_offset=1000000000000 is past the end of line 2 (5 characters)"),
        (10**12, 0, "start_line=1000000000000 is past the end of"),
        (10**12, 10**12, "start_line=1000000000000 is past the end of"),
    ],
)
async def test_i11_10_huge_positions_are_clear_errors(
    tmp_path: Path, line: int, offset: int, expected: str
) -> None:
    write(tmp_path / "long.txt", "x" * 100_000 + "\nshort\n")
    out = await read_text(make_reader(tmp_path), "long.txt", line, offset)
    assert out.startswith("Error: ") and expected in out


async def test_i11_10_sparse_file_is_indexed_once(tmp_path: Path) -> None:
    """A 4 GB sparse file: its data is read once to count lines; a continuation read then
    costs its excerpt, a jump to the last line one chunk; a change is indexed again."""
    path = tmp_path / "sparse.log"
    header = "".join(f"line {i:07d} of the header\n" for i in range(200_000))  # 5.4 MB
    path.write_text(header)
    size = 4 << 30
    try:
        os.truncate(path, size)
        fd = os.open(path, os.O_RDONLY)
        try:
            holes = os.lseek(fd, 0, os.SEEK_HOLE) < size  # else a scan reads 4 GB of zeros
        finally:
            os.close(fd)
    except OSError as exc:
        pytest.skip(f"this filesystem has no sparse files: {exc}")
    if not holes:
        pytest.skip("this filesystem does not report holes")
    with open(path, "ab") as file:
        file.write(b"\nlast line\n")  # line 200_001 is the hole (NULs), 200_002 this one
    reader = make_reader(tmp_path)

    first = await read_text(reader, "sparse.log")
    excerpt, notice = parse_notice(first)  # type: ignore[misc]
    assert notice.total_lines == 200_002
    assert len(header) <= reader.bytes_read < len(header) + 2 * CHUNK  # the hole is skipped

    before = reader.bytes_read
    second = await read_text(reader, str(path), notice.next.line, notice.next.offset)
    assert parse_notice(second)[0].startswith(header[len(excerpt) :][:100])  # type: ignore[index]
    assert reader.bytes_read - before <= 2_048 + 16  # the excerpt, nothing more

    before = reader.bytes_read
    assert await read_text(reader, "sparse.log", 200_002) == "last line\n"
    middle = await read_text(reader, "sparse.log", 150_000)
    assert middle.startswith("line 0149999 of the header\nline 0150000 of the header\n")
    assert reader.bytes_read - before <= 2 * (CHUNK + 2_048 + 16)

    with open(path, "ab") as file:
        file.write(b"one more\n")
    before = reader.bytes_read
    assert await read_text(reader, "sparse.log", 200_003) == "one more\n"
    assert reader.bytes_read - before >= len(header)  # a new version: counted again


@requires_1x("saves through the 1.x Toolkit middleware")
async def test_i11_11_saved_output_with_nul_chains_back(tmp_path: Path) -> None:
    from agentscope.message import TextBlock, ToolUseBlock
    from agentscope.tool import Toolkit, ToolResponse

    from agentscope_ctx.agentscope1._middleware import TruncationMiddleware

    text = (
        "header\0with a NUL\n"
        + "".join(f"row {i}\0{i} 中文😀\r\n" for i in range(3_000))
        + "tail\0"
    )
    config = ToolResultConfig()
    policy = ToolResultPolicy(config)
    store = ToolResultStore(tmp_path / "work", config.retention_days)
    reader = FileReader([tmp_path / "work"], policy, store_dir=store.dir)
    toolkit = Toolkit()
    toolkit.register_middleware(
        TruncationMiddleware(store, policy, skip_tools=frozenset({"read_file"})).handle
    )
    toolkit.register_tool_function(reader.read_file)

    def dump() -> ToolResponse:
        """Dump a binary-looking log."""
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    toolkit.register_tool_function(dump)

    async def call(name: str, **arguments: object) -> str:
        use = ToolUseBlock(type="tool_use", id="id-1", name=name, input=arguments)
        chunks = [chunk async for chunk in await toolkit.call_tool_function(use)]
        return str(chunks[-1].content[0]["text"])

    async def read(p: str, line: int, offset: int) -> str:
        return await call("read_file", file_path=p, start_line=line, line_offset=offset)

    stored = await call("dump")
    _, notice = parse_notice(stored)  # type: ignore[misc]
    assert Path(notice.file_path).read_bytes() == text.encode("utf-8")
    assert await follow_chain(stored, read) == text
    # the same bytes outside the store are still a binary file
    copy = write(tmp_path / "work" / "copy.txt", text)
    assert "binary file" in await read(str(copy), 1, 0)


async def test_saved_outputs_are_readable_whatever_the_roots(tmp_path: Path) -> None:
    store = ToolResultStore(tmp_path / "work", 7)
    saved = store.save("a\n" * 5_000)
    config = ToolResultConfig()
    reader = FileReader([tmp_path / "project"], ToolResultPolicy(config), store_dir=store.dir)
    cut = excerpt_with_notice("a\n" * 5_000, max_bytes=1_000, file_path=str(saved))

    async def read(p: str, line: int, offset: int) -> str:
        return await read_text(reader, p, line, offset)

    assert await follow_chain(cut, read) == "a\n" * 5_000
    assert "outside the readable roots" in await read_text(reader, str(tmp_path / "x.txt"))


async def test_positions_across_chunk_boundaries(tmp_path: Path) -> None:
    """Line starts and character offsets found through the sparse index and the chunked,
    incremental decoding agree with the text itself around 1 MB chunk boundaries, where
    multi-byte characters are split between two reads."""
    lines = [("中😀x" * (i % 97)) + f" {i}\r\n" for i in range(6_000)]
    text = "".join(lines) + "末" * (CHUNK // 2) + "😀" * 1_000  # a 1.5 MB last line, no "\n"
    path = write(tmp_path / "big.txt", text)
    assert path.stat().st_size > 3 * CHUNK
    reader = make_reader(tmp_path)
    last = len(lines) + 1
    positions = [(1, 0), (len(lines), 3), (last, 0), (last, CHUNK // 2 - 1), (last, CHUNK // 2 + 7)]
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode("utf-8")))
    positions += [
        (i + 1, k)
        for i, at in enumerate(starts[:-1])
        if at // CHUNK != starts[i + 1] // CHUNK
        for k in (0, 1, 2, len(lines[i]) - 1)
    ]
    for line, offset in positions:
        out = await read_text(make_reader(tmp_path), "big.txt", line, offset)  # no marks
        again = await read_text(reader, "big.txt", line, offset)  # the shared index
        index = position_to_index(text, line, offset)
        assert parse_notice(out)[0] == parse_notice(again)[0]  # type: ignore[index]
        assert text[index:].startswith(parse_notice(out)[0]), (line, offset)  # type: ignore[index]
