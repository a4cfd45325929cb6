"""Checks shared by tests/agentscope1/test_crash.py and tests/agentscope1/test_concurrency.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentscope.message import Msg

from agentscope_ctx.core.truncation._truncation import parse_notice
from agentscope_ctx.stores._dialog import DialogReadReport
from tests.support.chain import follow_chain

_STORE_REF = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*:(?![\\/])")
"""An output's ref that is not a file path: ``scheme:id`` (the PostgreSQL store's
``pg-output:<hex>``); a file path has no such prefix (nor a drive letter's ``C:\\``)."""


def duplicates(ids: list[str]) -> list[str]:
    seen: set[str] = set()
    return [i for i in ids if i in seen or seen.add(i)]  # type: ignore[func-returns-value]


def check_bad_lines(
    dialog_dir: Path, report: DialogReadReport, allowed: set[tuple[str, int]]
) -> set[tuple[str, int]]:
    """Only a torn LAST line of a file is acceptable (a kill in the middle of a write), or a
    line that was such a torn last line at an earlier check (a writer has since ended it with
    a newline and appended after it). Returns the torn lines seen now."""
    torn: set[tuple[str, int]] = set()
    for name, number, reason in report.bad_lines:
        if (name, number) in allowed:
            continue
        data = (dialog_dir / name).read_bytes()
        last = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        assert reason.startswith("torn last line") and number == last, (
            f"bad dialog line that is not a torn last line: {name}:{number}: {reason}"
        )
        torn.add((name, number))
    return torn


def _texts(block: dict[str, Any]) -> list[str]:
    output = block.get("output")
    if isinstance(output, str):
        return [output]
    return [b.get("text", "") for b in output or [] if isinstance(b, dict) and "text" in b]


def tool_calls(msgs: list[Msg]) -> dict[str, tuple[str, dict[str, Any]]]:
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for msg in msgs:
        for block in msg.get_content_blocks("tool_use"):
            calls[str(block["id"])] = (str(block["name"]), dict(block.get("input") or {}))
    return calls


async def check_notices(
    manager: Any,
    live: list[Msg],
    known: list[Msg],
    *,
    full_output: bool = True,
    tools: dict[str, Any] | None = None,
) -> tuple[int, set[str]]:
    """Every truncation notice in `live` names an existing file (or an output of a store
    other than files, by its id: `_STORE_REF`), a different one for each tool_result block,
    and following the `read_file` chain from the excerpt gives back exactly the tool's
    output (recomputed from the tool_use input found in `known` or `live`).

    `tools`: the session's tool functions by name (default: tests/support/crash_session's), each
    returning its output as a `ToolResponse` or as text.

    Returns how many notices were followed and the files they name."""
    if tools is None:
        from tests.support.crash_session import TOOLS as tools
    calls = tool_calls([*known, *live])
    files: dict[str, str] = {}

    async def read(path: str, line: int, offset: int) -> str:
        response = await manager.reader.read_file(path, line, offset)
        block = response.content[0]  # a dict on 1.x, a TextBlock on 2.x
        return str(block["text"] if isinstance(block, dict) else block.text)

    followed = 0
    for msg in live:
        for block in msg.get_content_blocks("tool_result"):
            for out_text in _texts(dict(block)):
                parsed = parse_notice(out_text)
                if parsed is None:
                    continue
                path = parsed[1].file_path
                if not _STORE_REF.match(path):  # (a store's id, e.g. pg-output:…: read below)
                    assert Path(path).is_file(), f"notice in {msg.id} names a missing file {path}"
                owner = f"{msg.id}/{block['id']}"
                assert files.setdefault(path, owner) == owner, (
                    f"two tool results point to one file {path}: {files[path]} and {owner}"
                )
                full = await follow_chain(out_text, read)
                name, tool_input = calls.get(str(block["id"]), ("", {}))
                if full_output and name in tools:
                    expected = tools[name](**tool_input)
                    if not isinstance(expected, str):
                        expected = expected.content[0]["text"]
                    assert full == expected, f"chain of {owner} does not give the tool output"
                followed += 1
    return followed, set(files)
