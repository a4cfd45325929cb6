"""Issue 19.10 on 2.x: AgentScope 2.x stamps messages in ISO form (``2026-12-03T14:48:00``).
In a real 2.x `Agent` (only the model scripted), after a compaction, the summary carries the
eviction index as on 1.x, and `search_history(since=, until=)` compares the stamps of the
dialog as times (an hour before and after). The line-neutral tests are `tests/recall/test_stamps.py`.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

from agentscope.message import TextBlock

from agentscope_ctx.core.summary._eviction import EVICTION_HEADER
from tests.agentscope2.test_adapter import _config, _run


async def test_i19_10_v2_eviction_index_and_time_filters(tmp_path: Path) -> None:
    before = datetime.now()
    run = await _run(tmp_path, _config(tmp_path, mask_after=None, recent_max_share=None))
    after = datetime.now()
    agent, manager = run["agent"], run["manager"]
    assert manager.dialog.ids(), "compaction moved messages to dialog/"

    # The eviction index follows the summary, with the time range of what was compacted.
    summary = agent.state.middle_context["agentscope_ctx"]["summary"]
    assert f"\n\n{EVICTION_HEADER}\n" in summary, summary[-400:]
    entries = summary.split(EVICTION_HEADER, 1)[1].strip().splitlines()
    first = re.match(r"- (\d{4}-\d{2}-\d{2} \d{2}:\d{2}) → ", entries[0])
    assert first is not None, entries
    assert before.strftime("%Y-%m-%d %H:%M") <= first[1] <= after.strftime("%Y-%m-%d %H:%M")
    assert 'cat(path="log0.txt")' in summary
    assert "<system-" not in summary  # 2.x runtime hints are not the user's words

    # A dialog hit (the assistant's call, compacted away) within an hour either side.
    recall = manager.bind(agent).recall
    assert recall is not None
    hour = timedelta(hours=1)

    async def hits(**filters: str) -> str:
        response = await recall.search_history("log0.txt", role="assistant", **filters)
        return "".join(b.text for b in response.content if isinstance(b, TextBlock))

    def at(t: datetime) -> str:
        return t.strftime("%Y-%m-%d %H:%M")

    assert "dialog: assistant message calling cat" in await hits()
    assert "No hits" not in await hits(since=at(before - hour))
    assert "No hits" in await hits(since=at(after + hour))
    assert "No hits" not in await hits(until=at(after + hour))
    assert "No hits" in await hits(until=at(before - hour))
    assert "No hits" not in await hits(since=at(before), until=at(after))
    assert "No hits" not in await hits(since=before.strftime("%Y-%m-%dT%H:%M:00"))
    assert f"· {at(before)}" in await hits() or f"· {at(after)}" in await hits()
