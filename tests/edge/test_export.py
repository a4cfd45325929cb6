"""Export and import of a session (issue 47, docs/data.md): a session of a real agent on the
installed line (2.x `Agent`, 1.x `ReActAgent`) exported by `agentscope-ctx export` and
imported into another working dir by `agentscope-ctx import`, as JSONL and as the viewer's
page: every output byte for byte, its notices pointing at the restored outputs, which
`read_file` reads and search finds; one audit line each. The session runs with the defaults
(a 3,000-token budget: its compactions' summaries are shown cut, their whole text saved
beside the outputs), and what is saved of a summary is exported and restored apart from the
tool outputs (`core.search._saved_summary`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx import ContextConfig
from agentscope_ctx.cli import main
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.ladder._tool_policy import ToolResultPolicy
from agentscope_ctx.core.search._saved_summary import SAVED_SUMMARY
from agentscope_ctx.core.search._search_hits import Filters, format_result
from agentscope_ctx.recall._read_file import FileReader
from agentscope_ctx.stores._archive import parse_archive
from agentscope_ctx.stores._audit import AuditFile
from agentscope_ctx.stores._export import saved_summaries
from agentscope_ctx.stores._search import SearchIndex
from tests.support.agent_line import Line
from tests.support.browser import open_page
from tests.support.two_outputs import OUTPUTS, two_outputs_session


async def _session(wd: Path, line: Line) -> None:
    config = ContextConfig(
        working_dir=wd,
        max_input_tokens=3_000,
        summarizer={"enabled": False},
        compactor={"enabled": False},
        recall={"session": "s1"},
        tool_result={"recent_max_bytes": 2_048, "old_max_bytes": 1_024},
    )
    await two_outputs_session(line, config)


async def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """The command's --json, run as from a shell (its own event loop: a thread here)."""
    assert await asyncio.to_thread(main, argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


@pytest.mark.parametrize("fmt", ["jsonl", "html"])
async def test_a_session_round_trips_byte_for_byte(
    fmt: str, tmp_path: Path, line: Line, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    await _session(src, line)
    archive = tmp_path / f"s1.{fmt}"
    out = await _run(
        ["export", str(src), "--session", "s1", "--format", fmt, "-o", str(archive), "--json"],
        capsys,
    )
    assert out["counts"]["outputs"] == 2 and out["counts"]["dialog"] > 0, out
    assert out["counts"]["steps"] > 0 and out["counts"]["summaries"] >= 1  # its compactions
    assert out["counts"]["saved_summaries"] >= 1  # (shown cut at this budget)
    assert oct(archive.stat().st_mode & 0o777) == "0o600"
    parsed = parse_archive(archive.read_text(encoding="utf-8"))
    outputs = [o for o in parsed.outputs if o.tool != SAVED_SUMMARY]
    assert sorted(o.data for o in outputs) == sorted(t.encode() for t in OUTPUTS.values())
    assert {o.tool for o in outputs} == {"cat"}  # the call that made each
    summaries = [o for o in parsed.outputs if o.tool == SAVED_SUMMARY]
    assert len(summaries) == out["counts"]["saved_summaries"]
    if fmt == "html":
        page = archive.read_text(encoding="utf-8")
        assert page.startswith("<!DOCTYPE html>") and "line 299 of the quokka log" in page

    back = await _run(["import", str(archive), "--working-dir", str(dst), "--json"], capsys)
    assert back["counts"] == {
        "outputs": 2,
        "saved_summaries": len(summaries),
        "dialog": out["counts"]["dialog"],
        "steps": out["counts"]["steps"],
    }
    for old, new in back["refs"].items():  # every output byte for byte, under a new ref
        assert Path(new).parent == dst.resolve() / "tool_result"
        assert Path(new).read_bytes() == Path(old).read_bytes()
    # the restored dialog's notices name the restored outputs, which read_file reads
    dialog = "".join(p.read_text(encoding="utf-8") for p in (dst / "dialog").glob("*.jsonl"))
    refs = {o.ref: back["refs"][o.ref] for o in outputs}
    assert all(new in dialog and old not in dialog for old, new in refs.items())
    reader = FileReader(
        [dst], ToolResultPolicy(ContextConfig().tool_result), store_dir=dst / "tool_result"
    ).scoped(Tenant("coder", "s1"))
    for new in refs.values():
        text = reader.read_now(new)
        assert text.startswith(("line 0 of the quokka log\r\n", "日志 wombat 🙂")), text[:80]
    for summary in summaries:  # restored, and still told apart from the outputs
        assert reader.read_now(back["refs"][summary.ref]).startswith("## Goal")
    assert _saved_summaries(dst) == {back["refs"][o.ref] for o in summaries}
    search = SearchIndex(dst)
    try:
        assert search.search("quokka").hits and search.search("wombat").hits
        hits = search.search("quokka log").hits  # the restored output, named by its tool
        assert any(h.tool == "cat" and str(h.path) in back["refs"].values() for h in hits)
    finally:
        search.close()
    # importing again adds no dialog record (the outputs are saved again)
    again = await _run(["import", str(archive), "--working-dir", str(dst), "--json"], capsys)
    assert again["counts"]["dialog"] == 0
    [exported] = AuditFile(src).read()
    assert exported["action"] == "export" and exported["counts"] == out["counts"]
    assert exported["tenant"] == {"user": None, "agent": None, "session": "s1"}
    imported = AuditFile(dst).read()
    assert [a["action"] for a in imported] == ["import", "import"]
    assert imported[0]["bytes"] == sum(len(t.encode()) for t in OUTPUTS.values())
    assert "quokka" not in (src / "audit.jsonl").read_text()


def _saved_summaries(wd: Path) -> set[str]:
    return set(saved_summaries(ContextConfig(working_dir=wd), "s1"))


async def test_a_summary_shown_cut_is_counted_apart_from_the_outputs(
    tmp_path: Path, line: Line, capsys: pytest.CaptureFixture[str]
) -> None:
    """At a small budget a compaction shows its summary cut and saves its whole text under
    tool_result/, beside the outputs: export and `inspect` count the two outputs only (they
    counted every file there: 5 outputs, two with no tool), and the summary's saved text is
    exported with its mark and read on with `read_file`, as its notice says."""
    src = tmp_path / "src"
    await _session(src, line)
    files = {str(p) for p in (src / "tool_result").iterdir()}
    summaries = _saved_summaries(src)
    assert summaries and summaries < files and len(files - summaries) == 2
    out = await _run(
        ["export", str(src), "--session", "s1", "-o", str(tmp_path / "a"), "--json"], capsys
    )
    assert out["counts"]["outputs"] == 2
    assert out["counts"]["saved_summaries"] == len(summaries)
    inspected = await _run(["inspect", str(src), "--json"], capsys)
    assert inspected["outputs"]["count"] == 2
    assert inspected["saved_summaries"]["count"] == len(summaries)
    assert inspected["outputs"]["bytes"] == sum(len(t.encode()) for t in OUTPUTS.values())
    archive = parse_archive((tmp_path / "a").read_text(encoding="utf-8"))
    saved = {o.ref: o.data for o in archive.outputs if o.tool == SAVED_SUMMARY}
    assert set(saved) == summaries
    reader = FileReader(
        [src], ToolResultPolicy(ContextConfig().tool_result), store_dir=src / "tool_result"
    ).scoped(Tenant("coder", "s1"))
    for ref, data in saved.items():
        assert Path(ref).read_bytes() == data and data.startswith(b"## Goal")
        assert reader.read_now(ref).startswith("## Goal")
    search = SearchIndex(src)  # search_history finds it, and says what it is
    try:
        result = search.search("platypus", Filters(tool=SAVED_SUMMARY))
        assert result.hits and {str(h.path) for h in result.hits} <= summaries
        text = format_result(result, "platypus", shared=False, max_bytes=4_000)
        assert "saved text of a summary shown cut" in text and "saved output of" not in text
    finally:
        search.close()


async def test_another_session_or_agent_is_not_exported(
    tmp_path: Path, line: Line, capsys: pytest.CaptureFixture[str]
) -> None:
    src = str(tmp_path / "src")
    await _session(tmp_path / "src", line)
    for who in (["--session", "s2"], ["--session", "s1", "--agent", "other"]):
        assert await asyncio.to_thread(main, ["export", src, *who, "-o", str(tmp_path / "x")]) == 1
        assert "no records of session" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    out = await _run(
        ["export", src, "--session", "s1", "--agent", "coder", "-o", str(tmp_path / "y"), "--json"],
        capsys,
    )
    assert out["counts"]["outputs"] == 2 and out["counts"]["dialog"] > 0


async def test_the_html_archive_opens_offline_and_shows_each_output_whole(
    tmp_path: Path, line: Line, capsys: pytest.CaptureFixture[str]
) -> None:
    """The viewer's page as exported: no console error in chromium, nothing to fetch, and a
    click on a notice shows that output whole (not the viewer's 4,000-byte head)."""
    await _session(tmp_path / "src", line)
    page_file = tmp_path / "s1.html"
    argv = ["export", str(tmp_path / "src"), "--session", "s1", "--format", "html"]
    await _run([*argv, "-o", str(page_file), "--json"], capsys)
    html = page_file.read_text(encoding="utf-8")
    assert "https://" not in html and "http://" not in html.replace(
        "http://www.w3.org/2000/svg", ""
    )
    async with open_page(page_file) as (page, errors):
        shown = []
        for notice in await page.locator("#calls a.notice").all():
            await notice.click()
            shown.append(await page.locator("#excerpt").text_content())
    assert errors == []
    assert any(OUTPUTS["log"].replace("\r\n", "\n") in str(s).replace("\r\n", "\n") for s in shown)
    assert any(OUTPUTS["cjk"] in str(s) for s in shown)
