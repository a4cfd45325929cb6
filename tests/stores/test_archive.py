"""The session archive's format (`stores._archive`): any output's bytes and any record's text
come back exactly, in JSONL and embedded in the HTML page; an archive cut short, tampered with
or of another version is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentscope_ctx.core._errors import ContextUsageError
from agentscope_ctx.stores._archive import ARCHIVE_ELEMENT, FORMAT, output_line, parse_archive
from agentscope_ctx.viewer._page import script_json

HEADER = {"v": 1, "kind": "session", "format": FORMAT, "session": "s1"}
END = {"v": 1, "kind": "end", "counts": {}, "bytes": 0}


def _jsonl(lines: list[dict[str, Any]]) -> str:
    """As `agentscope-ctx export` writes it (a line with a lone surrogate escaped)."""
    out = []
    for line in lines:
        text = json.dumps(line, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(line)
        out.append(text + "\n")
    return "".join(out)


@given(data=st.binary(), text=st.text(), session=st.text())
def test_outputs_and_records_round_trip_exactly(data: bytes, text: str, session: str) -> None:
    record = {"v": 1, "msg": {"id": "m1", "content": text}, "agent": "a", "session": session}
    lines = [
        HEADER,
        output_line("tool_result/x.txt", "a", session, data),
        output_line("pg-output:0f", None, session, text.encode("utf-8", "surrogatepass")),
        {"v": 1, "kind": "dialog", "record": record},
        END,
    ]
    page = (
        f'<!DOCTYPE html><html><body><script type="application/json" id="{ARCHIVE_ELEMENT}">'
        f"{script_json(json.loads(json.dumps(lines)))}</script></body></html>"
    )
    for form in (_jsonl(lines), page):
        archive = parse_archive(form)
        assert [o.data for o in archive.outputs] == [data, text.encode("utf-8", "surrogatepass")]
        assert archive.outputs[1].agent is None and archive.outputs[0].session == session
        assert archive.dialog == [record]


@pytest.mark.parametrize(
    ("lines", "why"),
    [
        ([HEADER, output_line("r", "a", "s", b"x")], "cut short"),
        ([{**HEADER, "v": 2}, END], "of version 1"),
        ([{"v": 1, "kind": "dialog", "record": {}}, END], "does not start with its header"),
        ([HEADER, {**output_line("r", "a", "s", b"x"), "text": "y"}, END], "SHA-256"),
        ([], "empty"),
    ],
)
def test_an_archive_that_is_not_whole_is_refused(lines: list[dict[str, Any]], why: str) -> None:
    with pytest.raises(ContextUsageError, match=why):
        parse_archive(_jsonl(lines))
    with pytest.raises(ContextUsageError, match="not a session archive"):
        parse_archive("deploy token\n")
