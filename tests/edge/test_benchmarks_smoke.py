"""Smoke tests for `benchmarks/`: each bench runs at a tiny size and returns sane numbers, so
that the benchmark code cannot rot. No timing is asserted."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("the benchmarks drive 1.x ReActAgents and 1.x messages"), allow_module_level=True
    )

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import __main__ as bench_all
from benchmarks.pipeline import pins as bench_pins
from benchmarks.pipeline import step as bench_pipeline
from benchmarks.pipeline import tokens as bench_tokens
from benchmarks.pipeline import truncation as bench_truncation
from tests.support.figures import positive


def test_truncation_bench_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    result = bench_truncation.main(sizes=(50_000, 120_000))
    assert set(result["sizes"]) == {"50000", "120000"}
    for row in result["sizes"].values():
        for key in (
            "bytes", "first_ms", "write_ms", "time_ratio", "first_mb_per_s",
            "peak_extra_bytes", "memory_ratio", "excerpt_bytes", "retruncate_us",
            "retruncated_bytes",
        ):  # fmt: skip
            assert positive(row[key]), (key, row[key])
        assert row["excerpt_bytes"] <= bench_truncation.RECENT_MAX_BYTES
        assert row["retruncated_bytes"] <= bench_truncation.OLD_MAX_BYTES
        assert isinstance(row["meets_time_target"], bool)
        assert isinstance(row["meets_memory_target"], bool)
    out = capsys.readouterr().out
    assert "first truncation" in out and "growth" in out
    json.dumps(result)


def test_build_output_is_realistic() -> None:
    text = bench_truncation.build_output(20_000)
    size = len(text.encode("utf-8"))
    assert 19_990 <= size <= 20_000
    assert text.count("\n") > 50 and not text.isascii()


def test_pipeline_bench_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    result = bench_pipeline.main(history_sizes=(10, 30), compact_sizes=(20,), steps=3)
    assert set(result["steady"]) == {"10", "30"}
    for row in result["steady"].values():
        for key in (
            "messages",
            "tokens",
            "warm_run_ms",
            "step_mean_us",
            "step_median_us",
            "ratio_vs_smallest",
            "median_ratio_vs_smallest",
        ):
            assert positive(row[key]), (key, row[key])
    assert result["meets_step_target"] is None  # no 50/800 rows at this size
    row = result["compaction"]["20"]
    for key in (
        "compacted",
        "kept",
        "tokens_before",
        "tokens_after",
        "ms",
        "dialog_bytes",
        "summary_chars",
    ):
        assert positive(row[key]), (key, row[key])
    assert row["summary_source"] == "extractive"
    assert row["tokens_after"] < row["tokens_before"]
    out = capsys.readouterr().out
    assert "steady state" in out and "one compaction" in out
    json.dumps(result)


def test_pins_bench_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    result = bench_pins.main(sizes=(20, 40), unpinned=20)
    assert set(result["sizes"]) == {"20", "40"}
    for row in result["sizes"].values():
        assert all(positive(row[key]) for key in ("before_s", "after_s", "pipeline_s")), row
    assert positive(result["unpinned"]["pipeline_s"])
    assert "growth" in capsys.readouterr().out
    json.dumps(result)


def test_pipeline_history_never_splits_a_tool_call() -> None:
    for n in (1, 2, 7, 30):
        msgs = bench_pipeline.build_history(n, seed=n)
        assert len(msgs) in (n, n + 1)
        uses = {b["id"] for m in msgs for b in m.get_content_blocks("tool_use")}
        results = {b["id"] for m in msgs for b in m.get_content_blocks("tool_result")}
        assert uses == results


def test_tokens_bench_helpers() -> None:
    # bench_tokens.main() takes seconds (10 MB of text); check its building blocks and API.
    from agentscope_ctx import TokenCounter

    assert callable(bench_tokens.main)
    history = bench_tokens.build_history(12)
    assert len(history) == 12
    tokens = asyncio.run(TokenCounter("cl100k_base").count_msgs(history))
    assert positive(tokens)


def test_main_writes_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_all, "RESULTS", tmp_path / "latest.json")
    monkeypatch.setattr(
        bench_all,
        "BENCHES",
        [("truncation", lambda: bench_truncation.main(sizes=(40_000,)))],
    )
    results = bench_all.main([])
    saved = json.loads((tmp_path / "latest.json").read_text(encoding="utf-8"))
    assert saved["machine"]["cpu_count"] == results["machine"]["cpu_count"]
    assert {"platform", "python", "date"} <= set(saved["machine"])
    assert "truncation" in saved["benchmarks"]


def test_main_runs_the_1x_set() -> None:
    names = [name for name, _ in bench_all.BENCHES]
    assert {"pipeline", "baseline", "cost"} <= set(names) and "steady2" not in names
    assert "2.x only" in bench_all.SKIPPED["steady2"]
    assert bench_all.machine()["agentscope"].startswith("1.")


def test_cost_session_json_outputs(tmp_path: Path) -> None:
    from benchmarks.cost.session import everyday, everyday_json, write_files

    plain, mixed = everyday(turns=1, calls=4), everyday_json()
    assert mixed.sizes == everyday().sizes and mixed.json and not plain.json
    steps = write_files(plain, tmp_path / "a")[0]
    assert [Path(s.file_path).suffix for s in steps] == [".py", ".py", ".py", ".txt"]
    mixed_steps = write_files(mixed, tmp_path / "b")[0][:4]
    record = Path(mixed_steps[1].file_path)
    assert record.suffix == ".json"
    text = record.read_text(encoding="utf-8")
    assert '"城市"' in text and abs(len(text.encode("utf-8")) - mixed.sizes[1]) < 400


def test_baseline_bench_tiny(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.cost import baseline as bench_baseline

    monkeypatch.setattr(bench_baseline, "TURNS", 1)
    monkeypatch.setattr(bench_baseline, "STEPS", 6)
    result = bench_baseline.main()
    builtin, ours = result["runs"]
    assert builtin["run"] == "builtin CompressionConfig" and ours["run"] == "agentscope_ctx"
    for row in result["runs"]:
        assert row["steps"] == 7  # 6 tool calls and the final answer
        for key in ("prompt_min", "prompt_median", "prompt_mean", "prompt_max", "peak_prompt",
                    "total_tokens_sent", "tool_output_bytes"):  # fmt: skip
            assert positive(row[key]), (key, row[key])
        assert row["prompt_min"] <= row["prompt_median"] <= row["prompt_max"] <= row["peak_prompt"]
        assert 0 <= row["reachable_bytes"] <= row["tool_output_bytes"]
    assert ours["calls_over_budget"] == 0
    assert ours["reachable_bytes"] == ours["tool_output_bytes"]  # everything stays reachable
    out = capsys.readouterr().out
    assert "builtin CompressionConfig" in out and "agentscope_ctx" in out
    json.dumps(result)


# -- cost benchmark (issue 12, item 7) ---------------------------------------------------------


def _tiny_cost_scenarios() -> list[Any]:
    from benchmarks.cost.session import Scenario

    return [
        Scenario("stress", 8_000, 2, 3, (20_000, 3_000, 50_000, 8_000, 2_000, 30_000)),
        Scenario("everyday", 16_000, 2, 3, (2_000, 5_000, 9_000, 3_000, 12_000, 4_000)),
    ]


def test_cost_bench_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.cost import line1 as bench_cost
    from benchmarks.cost.meter import CACHED_PRICE, NEW_PRICE

    result = bench_cost.main(_tiny_cost_scenarios())
    assert set(result["scenarios"]) == {"stress", "everyday"}
    for name, scenario in result["scenarios"].items():
        assert set(scenario["systems"]) == {"agentscope_ctx", "builtin"}
        for system, row in scenario["systems"].items():
            agent = row["agent"]
            assert agent["calls"] == 2 * (3 + 1) == len(row["per_call"]), (name, system)
            calls = row["per_call"]
            assert calls[0]["prefix"] == calls[0]["bound"] == 0
            for before, call in itertools.pairwise(calls):
                assert call["bound"] <= min(before["tokens"], call["tokens"])
                assert 0 <= call["prefix"] <= call["bound"] <= call["tokens"]
                assert 0 < call["budget_tokens"]
            assert agent["tokens_sent"] == sum(c["tokens"] for c in calls)
            assert 0 < agent["prefix_tokens"] <= agent["bound_tokens"] < agent["tokens_sent"]
            assert 0 < agent["reuse"] <= agent["bound_reuse"] < 1
            cost = sum(CACHED_PRICE * c["prefix"] + NEW_PRICE * (c["tokens"] - c["prefix"])
                       for c in calls) / 1000  # fmt: skip
            assert agent["cost_units"] == pytest.approx(cost, abs=0.01)
            assert 0 < agent["cost_units_at_bound"] <= agent["cost_units"]
            assert agent["peak_budget_tokens"] == max(c["budget_tokens"] for c in calls)
            assert agent["over_budget"] == sum(
                c["budget_tokens"] > scenario["budget"] for c in calls
            )
            helper = row["helper"]
            assert helper["calls"] == sum(n for n, _ in helper["by_kind"].values())
            assert row["helper_share"] == pytest.approx(
                helper["tokens_sent"] / agent["tokens_sent"], abs=1e-4
            )
            assert row["total_cost_units"] >= agent["cost_units"]
            reach = row["reachable"]
            assert 0 <= reach["reachable_bytes"] <= reach["output_bytes"]
            assert isinstance(row["nothing_lost"]["ok"], bool) and isinstance(reach["ok"], bool)
        builtin = scenario["systems"]["builtin"]
        assert builtin["nothing_lost"]["ok"]  # its memory keeps every message, marked
        assert builtin["reachable"]["notices"] == 0
    stress = result["scenarios"]["stress"]["systems"]
    assert stress["builtin"]["compactions"] == stress["builtin"]["helper"]["calls"] >= 1
    assert stress["builtin"]["agent"]["over_budget"] >= 1  # a 50 KB output in an 8k budget
    assert len(result["targets"]["stress"]) == 6 and len(result["targets"]["everyday"]) == 4
    out = capsys.readouterr().out
    for name, targets in result["targets"].items():
        for label, ok in targets.items():
            assert f"{'PASS' if ok else 'FAIL'}  {name}: {label}" in out
    json.dumps(result)


def test_cost_meter_prefix_and_budget() -> None:
    from agentscope.formatter import OpenAIChatFormatter
    from agentscope.message import Msg

    from agentscope_ctx import TokenCounter
    from benchmarks.cost.meter import PromptMeter, encoding, serialise

    async def run() -> None:
        counter, formatter = TokenCounter("cl100k_base"), OpenAIChatFormatter()
        meter = PromptMeter(counter, encoding())
        tools = [{"type": "function", "function": {"name": "view", "parameters": {}}}]
        base = [Msg("system", "You are terse.", "system"), Msg("user", "Read a.py 中文", "user")]
        long = Msg("assistant", "line of output\n" * 200, "assistant")
        cut = Msg("assistant", "line of output\n" * 100 + "[cut]", "assistant")
        prompts = [base, [*base, long], [*base, cut], [Msg("system", "Be kind.", "system")]]
        calls = []
        for msgs in prompts:
            formatted = await formatter.format(msgs)
            call = await meter.measure(formatted, tools)
            assert call.budget_tokens == await counter.count(formatted, tools=tools)
            pieces = serialise(formatted, tools)
            assert call.tokens == sum(len(meter.encoder.encode_ordinary(p)) for p in pieces)
            calls.append(call)
        first, appended, rewritten, other = calls
        assert first.prefix == 0
        assert appended.prefix == first.tokens == appended.bound  # append-only: all reused
        # the changed message shares its first hundred lines, not its tail
        assert first.tokens + 300 < rewritten.prefix < appended.tokens
        tools_tokens = len(meter.encoder.encode_ordinary(serialise([], tools)[0]))
        # the tools piece is shared, and of the changed system message only its JSON opening
        assert tools_tokens + 1 <= other.prefix <= tools_tokens + 10

    asyncio.run(run())


def test_cost_checks_catch_losses(tmp_path: Path) -> None:
    from agentscope.message import Msg, ToolResultBlock, ToolUseBlock

    from agentscope_ctx import ContextConfig, ContextManager
    from benchmarks.cost.checks import check_messages, check_reachable
    from benchmarks.cost.session import Step, user_task

    source = tmp_path / "big.txt"
    original = "".join(f"line {i}: 中文 text\n" for i in range(5_000))
    source.write_text(original, encoding="utf-8")
    manager = ContextManager(ContextConfig(working_dir=tmp_path / "ctx", read_roots=[tmp_path]))
    read = manager.reader.read_file

    async def run() -> None:
        response = await read(str(source), 1, 0)
        first = str(response.content[0]["text"])
        plan = [[Step("c1", str(source))]]
        msgs = [
            Msg("user", user_task(0, plan[0]), "user"),
            Msg("assistant", [ToolUseBlock(type="tool_use", id="c1", name="view", input={})],
                "assistant"),
            Msg("system", [ToolResultBlock(type="tool_result", id="c1", name="view",
                                           output=first)], "system"),
            Msg("assistant", "done", "assistant"),
        ]  # fmt: skip
        assert check_messages(msgs, plan)["ok"]
        assert check_messages(msgs[:2] + msgs[3:], plan)["missing_tool_results"] == 1
        assert check_messages([*msgs, msgs[1]], plan)["duplicates"] == 1
        reach = await check_reachable(msgs, {"c1": original}, read)
        assert reach["ok"] and reach["notices"] == 1
        assert reach["reachable_bytes"] == len(original.encode("utf-8"))
        assert not (await check_reachable(msgs, {"c1": original}, None))["ok"]
        assert not (await check_reachable(msgs, {"c1": original + "x"}, read))["ok"]
        source.write_text(original.replace("line 4000:", "line 4000!"), encoding="utf-8")
        assert (await check_reachable(msgs, {"c1": original}, read))["broken_chains"] == 1
        source.unlink()
        assert (await check_reachable(msgs, {"c1": original}, read))["missing_files"] == 1

    asyncio.run(run())
