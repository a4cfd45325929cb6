"""Checks shared by the demo tests of both lines: the default demo shows every rung of the
ladder, in order, and each left its trace on disk; `run_logs_demo`, the run of it the tests
that only read share (the ``logs_demo`` fixture)."""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from agentscope.formatter import OpenAIChatFormatter

from agentscope_ctx import Models
from agentscope_ctx.cli import main as cli_main
from agentscope_ctx.core.truncation._truncation import parse_notice
from agentscope_ctx.demo import DemoReport, run_demo
from agentscope_ctx.demo._report import RungKind
from agentscope_ctx.stores._dialog import DialogStore


@dataclass(frozen=True)
class DemoRun:
    """One offline run of the default demo (``logs``, its default config)."""

    report: DemoReport
    path: Path
    """Its working dir."""
    lines: tuple[str, ...]
    """What it printed, line by line."""


def run_logs_demo(path: Path) -> DemoRun:
    """Run the default demo in `path` under the usual umask (022: a plain open() makes 0644,
    which the demo must not leave), outside any event loop."""
    lines: list[str] = []
    old_umask = os.umask(0o022)
    try:
        report = asyncio.run(run_demo("logs", path, out=lines.append))
    finally:
        os.umask(old_umask)
    return DemoRun(report, path, tuple(lines))


def _msg(line: str) -> dict[str, object]:
    """The message of a dialog/ record (`_dialog_record`: {"v": 1, "msg": {...}, ...})."""
    msg: dict[str, object] = json.loads(line)["msg"]
    return msg


def _texts(msg: dict[str, object]) -> str:
    return json.dumps(msg.get("content"), ensure_ascii=False)


def assert_every_rung(report: DemoReport, root: Path) -> None:
    """One offline run of the default demo: a first truncation and a continuation read that
    returned the saved output's next bytes; a masking relief; a model compaction that moved
    messages to dialog/; a search_history hit in what left the context; each in the report
    (in that order) and marked on the chart."""
    (first,) = report.of(RungKind.FIRST_TRUNCATION)
    (read,) = report.of(RungKind.CONTINUATION_READ)
    masking = report.of(RungKind.MASKING)
    compactions = report.of(RungKind.COMPACTION)
    hits = report.of(RungKind.SEARCH_HIT)
    assert masking and compactions and hits, [r.kind for r in report.rungs]
    assert not report.of(RungKind.EXTRACTIVE_COMPACTION, RungKind.SEARCH_MISS)
    assert first.at < read.at < masking[0].at < compactions[0].at < hits[0].at

    # the first truncation: the whole output is in tool_result/, bigger than what was shown;
    # the continuation read follows its notice and returned the file's next bytes
    assert first.file is not None and first.file.startswith("tool_result/")
    saved = (root / first.file).read_text(encoding="utf-8")
    assert read.file == first.file and read.ok and read.line is not None and read.line > 1
    assert read.text and parse_notice(read.text) is None
    rest = "".join(saved.splitlines(keepends=True)[read.line - 1 :])
    assert rest.startswith(read.text) and len(read.text) < len(rest)

    # masking and compaction brought the prompt down, without and with a model call; the
    # compaction came when the cheap rungs could not bring it under the trigger
    for rung in [*masking, *compactions]:
        assert rung.tokens_before is not None and rung.tokens_after is not None
        assert rung.tokens_before > report.threshold and rung.tokens_after < rung.tokens_before
    assert compactions[0].tokens_after is not None
    assert compactions[0].tokens_after <= report.threshold
    assert all("compactor model" in rung.detail for rung in compactions)

    # dialog/: the moved messages, the first user turn among them
    files = {rung.file for rung in compactions}
    assert all(file is not None and file.startswith("dialog/") for file in files)
    lines = {f: (root / f).read_text(encoding="utf-8").splitlines() for f in files if f}
    stored, _ = DialogStore(root).read()
    assert sum(map(len, lines.values())) == len(stored) == report.dialog_messages > 0
    moved = [re.search(r"(\d+) messages moved to dialog/", rung.detail) for rung in compactions]
    assert sum(int(m[1]) for m in moved if m) == report.dialog_messages
    every = [_msg(line) for day in lines.values() for line in day]
    assert any("Checkout failed for many users" in _texts(msg) for msg in every)

    # the search found what left the context: its best hit is a line of a dialog file
    (hit,) = hits
    assert hit.file in lines and hit.line is not None
    found = _msg(lines[hit.file][hit.line - 1])
    assert "No space left on device" in _texts(found) and found["role"] == "assistant"
    assert "No space left on device" in report.answers[-1]

    # the report names each rung with its step; the chart marks each
    rendered = report.render()
    for rung in report.rungs:
        assert f"{rung.when()}" in rendered and rung.detail in rendered
    assert report.chart is not None
    svg = ElementTree.fromstring(report.chart.read_text(encoding="utf-8"))
    tips = [node.text or "" for node in svg.iter("{http://www.w3.org/2000/svg}title")]
    for kind in (
        RungKind.FIRST_TRUNCATION,
        RungKind.CONTINUATION_READ,
        RungKind.MASKING,
        RungKind.COMPACTION,
        RungKind.SEARCH_HIT,
    ):
        assert any(tip.startswith(f"{kind}, ") for tip in tips), kind
    texts = [node.text or "" for node in svg.iter("{http://www.w3.org/2000/svg}text")]
    labels = {re.sub(r" -[\d,]+$", "", text) for text in texts}  # "masking -2,071"
    assert {"model compaction", "search hit", "masking", "read on"} <= labels
    for rung in report.rungs:  # the key names every rung with what it saved
        if rung.tokens_before is not None and rung.tokens_after is not None:
            saved = f"-{rung.tokens_before - rung.tokens_after:,} tokens"
            assert any(t.startswith(rung.when()) and saved in t for t in texts), rung


async def run_on_models(tmp_path: Path, model: Any, compactor: Any) -> tuple[DemoReport, list[str]]:
    """The default demo on `model` with `compactor` as the compactor's model (OpenAI's
    formatter for both): its report and its step lines, numbered from 1 to the last step."""
    formatter = OpenAIChatFormatter()
    lines: list[str] = []
    report = await run_demo(
        "logs", tmp_path, models=Models(model, formatter, compactor, formatter), out=lines.append
    )
    steps = [line for line in lines if line.startswith("  step ")]
    assert [int(line.split()[1]) for line in steps] == list(range(1, report.steps + 1))
    return report, steps


def check_default_demo(run: DemoRun, capsys: pytest.CaptureFixture[str]) -> str:
    """Issue 20, item 4: one offline run of the default demo shows a first truncation and its
    continuation read, masking, a model compaction into dialog/ and a search_history hit, in
    the report and on the chart; the report and `inspect` say which count is which and agree
    on the context's size. Returns what `inspect` printed (for the line's own checks)."""
    report, tmp_path = run.report, run.path
    assert_every_rung(report, tmp_path)
    assert any(line.startswith("  compactor | prompt") for line in run.lines)
    assert report.peak <= report.budget
    assert f"our count ({report.counter}) of the request as sent" in report.render()
    assert report.context_now is not None and report.counter.startswith("tiktoken:")
    capsys.readouterr()
    assert cli_main(["inspect", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert (
        f"context {report.context_now:,} of {report.budget:,} tokens by the context manager's "
        f"estimate ({report.counter}, " in shown
    )
    assert f"context at the end   {report.context_now:,} tokens" in report.render()
    return shown
