"""Bad input (issue 7, item 4): Hypothesis fuzz of the notice parser, `read_file`'s
arguments and config files (line-neutral); odd message contents through the 1.x manager are
in `test_fuzz_agent.py`."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml
from agentscope.tool import ToolResponse
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentscope_ctx.core._errors import MAX_CONFIG_MESSAGE_CHARS, ConfigError
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.core.truncation._truncation import (
    TRUNCATION_NOTICE_MARKER,
    Notice,
    Position,
    advance,
    parse_notice,
    render_notice,
    utf8_len,
)
from agentscope_ctx.recall._read_file import FileReader
from agentscope_ctx.stores._tool_results import ToolResultPolicy
from tests.support.lines import text_of

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# -- the notice parser ------------------------------------------------------------------

_SAMPLE_NOTICE = render_notice(Notice(3, Position(1, 0), 5, "/p", Position(2, 0)))
_PIECES = st.characters(blacklist_categories=("Cs",)) | st.sampled_from(
    ["\n", "\r\n", "é", "中", "😀", "<<<TRUNCATED>>>", " ", "0", "9", "\n" + _SAMPLE_NOTICE,
     "abcd\n", _SAMPLE_NOTICE[:60], " line_offset=3", " start_line=2"]
)  # fmt: skip


def _texts(max_size: int) -> st.SearchStrategy[str]:
    return st.lists(_PIECES, max_size=max_size).map("".join)


_surrogate_text = st.text(
    alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF) | st.sampled_from("ab\n"),
    max_size=20,
)


def _assert_genuine(text: str) -> None:
    parsed = parse_notice(text)
    if parsed is None:
        return
    excerpt, notice = parsed
    assert text.startswith(excerpt + "\n" + TRUNCATION_NOTICE_MARKER + "\n")
    assert notice.n_bytes == utf8_len(excerpt) >= 1
    assert notice.next == advance(notice.start, excerpt)
    assert notice.start.line >= 1
    assert notice.next.line <= notice.total_lines
    assert text == excerpt + "\n" + render_notice(notice)  # the notice is the exact form


@FUZZ
@given(_texts(120) | _surrogate_text)
def test_parse_notice_never_raises_on_any_text(text: str) -> None:
    _assert_genuine(text)


_lines = st.integers(min_value=0, max_value=10_000)
_n = st.integers(min_value=0, max_value=5_000)


@FUZZ
@given(
    excerpt=_texts(60),
    total=_lines,
    start=st.builds(Position, _lines, _n),
    n_bytes=_n,
    path=st.text(min_size=0, max_size=40),
    nxt=st.builds(Position, _lines, _n),
    honest=st.booleans(),
)
def test_parse_notice_accepts_only_agreeing_numbers(
    excerpt: str, total: int, start: Position, n_bytes: int, path: str, nxt: Position, honest: bool
) -> None:
    """Notices in the exact form with arbitrary numbers: accepted iff the numbers agree."""
    if honest:  # numbers that agree (when the excerpt and start allow it)
        n_bytes = utf8_len(excerpt)
        nxt = advance(start, excerpt)
        total = max(total, nxt.line)
    text = excerpt + "\n" + render_notice(Notice(total, start, n_bytes, path, nxt))
    _assert_genuine(text)
    agree = (
        start.line >= 1
        and n_bytes >= 1
        and n_bytes == utf8_len(excerpt)
        and nxt == advance(start, excerpt)
        and nxt.line <= total
        and path.strip() == path
        and path != ""
        and "\n" not in path
        and "\r" not in path
    )
    if agree and not any(c in path for c in "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
        # a path with odd whitespace may still parse; an agreeing, plain one must
        assert parse_notice(text) is not None, text
    # and the rendered notice appended to a tampered excerpt is never accepted
    if parse_notice(text) is not None:
        assert (
            parse_notice(excerpt + "x\n" + render_notice(Notice(total, start, n_bytes, path, nxt)))
            is None
        )


# -- read_file arguments ----------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
SECRET = "TOP-SECRET-OUTSIDE-THE-ROOTS"


_ROOT = "{root}"  # replaced by the temporary root of each example


def _paths() -> st.SearchStrategy[Any]:
    return (
        st.sampled_from(
            [
                "notes.txt",
                "sub/inner.txt",
                "../secret.txt",
                "sub/../../secret.txt",
                "link_out.txt",
                "hard_out.txt",
                "fifo",
                "sub",
                "empty.txt",
                "bin.dat",
                "latin1.txt",
                f"{_ROOT}/notes.txt",
                f"{_ROOT}/../secret.txt",
                "/etc/passwd",
                "~/secret.txt",
                "",
                "   ",
                "\x00",
                "notes.txt\x00../secret.txt",
                "a" * 5000,
                "😀/中.txt",
            ]
        )
        | _json
    )


def _positions(small: int) -> st.SearchStrategy[Any]:
    """Any JSON value, a plausible number, or a huge one (issue 11, item 10: 10**12 once
    allocated a 4 TB buffer)."""
    return _json | st.integers(-5, small) | st.integers(small, 10**15)


def _make_tree(base: Path) -> Path:
    root = base / "root"
    (root / "sub").mkdir(parents=True)
    (base / "secret.txt").write_text(SECRET + "\n")
    (root / "notes.txt").write_text("".join(f"line {i} 中文 😀\n" for i in range(2_000)))
    (root / "sub" / "inner.txt").write_text("x" * 100_000)  # one long line
    (root / "empty.txt").write_text("")
    (root / "bin.dat").write_bytes(b"\x00\x01\x02" * 10)
    (root / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    (root / "link_out.txt").symlink_to(base / "secret.txt")
    os.link(base / "secret.txt", root / "hard_out.txt")
    os.mkfifo(root / "fifo")
    return root


@FUZZ
@example(file_path="sub/inner.txt", start_line=1, line_offset=10**12)
@example(file_path="notes.txt", start_line=10**12, line_offset=0)
@example(file_path="notes.txt", start_line=2_000, line_offset=10**12)
@example(file_path="fifo", start_line=1, line_offset=0)
@given(file_path=_paths(), start_line=_positions(3_000), line_offset=_positions(200_000))
def test_read_file_any_arguments_gives_a_tool_response(
    file_path: Any, start_line: Any, line_offset: Any
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root = _make_tree(base)
        config = ContextConfig(
            working_dir=root, tool_result={"recent_max_bytes": 2_048, "old_max_bytes": 1_024}
        )
        reader = FileReader([root], ToolResultPolicy(config.tool_result))
        if isinstance(file_path, str):
            file_path = file_path.replace(_ROOT, str(root))
        response = asyncio.run(reader.read_file(file_path, start_line, line_offset))
        assert isinstance(response, ToolResponse)  # AgentScope's, on either line
        text = text_of(response)
        assert SECRET not in text
        if text.startswith("Error"):  # says what went wrong, never a bare "Error: "
            assert text.startswith("Error: ") and len(text.strip()) > len("Error: ") + 10
        parsed = parse_notice(text)
        if parsed is not None:
            assert Path(parsed[1].file_path).resolve().is_relative_to(root.resolve())


# -- config files -----------------------------------------------------------------------

_FIELDS = [
    "working_dir", "max_input_tokens", "compact_trigger_ratio", "keep_recent_ratio",
    "tool_result", "compactor", "summarizer", "consolidation", "token_counter", "read_roots",
    "memory_max_tokens", "context", "unknown",
]  # fmt: skip
_SUB = {
    "tool_result": ["recent_n", "recent_max_bytes", "old_max_bytes", "markdown_recent_max_bytes",
                    "markdown_old_max_bytes", "protected_globs", "protected_tools",
                    "retention_days", "bogus"],
    "compactor": ["enabled", "language", "timeout_seconds", "max_input_tokens", "bogus"],
    "summarizer": ["enabled", "bogus"],
    "consolidation": ["enabled", "at", "timezone", "days", "bogus"],
}  # fmt: skip
_yaml_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["00:00", "25:61", "UTC", "Mars/Olympus", "en", "zh", "~", "/tmp/x",
                       "o200k_base", "", " ", "\x00", "../../etc"])
)  # fmt: skip
_odd_key = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats()
"""Keys YAML allows that are not strings (lists and mappings cannot be keys of a Python dict)."""
_yaml_value = st.recursive(
    _yaml_scalar,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6) | _odd_key, inner, max_size=3)
    ),
    max_leaves=5,
)


@st.composite
def _config_mapping(draw: st.DrawFn) -> dict[object, Any]:
    data: dict[object, Any] = {}
    for name in draw(st.lists(st.sampled_from(_FIELDS) | _odd_key, max_size=6, unique=True)):
        if name in _SUB and draw(st.booleans()):
            keys = draw(st.lists(st.sampled_from(_SUB[name]) | _odd_key, max_size=4, unique=True))
            data[name] = {key: draw(_yaml_value) for key in keys}
        elif name == "context" and draw(st.booleans()):
            data[name] = draw(_config_mapping())
        else:
            data[name] = draw(_yaml_value)
    return data


@FUZZ
@given(data=_config_mapping())
@example(data={1: 2})  # issue 11: a key that is not a string raised TypeError
@example(data={"tool_result": {1: 2}})
@example(data={None: 0, "context": {True: 1}})
def test_random_config_files_give_a_config_or_a_config_error(data: dict[object, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ctx.yaml"
        text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
        path.write_text(text, encoding="utf-8")
        try:
            config = ContextConfig.from_yaml(path)
        except ConfigError as exc:
            assert str(exc) and len(str(exc)) <= MAX_CONFIG_MESSAGE_CHARS
        else:
            assert isinstance(config, ContextConfig)


@FUZZ
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_random_config_bytes_give_a_config_or_a_config_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ctx.yaml"
        path.write_bytes(raw)
        try:
            ContextConfig.from_yaml(path)
        except ConfigError as exc:
            assert len(str(exc)) <= MAX_CONFIG_MESSAGE_CHARS
