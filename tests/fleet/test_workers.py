"""Two worker processes alternate the replies of one session, SIGKILLed at random points
(tests/fleet/harness.py says what is checked). On the installed AgentScope line: 2.x, the
state through the app storage (`RedisStorage`, `AsyncSQLAlchemyStorage` on SQLite); 1.x,
`ContextMemory` over `RedisMemory` or `AsyncSQLAlchemyMemory` (SQLite). The store
(`STORES`): local (the working_dir both workers share), and PostgreSQL where the tree has it
(`store: {kind: postgres}`) and a server runs (the `pg_server` fixture).

A few trials here; 100 under `-m slow` (`FLEET_TRIALS` to change):

    PYTHONPATH=$PWD python -m pytest -q -n 0 -m slow -s tests/fleet/test_workers.py
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.harness import (
    LOCAL,
    PRIVATE_DIRS,
    Store,
    postgres_store,
    run_trials,
)
from tests.fleet.session import state_at


def _postgres(request: pytest.FixtureRequest) -> Store:
    from agentscope_ctx.core.config._config import ContextConfig

    if "store" not in ContextConfig.model_fields:
        pytest.skip("this tree has no PostgreSQL store (`store: {kind: postgres}`) yet")
    try:
        server = request.getfixturevalue("pg_server")  # (skips without a server)
    except pytest.FixtureLookupError:
        pytest.skip("no `pg_server` fixture (tests/fleet/conftest.py) in this tree yet")
    from tests.fleet.postgres_server import PASSWORD

    return postgres_store(server.dsn, PASSWORD)


STORES: dict[str, Callable[[pytest.FixtureRequest], Store]] = {
    "local": lambda request: LOCAL,
    "postgres": _postgres,
}
"""The stores the harness runs against, by name: one parameter each."""


def _states(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[[int], Any]:
    """A fresh shared state of `kind` for each trial."""
    redis = request.getfixturevalue("redis_server") if kind == "redis" else None
    return lambda trial: state_at(kind, tmp_path / f"trial{trial}", redis)


ONE_TRIAL: dict[str, Any] = {"trials": 1, "seed": 23, "turns": 5, "steps": 4}
"""A short session: one trial, five turns of four steps."""


@pytest.mark.parametrize("store", ["local", pytest.param("postgres", marks=pytest.mark.slow)])
@pytest.mark.parametrize(
    "kind", ["redis", pytest.param("sql", marks=pytest.mark.slow)]
)  # (worker processes take seconds to start: one run in the default suite)
def test_two_workers_alternate_one_session_through_kills(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str, store: str
) -> None:
    stats = run_trials(
        tmp_path,
        [_states(kind, tmp_path, request)],
        STORES[store](request),
        **ONE_TRIAL,
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
    stats = run_trials(tmp_path, states, STORES[store](request), trials=trials, seed=2026)
    print(stats.line())
    assert stats.trials == trials
    assert stats.kills >= trials // 2 and stats.replays > 0


@pytest.mark.slow
def test_the_checks_refuse_workers_that_share_no_store(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The control: each worker keeps its own local store (`PRIVATE_DIRS`), no kill; a
    worker cannot find what the other one saved, and the checks must say so."""
    with pytest.raises(AssertionError) as failure:
        run_trials(
            tmp_path,
            [_states("redis", tmp_path, request)],
            PRIVATE_DIRS,
            **ONE_TRIAL,
            kill_chance=0.0,
            max_kills=0,
        )
    assert not any(
        crash in str(failure.value) for crash in ("worker ended", "did not start", "spawner")
    ), str(failure.value)[-2000:]  # a check failed, not the harness
