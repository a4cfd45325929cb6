"""The fleet example's Redis connections on AgentScope 2.x (issue 46 item 18): AgentScope's
`RedisStorage` and `RedisMessageBus` make a redis-py pool of 100 connections each by default,
which refuses the 101st at once ("Too many connections"): with 1,000 sessions in flight, 800
of 1,000 turns failed before the package was reached. `examples/fleet/app2.py` gives each a
pool that waits for a free connection, sized by the sessions a worker runs at once
(docs/fleet.md, "Redis connections"). Here the example's own storage and bus, as it hands
them to `create_app`, serve 1,000 sessions' calls at once on a real Redis."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X

if IS_1X:
    pytest.skip("AgentScope 2.x's app server", allow_module_level=True)

from tests.fleet.example_run import EXAMPLE
from tests.fleet.redis_server import RedisServer, redis_server  # noqa: F401 (a fixture)

SESSIONS = 1_000


def example_app_parts(
    tmp_path: Path, redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """What `examples/fleet/app2.py` gives `create_app` (it is imported as uvicorn does)."""
    import agentscope.app

    db = redis.fresh_db()
    config = tmp_path / "fleet.yaml"
    config.write_text(f"working_dir: {tmp_path / 'wd'}\n")
    monkeypatch.setenv("FLEET_CONFIG", str(config))
    monkeypatch.setenv("REDIS_URL", f"redis://{redis.host}:{redis.port}/{db}")
    monkeypatch.setenv("FLEET_DIR", str(tmp_path))
    given: dict[str, Any] = {}
    real = agentscope.app.create_app

    def create_app(**kwargs: Any) -> Any:
        given.update(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(agentscope.app, "create_app", create_app)
    spec = importlib.util.spec_from_file_location("fleet_app2", EXAMPLE / "app2.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "fleet_app2", module)
    spec.loader.exec_module(module)
    return given


def test_the_example_storage_and_bus_serve_1000_sessions_at_once(
    tmp_path: Path,
    redis_server: RedisServer,  # noqa: F811 (the fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parts = example_app_parts(tmp_path, redis_server, monkeypatch)
    storage, bus = parts["storage"], parts["message_bus"]

    async def burst() -> tuple[list[object], list[object]]:
        async with storage, bus:
            sessions = await asyncio.gather(
                *(storage.get_session("alice", "agent", f"s-{i}") for i in range(SESSIONS)),
                return_exceptions=True,
            )
            locks = await asyncio.gather(
                *(bus.is_locked(f"lock:s-{i}") for i in range(SESSIONS)),
                return_exceptions=True,
            )
            pools = (storage._client.connection_pool, bus._client.connection_pool)
            for pool in pools:  # at most its size, whatever the sessions in flight
                assert len(pool._available_connections) <= pool.max_connections < SESSIONS
            return sessions, locks

    sessions, locks = asyncio.run(burst())
    failed = [r for r in [*sessions, *locks] if isinstance(r, BaseException)]
    assert not failed, f"{len(failed)} of {2 * SESSIONS} calls failed: {failed[0]!r}"
    assert sessions == [None] * SESSIONS and locks == [False] * SESSIONS
