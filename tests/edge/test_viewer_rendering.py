"""Issue 48, the viewer's rendering, in chromium (tests/support/browser.py): a real agent of the
installed line whose outputs are cut and whose early turns a compaction moves to the dialog
store. Its page names each speaker once (no "user user", no "tool system": a tool's result
is under its tool and call), shows a cut output as an excerpt and a marker naming the saved
output, its size and how to read on (not a stray word), names each saved output by the tool
call that made it, and prints the session's counts as the report and `inspect` do;
AgentScope's ``<system-reminder>`` shows as a system hint, not the user's words; an output a
fleet's worker records again at each request is listed once, in the row it was first seen."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx import ContextConfig
from agentscope_ctx.cli import main
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._steps_file import StepFile
from agentscope_ctx.viewer import load_session, save_page
from agentscope_ctx.viewer._figures import session_figures
from tests.support.agent_line import Line
from tests.support.browser import open_page
from tests.support.lines import Msg
from tests.support.two_outputs import two_outputs_session

OUTPUTS = {
    "log": "".join(f"line {n} of the quokka log\n" for n in range(300)),
    "cjk": "日志 wombat 🙂 " * 400 + "no final newline",
}
MARKER = re.compile(
    r"(cut|masked)( \(from line [\d,]+\))?: ([\d,]+) bytes saved as (tool_result/\S+\.txt), "
    r"read on with read_file"
)


async def _session(wd: Path, line: Line) -> None:
    """Two cut outputs of `cat`, then long turns: a compaction moves them to the dialog."""
    config = ContextConfig(
        working_dir=wd,
        max_input_tokens=3_000,
        summarizer={"enabled": False},
        recall={"session": "s1"},
        tool_result={"recent_max_bytes": 2_048, "old_max_bytes": 1_024},
    )
    await two_outputs_session(line, config, OUTPUTS)


async def _texts(page: Any, selector: str) -> list[str]:
    return [str(t) for t in await page.locator(selector).all_text_contents()]


async def test_i48_headers_cut_outputs_and_tools_in_chromium(
    tmp_path: Path, line: Line, capsys: pytest.CaptureFixture[str]
) -> None:
    wd = tmp_path / "ctx"
    await _session(wd, line)
    # the steps record names the call that made each output
    outputs = [o for r in StepFile(wd).read("s1") for o in r["outputs"]]
    assert {(o["tool"], o["args"]) for o in outputs} == {("cat", 'arg="log"'), ("cat", 'arg="cjk"')}
    page_file = tmp_path / "view.html"
    assert (
        await asyncio.to_thread(main, ["view", str(wd), "--session", "s1", "-o", str(page_file)])
        == 0
    )
    capsys.readouterr()
    async with open_page(page_file) as (page, errors):
        who = await _texts(page, "#dialog .msg .who")
        assert who and "user user" not in who and "tool system" not in who, who
        assert "tool cat" in who and "user" in who
        calls = await _texts(page, "#dialog .msg.tool code.call")
        assert 'cat(arg="log")' in calls and 'cat(arg="cjk")' in calls
        # a cut output: its excerpt (never one stray word) and the marker, which opens it
        cut = page.locator("#dialog .msg.tool").filter(has=page.locator("a.notice.cut"))
        assert await cut.count() >= 2
        for msg in await cut.all():
            marker = await msg.locator("a.notice.cut").text_content()
            match = MARKER.fullmatch(str(marker))
            assert match, marker
            ref = str(await msg.locator("a.notice.cut").get_attribute("data-ref"))
            assert Path(ref).name == Path(match[4]).name
            assert int(match[3].replace(",", "")) == Path(ref).stat().st_size
            excerpt = str(await msg.locator(".out").first.text_content())
            assert len(excerpt.split()) > 3, excerpt  # not a stray word
            assert excerpt.split()[0] in {"line", "日志"}  # the output's own head
            await msg.locator("a.notice.cut").click()
            assert str(await page.locator("#excerpt").text_content()).startswith(ref)
        # the calls' table names each saved output by its call
        saved = await _texts(page, "#calls a.notice")
        assert sorted(s.split(": tool_result/")[0] for s in saved) == [
            'cat(arg="cjk")',
            'cat(arg="log")',
        ], saved
    assert errors == []


async def test_i48_the_pages_counts_are_the_reports_and_inspects(
    tmp_path: Path, line: Line, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page prints `session_figures` (the demo's report takes its counts from it too,
    tests/edge/test_viewer.py), and they agree with `inspect --json`'s. The summaries shown
    cut at this budget have their whole text saved under tool_result/: both count them apart
    from the two outputs (`core.search._saved_summary`; both counted them as outputs before)."""
    wd = tmp_path / "ctx"
    await _session(wd, line)
    config = ContextConfig(working_dir=wd)
    view = load_session(config, "s1")
    figures = session_figures(view)
    page_file = tmp_path / "view.html"
    save_page(view, page_file)
    assert await asyncio.to_thread(main, ["inspect", str(wd), "--json"]) == 0
    inspected = json.loads(capsys.readouterr().out)
    assert figures.saved_outputs == inspected["outputs"]["count"] == 2
    assert figures.saved_bytes == inspected["outputs"]["bytes"]
    saved = inspected["saved_summaries"]
    assert figures.saved_summaries == (saved["count"], saved["bytes"]) and saved["count"] >= 1
    assert len(list((wd / "tool_result").iterdir())) == 2 + saved["count"]
    assert figures.dialog_messages == inspected["dialog"]["messages"] > 0
    assert figures.compactions and figures.model_calls == len(view.calls)
    async with open_page(page_file) as (page, errors):
        names = await _texts(page, "#figures th")
        values = await _texts(page, "#figures td")
    assert errors == []
    assert list(zip(names, values, strict=True)) == figures.rows()


async def test_i48_a_system_reminder_is_a_system_hint_not_the_users_words(
    tmp_path: Path,
) -> None:
    reminder = (
        "<system-reminder>\n<current-time>2026-12-06T18:24:30</current-time>\n</system-reminder>"
    )
    store = DialogStore(tmp_path, record_fields={"agent": "coder", "session": "s"})
    await store.append(
        [
            Msg("user", "Why did the build fail?", "user"),
            Msg("user", reminder, "user"),
            Msg("alice", f"Look at the log too.\n{reminder}", "user"),
        ]
    )
    page_file = tmp_path / "view.html"
    save_page(load_session(ContextConfig(working_dir=tmp_path), "s"), page_file)
    async with open_page(page_file) as (page, errors):
        who = await _texts(page, "#dialog .msg .who")
        assert who == ["user", "system hint", "user alice"]
        users = await _texts(page, "#dialog .msg.user .text")
        assert users == ["Why did the build fail?", "Look at the log too."]
        hints = page.locator("#dialog .msg .hint")
        assert await hints.count() == 2
        for text in await hints.all_text_contents():
            assert "<current-time>2026-12-06T18:24:30</current-time>" in text
            assert "not the user's words" in text
        assert await page.locator("#dialog .msg.hint .text").count() == 0
    assert errors == []


async def test_i48_an_output_is_listed_in_the_row_it_was_first_seen(tmp_path: Path) -> None:
    """A fleet's worker restores a session's context at each request and records its
    outputs as new each time: the page lists each once, in the first row naming it."""
    steps = StepFile(tmp_path)
    refs = [str(tmp_path / "tool_result" / f"o{n}.txt") for n in range(3)]
    for run, named in enumerate([refs[:1], refs[:2], refs, refs], start=1):
        steps.append(
            {"agent": "a", "session": "s", "run": run, "call": True, "before": 900,
             "after": 900, "threshold": 800, "budget": 1_000,
             "outputs": [{"ref": ref, "bytes": 10, "tool": "cat", "args": ""} for ref in named]}
        )  # fmt: skip
    page_file = tmp_path / "view.html"
    save_page(load_session(ContextConfig(working_dir=tmp_path), "s"), page_file)
    async with open_page(page_file) as (page, errors):
        rows = [
            await row.locator("a.notice").all()
            for row in await page.locator("#calls tr.call").all()
        ]
        shown = [[await a.get_attribute("data-ref") for a in row] for row in rows]
    assert errors == []
    assert shown == [[refs[0]], [refs[1]], [refs[2]], []]


async def test_i48_an_output_saved_when_masked_is_in_the_steps_record(
    tmp_path: Path, line: Line
) -> None:
    """`read_file` outputs of files (their notices name the files) masked under pressure: the
    masking saves each anew and rewrites its message in place, and the steps record names
    every saved output of the session, with the call that made it, so the page lists it (the
    record read only the messages new since the last run: it named none of them)."""
    wd = tmp_path / "ctx"
    wd.mkdir()
    for n in range(4):
        (wd / f"notes{n}.md").write_text(
            "".join(f"note {n}.{k}: the wombat digs a burrow\n" for k in range(3_000))
        )
    config = ContextConfig(
        working_dir=wd,
        read_roots=[wd],
        max_input_tokens=6_000,
        summarizer={"enabled": False},
        compactor={"enabled": False},
        recall={"session": "s1"},
        # (0.15: the reads enter large enough to pass the trigger, and masking cuts them;
        # masking and a trigger under the budget, not the defaults below 8,000 tokens)
        compact_trigger_ratio=0.75,
        tool_result={
            "mask_after": 10,
            "recent_n": 1,
            "recent_max_bytes": 8_000,
            "old_max_bytes": 1_024,
            "recent_max_share": 0.15,
        },
    )
    session = line.session(config, line.fake_model(default="ok"), {"cat": str})
    try:
        for n in range(4):
            path = str(wd / f"notes{n}.md")
            await session.turn(
                f"read notes {n}", line.tool_call("read_file", call_id=f"c{n}", file_path=path)
            )
    finally:
        await session.close()
    saved = sorted(str(p) for p in (wd / "tool_result").iterdir())
    assert saved  # the masked outputs' copies
    records = StepFile(wd).read("s1")
    assert any(r["freed"] for r in records)
    outputs = {o["ref"]: o for r in records for o in r["outputs"]}
    assert sorted(ref for ref in outputs if "/tool_result/" in ref) == saved
    for ref in saved:
        assert outputs[ref]["tool"] == "read_file"
        assert outputs[ref]["args"].startswith('file_path="'), outputs[ref]
