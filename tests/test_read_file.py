"""`read_file`: continuation reads, roots, and every bad input answered as a tool error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_ctx._config import ToolResultConfig
from agentscope_ctx._read_file import FileReader
from agentscope_ctx._tool_results import ToolResultPolicy
from agentscope_ctx._truncation import excerpt_with_notice, parse_notice
from tests.chain import follow_chain


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
    return str(response.content[0]["text"])


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
