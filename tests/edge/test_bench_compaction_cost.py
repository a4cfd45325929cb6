"""The compaction-cost benchmark (`benchmarks/cost/compaction.py`) on a tiny session, on
the installed AgentScope line: both request forms run and are metered, the prefix request is
served from the agent's last prompt, and the prices are applied as documented."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.cost import compaction as bench
from benchmarks.cost.session import Scenario


def test_pricing_reads_writes_and_the_shortest_cached_prefix() -> None:
    anthropic = bench.Pricing("a", read=0.1, write=1.25, min_tokens=1024)
    assert anthropic.cost(10_000, 9_000) == pytest.approx((900 + 1_250) / 1000)
    assert anthropic.cost(2_000, 1_000) == pytest.approx(2.5)  # under 1,024: nothing cached
    assert bench.Pricing("d", 0.2, 1.0, 256).cost(1_000, 300) == pytest.approx(0.76)


def test_both_forms_on_a_tiny_session(capsys: pytest.CaptureFixture[str]) -> None:
    # (8,000 tokens: below it the trigger is the budget by default, and the agent's last
    # prompt with the compactor's request would not fit it)
    tiny = Scenario("tiny, no masking", 8_000, 3, 4, tuple([18_000, 4_000, 8_000, 12_000] * 3))
    result: dict[str, Any] = bench.main([tiny], bench.PRICES)
    table = {row["form"]: row for row in result["scenarios"][tiny.name]["table"]}
    plain, prefix, bare = table["plain"], table["prefix"], table["prefix, no tools"]
    assert plain["requests"] >= 1 and prefix["requests"] >= 1
    assert prefix["cached_share"] > 0.8  # the agent's last prompt, from the cache
    assert plain["cached_share"] < 0.5 and bare["cached_share"] < 0.05
    anthropic = "anthropic"
    assert prefix["cost_per_session"][anthropic] < plain["cost_per_session"][anthropic]
    out = capsys.readouterr().out
    assert "prefix is cheaper per session" in out and tiny.name in out
