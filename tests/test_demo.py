"""The offline demos: each runs in a temporary working dir, compacts, follows a notice with
read_file, and keeps every prompt within the budget."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import pytest

from agentscope_ctx import ContextConfig, ShellTool
from agentscope_ctx._truncation import parse_notice
from agentscope_ctx.demo import DEMOS, run_demo
from agentscope_ctx.demo._report import DemoReport, render_chart


@pytest.mark.parametrize("name", sorted(DEMOS))
async def test_demo_compacts_continues_and_stays_within_budget(name: str, tmp_path: Path) -> None:
    lines: list[str] = []
    report = await run_demo(name, tmp_path / name, out=lines.append)
    output = "\n".join(lines)
    assert "SCRIPTED" in lines[0]
    assert report.compactions >= 1
    assert report.continuation_reads >= 1
    assert report.second_truncations >= 1
    assert report.first_truncations >= 1
    assert 0 < report.peak <= report.budget
    assert report.bytes_offloaded > 0 and report.dialog_messages > 0
    assert report.chart is not None and report.chart.read_text().startswith("<svg")
    assert "=== report" in output and "compactions" in output
    assert report.answer


async def test_logs_demo_finds_the_buried_error(tmp_path: Path) -> None:
    report = await run_demo("logs", tmp_path, out=lambda _: None)
    assert "Disk quota exceeded" in report.answer or "Disk quota" in report.answer
    assert sum(p.stat().st_size for p in (tmp_path / "logs").rglob("*.log")) > 2_000_000
    assert list((tmp_path / "memory").glob("*.md"))  # the agent logged a lesson


async def test_demo_accepts_a_user_config(tmp_path: Path) -> None:
    config = ContextConfig(
        working_dir=tmp_path / "elsewhere",
        max_input_tokens=14_000,
        compact_trigger_ratio=0.7,
        keep_recent_ratio=0.3,
        tool_result={"recent_n": 2, "recent_max_bytes": 6_000, "old_max_bytes": 1_200},
        summarizer={"enabled": False},
    )
    report = await run_demo("logs", tmp_path / "demo", config=config, out=lambda _: None)
    assert report.budget == 14_000 and report.peak <= 14_000
    assert not (tmp_path / "elsewhere").exists()


def test_chart_marks_budget_and_compactions(tmp_path: Path) -> None:
    report = DemoReport(
        name="x",
        working_dir=tmp_path,
        budget=1000,
        threshold=750,
        prompt_tokens=[100, 500, 800, 300],
        compaction_steps=[3],
    )
    svg = render_chart(report)
    ElementTree.fromstring(svg)  # well-formed
    assert svg.count("<circle") == 4 and "budget 1,000" in svg and "compaction" in svg
    assert "peak prompt" in report.render() and "80%" in report.render()


async def test_shell_tool_is_confined(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("one\ntwo ERROR\n")
    shell = ShellTool(tmp_path)
    out = await shell.run_shell("grep -n ERROR a.log")
    assert out.content[0]["text"] == "2:two ERROR\n"
    for bad in (
        "cat /etc/passwd",
        "cat ../x",
        "rm a.log",
        "grep x a.log > b",
        "ls; ls",
        "find . -delete",
        "cat $(ls)",
    ):
        refused = await shell.run_shell(bad)
        assert refused.content[0]["text"].startswith("Error: command refused"), bad
    assert (tmp_path / "a.log").exists()


def test_notice_parse_is_what_the_scripted_model_follows() -> None:
    assert parse_notice("no notice here") is None


async def test_demo_runs_on_a_real_model_too(tmp_path: Path) -> None:
    from agentscope.formatter import OpenAIChatFormatter

    from agentscope_ctx._providers import Models
    from tests.fakes import FakeChatModel, text, tool_call

    fake = FakeChatModel(
        [tool_call("run_shell", command="grep -rn ERROR logs"), text("it is the disk")],
        default="ok",
    )
    formatter = OpenAIChatFormatter()
    lines: list[str] = []
    report = await run_demo(
        "logs", tmp_path, models=Models(fake, formatter, fake, formatter), out=lines.append
    )
    assert lines[0].startswith("NOTE: the model in this demo is REAL")
    assert report.steps == len(fake.calls) >= 3 and report.first_truncations >= 1
    assert report.peak <= report.budget


def test_cli_demo_with_a_missing_key_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentscope_ctx.cli import main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = tmp_path / "model.yaml"
    model.write_text("model: {provider: openai, model_name: gpt-4o-mini}\n")
    code = main(["demo", "--model-config", str(model), "--working-dir", str(tmp_path / "d")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "OPENAI_API_KEY" in err and len(err.splitlines()) == 1
