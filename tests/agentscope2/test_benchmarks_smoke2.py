"""Smoke tests of `benchmarks/` on AgentScope 2.x: the 2.x benches run at a tiny size and
return sane numbers (no timing is asserted), `python -m benchmarks` runs the 2.x set, and the
scripted provider gives AgentScope's own compression a fair run and enforces its window."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from agentscope.agent._config import SummarySchema
from agentscope.message import UserMsg

from agentscope_ctx import TokenCounter
from agentscope_ctx.models._guard import is_context_overflow
from benchmarks import __main__ as bench_all
from benchmarks import compare
from benchmarks.cost import line2 as bench_cost2
from benchmarks.cost import meter as cost_meter
from benchmarks.cost.models2 import Provider
from benchmarks.cost.session import Scenario, Step
from benchmarks.pipeline import steady2 as bench_steady2
from benchmarks.pipeline import step as bench_pipeline
from tests.support.figures import positive


def test_steady2_bench_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    result = bench_steady2.main(history_sizes=(10, 40), steps=3)
    assert set(result["steady"]) == {"10", "40"}
    small, large = result["steady"]["10"], result["steady"]["40"]
    for row in (small, large):
        for key in ("messages", "tokens", "warm_run_ms", "step_mean_us", "step_median_us"):
            assert positive(row[key]), (key, row[key])
    assert 10 <= small["messages"] < large["messages"]  # core entries, as on 1.x
    assert small["tokens"] < large["tokens"]
    assert "steady state on AgentScope 2.x" in capsys.readouterr().out
    json.dumps(result)


def test_state_history_never_splits_a_tool_call() -> None:
    context = bench_steady2.build_state(60, seed=3)
    calls = {b.id for m in context for b in m.content if b.type == "tool_call"}
    results = {b.id for m in context for b in m.content if b.type == "tool_result"}
    assert calls == results and calls
    assert [m.role for m in context[:2]] == ["user", "assistant"]


def test_pipeline_bench_runs_on_2x() -> None:
    result = bench_pipeline.run(history_sizes=(10,), compact_sizes=(20,), steps=2)
    assert positive(result["steady"]["10"]["step_mean_us"])
    assert result["compaction"]["20"]["tokens_after"] < result["compaction"]["20"]["tokens_before"]


def _tiny() -> list[Scenario]:
    return [
        Scenario("stress", 8_000, 2, 3, (20_000, 3_000, 50_000, 8_000, 2_000, 30_000)),
        Scenario("everyday", 16_000, 2, 3, (2_000, 5_000, 9_000, 3_000, 12_000, 4_000), json=True),
    ]


def test_cost2_bench_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    result = bench_cost2.main(_tiny())
    assert result["agentscope"].startswith("2.")
    for name, scenario in result["scenarios"].items():
        assert set(scenario["systems"]) == {"agentscope_ctx", "builtin"}
        for system, row in scenario["systems"].items():
            calls, agent = row["per_call"], row["agent"]
            assert agent["calls"] == len(calls) >= 1, (name, system)
            assert calls[0]["prefix"] == 0
            for before, call in itertools.pairwise(calls):
                assert call["bound"] <= min(before["tokens"], call["tokens"])
                assert 0 <= call["prefix"] <= call["bound"] <= call["tokens"]
            assert agent["over_budget"] == sum(
                c["budget_tokens"] > scenario["budget"] for c in calls
            )
            # the provider's window is the budget: exactly the calls over it were rejected
            assert row["failed_calls"] == agent["over_budget"]
            assert (row["ended"] == "completed") == (row["failed_calls"] == 0)
        ours = scenario["systems"]["agentscope_ctx"]
        assert ours["agent"]["calls"] == 2 * (3 + 1) and ours["failed_calls"] == 0
        assert ours["nothing_lost"]["ok"] and ours["reachable"]["ok"]
    # bytes / 4 undercounts: the built-in lets a prompt past the window, and the turn fails
    builtin = result["scenarios"]["stress"]["systems"]["builtin"]
    assert builtin["failed_calls"] >= 1 and "failed" in builtin["ended"]
    assert builtin["agent"]["peak_budget_tokens"] > 8_000
    out = capsys.readouterr().out
    assert "AgentScope 2." in out and "builtin:" in out
    json.dumps(result)


async def test_provider_answers_the_builtin_compression_and_enforces_its_window(
    tmp_path: Path,
) -> None:
    counter, encoder = TokenCounter("cl100k_base"), cost_meter.encoding()
    meters = [cost_meter.PromptMeter(counter, encoder) for _ in range(2)]
    plan = [[Step("c1", str(tmp_path / "src" / "module_000.py"))]]
    model = Provider(plan, *meters, window=2_000)
    messages = [UserMsg(name="user", content=f"Task 1: review these files for tests: {plan}")]
    summary = await model.generate_structured_output(messages, SummarySchema)
    assert set(summary.content) == set(SummarySchema.model_fields)
    assert "module_000.py" in summary.content["current_state"]
    assert len(meters[1].calls) == 1 and not meters[0].calls
    with pytest.raises(RuntimeError, match="maximum context length is 2000") as error:
        await model([UserMsg(name="user", content="中文 " * 3_000)])
    assert is_context_overflow(error.value)
    assert model.rejected and not model.issued  # the step was not consumed
    reply = await model(messages)
    assert reply.content[-1].name == "view_text_file" and model.issued == {"c1"}
    assert reply.usage.input_tokens == meters[0].calls[-1].budget_tokens


def test_main_runs_the_2x_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = [name for name, _ in bench_all.BENCHES]
    assert "steady2" in names and "cost" in names and "baseline" not in names
    assert "1.x only" in bench_all.SKIPPED["baseline"]
    monkeypatch.setattr(bench_all, "RESULTS", tmp_path / "latest.json")
    monkeypatch.setattr(
        bench_all,
        "BENCHES",
        [
            ("pipeline", lambda: bench_pipeline.run((50,), (20,), 2)),
            ("steady2", lambda: bench_steady2.main((50,), 2)),
        ],
    )
    results = bench_all.main([])
    saved = json.loads((tmp_path / "latest-2.x.json").read_text(encoding="utf-8"))
    assert saved["machine"]["agentscope"].startswith("2.")
    assert saved["machine"]["agentscope_line"] == "2.x"
    assert saved["skipped"] == {"baseline": bench_all.SKIPPED["baseline"]}
    lines = compare.steady_table(results, results)  # this line's numbers in every column
    row = next(line for line in lines if line.strip().startswith("50"))
    assert row.count("/") == 3 and "-" not in row.split()[1:]
