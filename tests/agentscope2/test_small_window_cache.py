"""A small window on a provider's cache rules (issue 45), through AgentScope 2.x's real
`AnthropicChatModel` against the Anthropic simulator (the cost benchmark's small session,
`benchmarks.cost.providers.small`): with the defaults at 4,000 tokens the ladder goes from
the second truncation straight to compaction, at the budget, so the prompt is rewritten only
by a compaction, from the summary on, and every other call only appends and reads all of the
prompt before it from the cache.

Before the trigger went to the budget and masking off below 8,000 tokens (2026-12-07), the
ladder masked the oldest output a few hundred tokens after the summary every second or third
call, and each masking lost as much of the cache as a compaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.cost import calls, providers


async def test_a_small_window_rewrites_its_prompt_only_at_compactions(tmp_path: Path) -> None:
    kept: list[Any] = []
    figures = await providers.run_system(
        "agentscope_ctx", "anthropic", providers.small(), tmp_path, kept.append
    )
    assert figures["rejected"] == 0
    rows = calls.rows(kept[0], figures["cold_calls"])
    rewrites = [r for r in rows if r["differs"] is not None]
    assert len(rewrites) >= 3, rows  # the session compacts, several times
    # each rewrite replaced what came after the system prompt with a summary
    assert [r["differs"] for r in rewrites] == [1] * len(rewrites), rewrites
    assert all("<compact_summary>" in str(r["was"]) for r in rewrites[1:]), rewrites
    # every other call (but the second: its first prompt was under the provider's minimum)
    # read all of the prompt before it
    appended = [r for r in rows[2:] if r["differs"] is None]
    assert [r["n"] for r in appended if r["read"] < r["bound"]] == [], appended
