"""The background indexing of a process's PostgreSQL handles runs one step at a time on their
pool (issue 46 item 11): a search keeps a connection while the others' outputs are indexed.
Real PostgreSQL (`tests/fleet/conftest`)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from agentscope_ctx import ContextConfig
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.stores.factory import open_stores
from agentscope_ctx.stores.postgres._indexer import INDEX_AT_SAVE_BYTES
from agentscope_ctx.stores.postgres._search import PostgresSearchIndex

HANG_SECONDS = 60.0
"""A guard against a hang, never reached when the test passes."""


def test_one_background_step_at_a_time_leaves_a_search_its_connection(
    tmp_path: Path, pg_server: Any, pg_password: str, pg_schema: str, monkeypatch: Any
) -> None:
    """Before, each handle's background step took a connection of the pool for its piece at
    once: here a second piece started while the first was held (``2 == 1``), both of the
    pool's 2 connections then in use; in the live benchmark at 20k messages a search waited
    up to 2.2 s for a connection."""
    store = {
        "kind": "postgres",
        "dsn": pg_server.dsn,
        "password_env": "AGENTSCOPE_CTX_TEST_PGPASSWORD",
        "schema_name": pg_schema,
        "max_connections": 2,
        "connect_timeout_seconds": 5.0,
    }
    config = ContextConfig(working_dir=tmp_path, store=store)
    changed = threading.Condition()
    state = {"steps": 0, "inside": 0, "most": 0, "done": 0}
    release = threading.Event()
    step, piece = PostgresSearchIndex._background_step, PostgresSearchIndex._index_piece

    def counted_step(self: PostgresSearchIndex) -> bool:
        with changed:
            state["steps"] += 1
            changed.notify_all()
        return step(self)

    def held_piece(self: PostgresSearchIndex, conn: Any, key: str) -> tuple[int, bool]:
        with changed:
            state["inside"] += 1
            state["most"] = max(state["most"], state["inside"])
            changed.notify_all()
        try:
            assert release.wait(HANG_SECONDS)
            return piece(self, conn, key)
        finally:
            with changed:
                state["inside"] -= 1
                state["done"] += 1
                changed.notify_all()

    monkeypatch.setattr(PostgresSearchIndex, "_background_step", counted_step)
    monkeypatch.setattr(PostgresSearchIndex, "_index_piece", held_piece)
    handles = [open_stores(config, agent="bench", session=f"s{k}") for k in range(4)]
    try:
        big = "".join(f"{n:06d} the kiwi line\n" for n in range(INDEX_AT_SAVE_BYTES // 10))
        for one in handles[:3]:
            one.outputs.save(big)  # over the save's limit: the background's
        with changed:  # every handle's background in a step, one of them in a piece
            assert changed.wait_for(
                lambda: state["steps"] >= 3 and state["inside"] >= 1, HANG_SECONDS
            )
        mine = Filters(tenant=Tenant.of("bench", "s3"))
        found = handles[3].search.search("kiwi", mine, limit=5)  # before: no connection left
        assert found.hits == []
        release.set()
        with changed:  # the three outputs indexed (a piece each), by the background alone
            assert changed.wait_for(lambda: state["done"] >= 3, HANG_SECONDS)
        assert state["most"] == 1
    finally:
        release.set()
        for one in handles:
            one.close()
