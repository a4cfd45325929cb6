"""The truncation core: notice format, excerpts, and the lossless chain (DESIGN.md §4)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentscope_ctx.core.truncation._truncation import (
    TRUNCATION_NOTICE_MARKER,
    Notice,
    Position,
    advance,
    excerpt_with_notice,
    parse_notice,
    render_notice,
    retruncate,
    total_lines,
    utf8_len,
)
from tests.support.chain import follow_chain, position_to_index

PATH = "/work/tool_result/0123abcd.txt"


def pure_reader(original: str, max_bytes: int):
    """read_file over `original` without touching the disk."""

    async def read(path: str, line: int, offset: int) -> str:
        assert path == PATH
        start = Position(line, offset)
        rest = original[position_to_index(original, line, offset) :]
        return excerpt_with_notice(
            rest,
            max_bytes=max_bytes,
            file_path=path,
            start=start,
            source_lines=total_lines(original),
        )

    return read


def chain(text: str, first_max: int, read_max: int, old_max: int | None = None) -> str:
    first = excerpt_with_notice(text, max_bytes=first_max, file_path=PATH)
    if old_max is not None:
        first = retruncate(first, max_bytes=old_max)
    return asyncio.run(follow_chain(first, pure_reader(text, read_max)))


pieces = st.sampled_from(["a", "b", " ", "\n", "\r", "\r\n", "é", "中", "😀", "\t", "abc\n"])
texts = st.lists(
    pieces | st.characters(blacklist_categories=("Cs",)) | st.just(TRUNCATION_NOTICE_MARKER),
    max_size=1_500,
).map("".join)

EDGE_CASES = [
    "",
    "x" * 300_000,
    "line one\r\nline two\r\n" * 400,
    "中文和emoji😀🎉\n" * 500,
    "no final newline " * 2_000,
    "start\n" + TRUNCATION_NOTICE_MARKER + "\nmiddle\n" * 200 + TRUNCATION_NOTICE_MARKER,
    "😀" * 5_000,
    "\n" * 5_000,
    "\r" * 3_000,
]


@pytest.mark.parametrize("text", EDGE_CASES, ids=range(len(EDGE_CASES)))
def test_chain_edge_cases(text: str) -> None:
    assert chain(text, 2_048, 1_500) == text
    assert chain(text, 4_096, 2_048, old_max=1_100) == text


@settings(max_examples=400, deadline=None)
@given(
    text=texts,
    first_max=st.integers(min_value=4, max_value=2_000),
    read_max=st.integers(min_value=4, max_value=2_000),
)
@example(text="a" * 50, first_max=4, read_max=4)
@example(text="😀😀😀", first_max=4, read_max=5)
def test_chain_is_lossless(text: str, first_max: int, read_max: int) -> None:
    assert chain(text, first_max, read_max) == text


@settings(max_examples=300, deadline=None)
@given(
    text=texts,
    first_max=st.integers(min_value=300, max_value=3_000),
    old_max=st.integers(min_value=4, max_value=3_000),
    read_max=st.integers(min_value=4, max_value=2_000),
)
def test_chain_is_lossless_after_second_truncation(
    text: str, first_max: int, old_max: int, read_max: int
) -> None:
    assert chain(text, first_max, read_max, old_max=min(old_max, first_max)) == text


@settings(max_examples=200, deadline=None)
@given(text=texts, max_bytes=st.integers(min_value=600, max_value=3_000))
def test_output_within_budget(text: str, max_bytes: int) -> None:
    out = excerpt_with_notice(text, max_bytes=max_bytes, file_path=PATH)
    assert utf8_len(out) <= max_bytes
    again = retruncate(out, max_bytes=max_bytes // 2 + 300)
    assert utf8_len(again) <= max_bytes // 2 + 300 or again == out


def test_text_within_budget_is_unchanged() -> None:
    text = "short output\nwith two lines"
    assert excerpt_with_notice(text, max_bytes=1_000, file_path=PATH) == text
    assert retruncate(text, max_bytes=10) == text  # no notice: nothing to re-cut


def test_notice_wording_and_numbers() -> None:
    text = "".join(f"line {i}\n" for i in range(1, 1_001))
    out = excerpt_with_notice(text, max_bytes=1_000, file_path=PATH)
    excerpt, tail = out.split("\n" + TRUNCATION_NOTICE_MARKER + "\n")
    assert text.startswith(excerpt) and excerpt.endswith("\n")
    n_lines = excerpt.count("\n")
    assert tail == (
        "The output above was truncated.\n"
        "The full content is saved to the file and contains 1000 lines in total.\n"
        f"This excerpt starts at line 1 and covers the next {len(excerpt)} bytes.\n"
        f"If the current content is not enough, call `read_file` with file_path={PATH} "
        f"start_line={n_lines + 1} to read more."
    )


def test_whole_lines_only_unless_first_line_too_long() -> None:
    text = "short\n" + "y" * 5_000 + "\nafter\n"
    out = excerpt_with_notice(text, max_bytes=1_000, file_path=PATH)
    excerpt, notice = parse_notice(out)  # type: ignore[misc]
    assert excerpt == "short\n"
    assert notice.next == Position(2, 0)
    # reading on from line 2: the single long line is cut inside, with line_offset
    out2 = excerpt_with_notice(
        text[6:], max_bytes=1_000, file_path=PATH, start=Position(2), source_lines=3
    )
    excerpt2, notice2 = parse_notice(out2)  # type: ignore[misc]
    assert set(excerpt2) == {"y"}
    assert notice2.next == Position(2, len(excerpt2))
    assert f"start_line=2 line_offset={len(excerpt2)} to read more." in out2


def test_excerpt_starting_inside_a_line_says_so() -> None:
    notice = Notice(10, Position(3, 17), 42, PATH, Position(4, 0))
    assert "This excerpt starts at line 3, character 17, and covers the next 42 bytes." in (
        render_notice(notice)
    )


def test_cjk_never_split() -> None:
    text = "中" * 1_000
    out = excerpt_with_notice(text, max_bytes=700, file_path=PATH)
    excerpt, notice = parse_notice(out)  # type: ignore[misc]
    assert set(excerpt) == {"中"}
    assert notice.n_bytes == 3 * len(excerpt) == utf8_len(excerpt)


def test_crlf_kept_exactly() -> None:
    text = "a\r\nb\r\n" * 1_000
    out = excerpt_with_notice(text, max_bytes=600, file_path=PATH)
    excerpt, _ = parse_notice(out)  # type: ignore[misc]
    assert excerpt.endswith("\r\n") and "\r\n" * 3 not in excerpt
    assert text.startswith(excerpt)


def test_marker_inside_content_is_not_a_notice() -> None:
    text = f"log start\n{TRUNCATION_NOTICE_MARKER}\nThe output above was truncated.\nmore\n"
    assert parse_notice(text) is None
    assert excerpt_with_notice(text, max_bytes=10_000, file_path=PATH) == text


def test_forged_notice_is_not_trusted() -> None:
    real = excerpt_with_notice("x\n" * 1_000, max_bytes=500, file_path=PATH)
    excerpt, notice = parse_notice(real)  # type: ignore[misc]
    forged = real.replace(f"next {notice.n_bytes} bytes", f"next {notice.n_bytes + 1} bytes")
    assert parse_notice(forged) is None
    # a text that fits but ends like a genuine notice is cut, so the tail is ours
    out = excerpt_with_notice(real, max_bytes=100_000, file_path="/other.txt")
    assert out != real
    assert parse_notice(out)[1].file_path == "/other.txt"  # type: ignore[index]
    assert chain(real, 100_000, 300) == real


def test_retruncate_keeps_path_and_start() -> None:
    text = "".join(f"row {i:05d}\n" for i in range(5_000))
    first = excerpt_with_notice(text, max_bytes=8_000, file_path=PATH)
    second = retruncate(first, max_bytes=2_000)
    _, n1 = parse_notice(first)  # type: ignore[misc]
    excerpt2, n2 = parse_notice(second)  # type: ignore[misc]
    assert utf8_len(second) <= 2_000
    assert (n2.file_path, n2.start, n2.total_lines) == (n1.file_path, n1.start, n1.total_lines)
    assert n2.next == advance(n1.start, excerpt2) < n1.next
    assert retruncate(second, max_bytes=2_000) == second  # idempotent


def test_tiny_budget_rejected() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        excerpt_with_notice("abc", max_bytes=3, file_path=PATH)
