"""Two worker processes alternate the replies of one session, SIGKILLed at random points
(tests/fleet/harness.py says what is checked). On the installed AgentScope line: 2.x, the
state through the app storage (`RedisStorage`, `AsyncSQLAlchemyStorage` on SQLite); 1.x,
`ContextMemory` over `RedisMemory` or `AsyncSQLAlchemyMemory` (SQLite). The store: local
(the working_dir both workers share) today.

A few trials here; 100 under `-m slow` (`FLEET_TRIALS` to change):

    PYTHONPATH=$PWD python -m pytest -q -n 0 -m slow -s tests/fleet/test_workers.py
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.harness import local_store, run_trials, session_module
from tests.fleet.redis_server import RedisServer, redis_server  # noqa: F401

STORES = {"local": local_store}
"""The stores the harness runs against (the PostgreSQL store joins here once merged)."""


def _states(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[int], Any]:
    spec = session_module().StateSpec
    if kind == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        return lambda trial: spec("redis", host=server.host, port=server.port, db=server.fresh_db())
    return lambda trial: spec(
        "sql",
        url=f"sqlite+aiosqlite:///{tmp_path / f'trial{trial}' / 'app.db'}",
        session_dir=str(tmp_path / f"trial{trial}" / "sessions"),
    )


@pytest.mark.parametrize("store", sorted(STORES))
@pytest.mark.parametrize(
    "kind", ["redis", pytest.param("sql", marks=pytest.mark.slow)]
)  # (worker processes take seconds to start: one kind in the default suite)
def test_two_workers_alternate_one_session_through_kills(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str, store: str
) -> None:
    stats = run_trials(
        tmp_path,
        [_states(kind, tmp_path, request)],
        STORES[store],
        trials=1,
        seed=23,
        turns=5,
        steps=4,
        kill_chance=0.6,
        max_kills=2,
    )
    print(stats.line())
    assert stats.trials == 1 and stats.notices > 0 and stats.facts > 0


@pytest.mark.slow
@pytest.mark.parametrize("store", sorted(STORES))
def test_two_workers_many_trials(
    tmp_path: Path, request: pytest.FixtureRequest, store: str
) -> None:
    trials = int(os.environ.get("FLEET_TRIALS", "100"))
    states = [_states("redis", tmp_path, request), _states("sql", tmp_path, request)]
    stats = run_trials(tmp_path, states, STORES[store], trials=trials, seed=2026)
    print(stats.line())
    assert stats.trials == trials
    assert stats.kills >= trials // 2 and stats.replays > 0
