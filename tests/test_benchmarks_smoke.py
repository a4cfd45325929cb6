"""Smoke tests for `benchmarks/`: each bench runs at a tiny size and returns sane numbers, so
that the benchmark code cannot rot. No timing is asserted."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import __main__ as bench_all  # noqa: E402
from benchmarks import bench_pipeline, bench_tokens, bench_truncation  # noqa: E402


def _positive(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and value > 0
        and (math.isfinite(value))
    )


def test_truncation_bench_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    result = bench_truncation.main(sizes=(50_000, 120_000))
    assert set(result["sizes"]) == {"50000", "120000"}
    for row in result["sizes"].values():
        for key in (
            "bytes", "first_ms", "write_ms", "time_ratio", "first_mb_per_s",
            "peak_extra_bytes", "memory_ratio", "excerpt_bytes", "retruncate_us",
            "retruncated_bytes",
        ):  # fmt: skip
            assert _positive(row[key]), (key, row[key])
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
            assert _positive(row[key]), (key, row[key])
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
        assert _positive(row[key]), (key, row[key])
    assert row["summary_source"] == "extractive"
    assert row["tokens_after"] < row["tokens_before"]
    out = capsys.readouterr().out
    assert "steady state" in out and "one compaction" in out
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
    assert _positive(tokens)


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


def test_baseline_bench_tiny(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import bench_baseline

    monkeypatch.setattr(bench_baseline, "TURNS", 1)
    monkeypatch.setattr(bench_baseline, "STEPS", 6)
    result = bench_baseline.main()
    builtin, ours = result["runs"]
    assert builtin["run"] == "builtin CompressionConfig" and ours["run"] == "agentscope_ctx"
    for row in result["runs"]:
        assert row["steps"] == 7  # 6 tool calls and the final answer
        for key in ("prompt_min", "prompt_median", "prompt_mean", "prompt_max", "peak_prompt",
                    "total_tokens_sent", "tool_output_bytes"):  # fmt: skip
            assert _positive(row[key]), (key, row[key])
        assert row["prompt_min"] <= row["prompt_median"] <= row["prompt_max"] <= row["peak_prompt"]
        assert 0 <= row["reachable_bytes"] <= row["tool_output_bytes"]
    assert ours["calls_over_budget"] == 0
    assert ours["reachable_bytes"] == ours["tool_output_bytes"]  # everything stays reachable
    out = capsys.readouterr().out
    assert "builtin CompressionConfig" in out and "agentscope_ctx" in out
    json.dumps(result)
