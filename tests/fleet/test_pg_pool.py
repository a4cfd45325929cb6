"""Issue 46 item 16: the connections to the fleet store belong to the process, not to the
manager. Fifty sessions, each with a manager of its own (the 1.x pattern, a hand-wired 2.x
service), on one DSN hold at most `store.max_connections`, counted by the server itself
(`pg_stat_activity`, on a database of the test's own); a call that finds every connection in
use waits for one, and fails as an unreachable store does when none comes back in time."""

from __future__ import annotations

import asyncio
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx import ContextConfig
from agentscope_ctx.core._errors import ConfigError, OffloadError, PersistenceError
from agentscope_ctx.stores.postgres import PostgresEngine, PostgresOutputStore
from tests.fleet.pg_config import PASSWORD_ENV
from tests.fleet.pg_database import Database, own_database  # noqa: F401 (a fixture)
from tests.support.agent_line import Line

SESSIONS = 50
CAP = 4


def _log(n: int) -> str:
    return "".join(f"10:{i % 60:02d} worker-{n} job={i} status=ok\n" for i in range(150))


def _config(tmp_path: Path, database: Database, session: str, **store: Any) -> ContextConfig:
    return ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "w"),
            "max_input_tokens": 8_000,
            "tool_result": {"recent_max_bytes": 2_000, "old_max_bytes": 1_200},
            "summarizer": {"enabled": False},
            "recall": {"session": session},
            "store": {
                "kind": "postgres",
                "dsn": database.dsn,
                "password_env": PASSWORD_ENV,
                **store,
            },
        }
    )


async def test_fifty_managers_on_one_dsn_hold_at_most_the_cap(
    tmp_path: Path,
    line: Line,
    own_database: Database,  # noqa: F811
) -> None:
    def cat(n: int) -> str:
        """Print log n.

        Args:
            n (int): which log.
        """
        return _log(n)

    sessions = [
        line.session(
            _config(tmp_path, own_database, f"s{i}", max_connections=CAP),
            line.fake_model(default="## Goal\n- read"),
            [cat],
        )
        for i in range(SESSIONS)
    ]
    try:
        await asyncio.gather(
            *(
                s.turn("Read log 1.", line.tool_call("cat", f"c{i}", n=i), line.text("Read."))
                for i, s in enumerate(sessions)
            )
        )
        held = own_database.connections()
        assert 0 < held <= CAP, held  # every session's output saved through the same few
        assert all(s.manager.backend.kind == "postgres" for s in sessions)
        pools = {id(s.manager.store.engine.pool) for s in sessions}  # type: ignore[attr-defined]
        assert len(pools) == 1
        (pool,) = {s.manager.store.engine.pool for s in sessions}  # type: ignore[attr-defined]
        assert pool.peak <= CAP, pool.peak
        for i, s in enumerate(sessions):  # each one's output saved and cut
            assert "pg-output:" in s.prompt(), i
    finally:
        for s in sessions:
            await s.close()
    # the last manager closed them (those its background indexing held, once given back)
    assert pool.wait_for(lambda pool: pool.open == 0, timeout=60), pool


def test_a_call_that_finds_every_connection_in_use_waits_for_one(
    own_database: Database,  # noqa: F811
) -> None:
    engine = PostgresEngine(own_database.dsn, password_env=PASSWORD_ENV, max_connections=2)
    outputs = PostgresOutputStore(engine, 7)
    outputs.save("made the schema\n")
    saved: list[str] = []
    with ExitStack() as held:
        for _ in range(2):
            held.enter_context(engine.connection())
        saver = threading.Thread(target=lambda: saved.append(outputs.save("waited\n")))
        saver.start()
        assert engine.pool.wait_for(lambda pool: pool.waiting == 1, timeout=60)
        assert own_database.connections() == 2 and not saved
    saver.join()  # a connection came back: the save went through on it
    assert outputs.read_range(saved[0], 0, 100) == b"waited\n"
    assert own_database.connections() <= 2
    engine.close()
    assert engine.pool.open == 0  # closed with the engine that used them


def test_none_coming_back_in_time_fails_as_an_unreachable_store(
    own_database: Database,  # noqa: F811
) -> None:
    engine = PostgresEngine(
        own_database.dsn, password_env=PASSWORD_ENV, max_connections=2, connect_timeout=0.2
    )
    outputs = PostgresOutputStore(engine, 7)
    with engine.connection(), engine.connection():
        with pytest.raises(PersistenceError, match=r"all 2 connections .* in use"):
            with engine.connection():
                pass
        with pytest.raises(OffloadError, match="max_connections"):
            outputs.save("kept whole by the caller")
    assert outputs.read_range(outputs.save("then saved\n"), 0, 100) == b"then saved\n"
    engine.close()


def test_max_connections_is_validated() -> None:
    for bad in (0, 1, "many", 10_001):
        with pytest.raises(ConfigError, match=r"store\.max_connections"):
            ContextConfig(store={"max_connections": bad})
    assert ContextConfig().store.max_connections == 8
