"""The deterministic extractive summary and the summary validator."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_ctx.core.summary._extractive import (
    MIN_SUMMARY_CHARS,
    REQUIRED_SECTIONS,
    SECTIONS,
    extractive_summary,
    render_msg,
    validate_summary,
)
from tests.support.lines import Msg, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

PARSER_SOURCE = """def parse_header(line: str) -> dict[str, str]:
    if not line.startswith("HDR"):
        raise ValueError("bad header")
    return {"kind": line[3:].strip()}
"""
PYTEST_OUTPUT = """<returncode>1</returncode><stdout>============ FAILURES ============
____________ test_header ____________

    def test_header():
>       assert parse_header("HDR v1\\r") == {"kind": "v1"}

tests/test_parser.py:42:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
Traceback (most recent call last):
  File "src/app/parser.py", line 3, in parse_header
E   ValueError: bad header

tests/test_parser.py:42: ValueError
FAILED tests/test_parser.py::test_header - ValueError: bad header
1 failed in 0.03s
</stdout><stderr></stderr>"""


def call(call_id: str, name: str, **arguments: object) -> Msg:
    block = ToolUseBlock(type="tool_use", id=call_id, name=name, input=arguments)
    return Msg("Friday", [block], "assistant")


def result(call_id: str, name: str, output: str) -> Msg:
    block = ToolResultBlock(
        type="tool_result", id=call_id, name=name, output=[TextBlock(type="text", text=output)]
    )
    return Msg("system", [block], "system")


def trajectory() -> list[Msg]:
    """A user asks to fix a failing test; the agent reads the parser and runs pytest."""
    return [
        Msg(
            "user",
            "The test tests/test_parser.py::test_header fails, please fix it. You must not "
            "change the signature of parse_header. Don't edit the tests.",
            "user",
        ),
        Msg("Friday", "I'll read the parser first.", "assistant"),
        call("c1", "read_file", file_path="src/app/parser.py"),
        result("c1", "read_file", PARSER_SOURCE),
        call("c2", "execute_shell_command", command="pytest tests/test_parser.py -x"),
        result("c2", "execute_shell_command", PYTEST_OUTPUT),
        Msg(
            "Friday",
            "The header check rejects the trailing CR. Next I will strip '\\r' in "
            "parse_header and rerun pytest.",
            "assistant",
        ),
    ]


def sections(summary: str) -> dict[str, str]:
    """The text under each `##` heading."""
    parts = re.split(r"^## (.+)$", summary, flags=re.M)
    return {name.strip(): body for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def test_trajectory_keeps_paths_errors_goal_constraints_and_plan() -> None:
    summary = extractive_summary("", trajectory())

    assert validate_summary(summary) is None
    found = sections(summary)
    assert list(found) == list(SECTIONS)
    assert "please fix it" in found["Goal"]
    assert "must not change the signature of parse_header" in found["Constraints"]
    assert "Don't edit the tests" in found["Constraints"]
    # the tool calls and their outcomes: reading source that mentions ValueError is no failure
    done, blocked = found["Progress"].split("### Blocked")
    assert '`read_file` {"file_path": "src/app/parser.py"} → ok' in done
    assert "`execute_shell_command`" in blocked
    assert "failed: FAILED tests/test_parser.py::test_header - ValueError: bad header" in blocked
    critical = found["Critical Context"]
    assert "File: src/app/parser.py" in critical
    assert "File: tests/test_parser.py:42" in critical
    assert "Error: ValueError: bad header" in critical
    assert "strip '\\r' in parse_header" in found["Next Steps"]


def test_merges_into_previous_summary_and_replaces_next_steps() -> None:
    previous = (
        "## Goal\n- Port the CLI to click\n\n## Constraints\n- Always use Python 3.10\n\n"
        "## Progress\n### Done\n- Wrote cli.py\n### In progress\n- (none)\n### Blocked\n"
        "- (none)\n\n## Key Decisions\n- Chose click over argparse\n\n"
        "## Next Steps\n- Add the --verbose flag\n\n## Critical Context\n- Entry point: app.cli:main\n"
    )
    summary = extractive_summary(previous, trajectory())
    found = sections(summary)

    assert validate_summary(summary) is None
    assert "- Port the CLI to click" in found["Goal"]  # the first goal stays first
    assert found["Goal"].index("Port the CLI") < found["Goal"].index("please fix it")
    assert "- Always use Python 3.10" in found["Constraints"]
    assert "- Wrote cli.py" in found["Progress"]
    assert "- Chose click over argparse" in found["Key Decisions"]
    assert "--verbose" not in found["Next Steps"]  # superseded by the newest plan
    assert "rerun pytest" in found["Next Steps"]
    assert "- Entry point: app.cli:main" in found["Critical Context"]


def test_previous_next_steps_kept_when_no_new_plan() -> None:
    previous = extractive_summary("", trajectory())
    summary = extractive_summary(previous, [Msg("user", "thanks", "user")])
    assert "rerun pytest" in sections(summary)["Next Steps"]


def test_is_a_fixed_point_when_fed_its_own_output() -> None:
    once = extractive_summary("", trajectory())
    assert extractive_summary(once, trajectory()) == once


def test_deduplicates_repeated_calls_and_errors() -> None:
    messages = trajectory()[4:6] * 5
    summary = extractive_summary("", messages)
    assert summary.count("Error: ValueError: bad header") == 1
    assert summary.count("`execute_shell_command`") == 1


def test_pending_tool_call_is_in_progress() -> None:
    summary = extractive_summary("", [call("c9", "web_search", query="tiktoken offline")])
    in_progress = sections(summary)["Progress"].split("### In progress")[1]
    assert "`web_search`" in in_progress.split("### Blocked")[0]
    assert "no result yet" in in_progress


def test_nonzero_exit_code_without_error_line_is_blocked() -> None:
    messages = [
        call("c1", "execute_shell_command", command="make lint"),
        result("c1", "execute_shell_command", "<returncode>2</returncode><stdout>3 issues"),
    ]
    assert "failed: exit code 2" in sections(extractive_summary("", messages))["Progress"]


def test_chinese_labels_keep_english_headings() -> None:
    summary = extractive_summary("", trajectory(), language="zh")
    assert validate_summary(summary) is None
    assert "文件: src/app/parser.py" in summary
    assert "错误: ValueError: bad header" in summary
    assert "## Goal" in summary and "（无）" in summary


def test_shrinks_to_max_chars() -> None:
    messages = [Msg("user", f"You must handle case {i}: " + "x" * 300, "user") for i in range(60)]
    full = extractive_summary("", messages)
    small = extractive_summary("", messages, max_chars=MIN_SUMMARY_CHARS)
    assert len(small) <= MIN_SUMMARY_CHARS < len(full)
    assert validate_summary(small) is None
    assert "case 0" in small and "case 59" in small  # first and newest survive the caps


def test_validate_summary_reports_problems() -> None:
    assert validate_summary("") == "the summary is empty"
    problem = validate_summary("## Goal\n- x\n## Progress\n- y")
    assert problem is not None and "'## Constraints'" in problem and "'## Next Steps'" in problem
    headings_only = "\n".join(f"## {name}" for name in REQUIRED_SECTIONS)
    assert validate_summary(headings_only) == "the summary has headings but no content"
    assert validate_summary(headings_only + "\n- done") is None
    # Chinese aliases and decorated headings are recognised
    zh = "## 目标\n- a\n## 约束\n- b\n## 进展\n- c\n## 关键决策\n- d\n## 下一步\n- e"
    assert validate_summary(zh) is None
    assert validate_summary(headings_only.replace("## Goal", "## **Goal** (目标)") + "\n-") is None


def test_render_msg_is_a_compact_transcript() -> None:
    msg = Msg(
        "Friday",
        [
            ThinkingBlock(type="thinking", thinking="secret reasoning"),
            TextBlock(type="text", text="Reading it."),
            ToolUseBlock(type="tool_use", id="c1", name="read_file", input={"file_path": "a.py"}),
        ],
        "assistant",
    )
    rendered = render_msg(msg)
    assert rendered == '[assistant Friday]\nReading it.\n-> call read_file {"file_path": "a.py"}'
    assert render_msg(result("c1", "read_file", "x = 1")) == (
        "[system system]\n<- result of read_file:\nx = 1"
    )


_texts = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"]), max_size=400
) | st.sampled_from(
    [
        "## Goal",
        "### Done",
        "- (none)",
        "You must never do that.",
        "E   KeyError: 'x'",
        "see src/a/b.py:12 and README.md",
        "Traceback (most recent call last):",
        "<returncode>1</returncode>",
    ]
)


@st.composite
def _messages(draw: st.DrawFn) -> list[Msg]:
    out: list[Msg] = []
    for i in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["user", "assistant", "call", "result"]))
        if kind in ("user", "assistant"):
            out.append(Msg(kind, draw(_texts), kind))  # type: ignore[arg-type]
        elif kind == "call":
            out.append(call(f"c{i}", draw(st.sampled_from(["sh", "read"])), arg=draw(_texts)))
        else:
            out.append(result(f"c{draw(st.integers(0, 25))}", "sh", draw(_texts)))
    return out


@settings(max_examples=150, deadline=None)
@given(
    previous=_texts | st.lists(_texts, max_size=30).map("\n".join),
    messages=_messages(),
    language=st.sampled_from(["en", "zh"]),
    max_chars=st.integers(0, 20_000),
)
def test_always_valid_and_bounded(
    previous: str, messages: list[Msg], language: str, max_chars: int
) -> None:
    summary = extractive_summary(previous, messages, language=language, max_chars=max_chars)
    assert validate_summary(summary) is None
    assert len(summary) <= max(max_chars, MIN_SUMMARY_CHARS)
    assert [line[3:] for line in summary.splitlines() if line.startswith("## ")] == list(SECTIONS)


# -- odd messages (issue 11, item 4) ----------------------------------------------------------


def odd(content: object) -> Msg:
    msg = Msg("user", "placeholder", "user")
    msg.content = content  # type: ignore[assignment]
    return msg


def test_i11_04_odd_messages_do_not_break_the_summary() -> None:
    loop: dict[str, object] = {}
    loop["self"] = loop
    messages = [
        odd(None),
        Msg("user", "Fix src/app/parser.py, you must keep the API.", "user"),
        odd([None, "a bare string", 42, {"type": "text", "text": None}]),
        odd({"type": "text", "text": "one block, not in a list"}),
        odd(("a", "tuple")),
        call("c1", "shell", command={("tuple", "key"): 1}, loop=loop),
        result("c1", "shell", "ok"),
    ]
    summary = extractive_summary("", messages)
    assert validate_summary(summary) is None
    body = sections(summary)
    assert "Fix src/app/parser.py" in body["Goal"] and "one block, not in a list" in body["Goal"]
    assert "`shell`" in body["Progress"]
    assert render_msg(messages[0]) == "[user user]"
    assert render_msg(messages[2]) == "[user user]\na bare string\n42\nNone"


_odd_input = st.dictionaries(
    st.text(max_size=3) | st.integers() | st.tuples(st.integers()),
    st.sets(st.integers()) | _texts,
    max_size=2,
)
_odd_content = st.one_of(
    st.none(),
    _texts,
    st.integers(),
    st.builds(lambda t: {"type": "text", "text": t}, _texts),
    st.lists(
        st.one_of(
            st.none(),
            _texts,
            st.builds(lambda t: {"type": "text", "text": t}, st.none() | st.integers() | _texts),
            st.builds(
                lambda i, arg: ToolUseBlock(type="tool_use", id=i, name="sh", input=arg),
                st.sampled_from(["c1", "c2"]),
                _odd_input,
            ),
            st.builds(
                lambda i, out: ToolResultBlock(type="tool_result", id=i, name="sh", output=out),
                st.sampled_from(["c1", "c2"]),
                st.none() | _texts | st.lists(st.none() | _texts, max_size=2),
            ),
        ),
        max_size=4,
    ),
)


@settings(max_examples=100, deadline=None)
@given(contents=st.lists(_odd_content, max_size=8), language=st.sampled_from(["en", "zh"]))
def test_i11_04_any_message_content_gives_a_valid_summary(
    contents: list[object], language: str
) -> None:
    messages = [odd(content) for content in contents]
    summary = extractive_summary("", messages, language=language, max_chars=2_000)
    assert validate_summary(summary) is None and len(summary) <= 2_000
    for msg in messages:
        assert render_msg(msg).startswith("[user user]")
