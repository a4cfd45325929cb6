"""The fleet load benchmark (`benchmarks.fleet.load`, issue 46 items 16-17) at a small scale,
on the installed line: 8 sessions on 2 worker processes, each session with a manager of its own,
`store.max_connections` 3. What the Done-when asks of the 1,000-session run holds here too:
each worker holds at most the cap (counted by the server, `pg_stat_activity`), no prompt goes
over the budget, every `search_history` probe finds its output, no session fails, and once the
sessions end no manager, pipeline or step recorder of theirs is alive (slow: a server and two
worker processes start)."""

from __future__ import annotations

import pytest

from benchmarks.fleet import load
from tests.fleet.postgres_server import why_unavailable

pytestmark = pytest.mark.slow
CAP = 3


def test_eight_sessions_on_two_workers_hold_the_cap_and_release_their_state() -> None:
    if why_unavailable() is not None:
        pytest.skip(why_unavailable())
    result = load.main(sessions="8", workers=2, max_connections=CAP)
    (point,) = result["points"]
    assert point["errors"] == []
    assert point["over_budget"] == []  # every prompt within the budget
    assert point["probes"] == 8 and point["found"] == 8
    assert point["compactions"] >= 8  # each session wrote dialog records
    for worker in point["workers"]:
        assert 0 < worker["connections_peak"] <= CAP, worker["connections_peak"]
        assert worker["pool_peak"] <= CAP
        assert worker["held"] == {"managers": 0, "pipelines": 0, "step_recorders": 0}
        assert worker["usage_records"] <= 256  # usage/ keeps the newest 256
