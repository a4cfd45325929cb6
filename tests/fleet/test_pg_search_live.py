"""A PostgreSQL search while another worker's outputs are being indexed (issue 46 item 11):
the search indexes the dialog rows it lacks, never a piece of an output, which it leaves to
the background indexing and counts as pending. Real PostgreSQL (`tests/fleet/conftest`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import agentscope_ctx.core.search._background as background_module
from agentscope_ctx import ContextConfig
from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.stores.factory import open_stores
from agentscope_ctx.stores.postgres._indexer import INDEX_AT_SAVE_BYTES


def _config(tmp_path: Path, pg_server: Any, pg_schema: str) -> ContextConfig:
    store = {
        "kind": "postgres",
        "dsn": pg_server.dsn,
        "password_env": "AGENTSCOPE_CTX_TEST_PGPASSWORD",
        "schema_name": pg_schema,
    }
    return ContextConfig(working_dir=tmp_path, store=store)


def test_a_search_leaves_the_outputs_to_the_background_and_finds_every_record(
    tmp_path: Path, pg_server: Any, pg_password: str, pg_schema: str, monkeypatch: Any
) -> None:
    """Before, a search indexed a piece of an output over the save's limit in its own path
    (123-503 ms each under load: the live benchmark's p95 on PostgreSQL)."""
    config = _config(tmp_path, pg_server, pg_schema)
    writer = open_stores(config, agent="bench", session="s1")
    searcher = open_stores(config, agent="bench", session="s2")
    kicked: list[int] = []
    try:
        monkeypatch.setattr(searcher.search.background, "kick", lambda: kicked.append(1))
        monkeypatch.setattr(writer.search.background, "kick", lambda: None)  # left unindexed
        big = "".join(f"{n:06d} the emu line\n" for n in range(INDEX_AT_SAVE_BYTES // 10))
        writer.outputs.save(big)  # over the save's limit: the background's
        asyncio.run(writer.dialog.append([Msg("user", "the emu record", "user")]))
        mine = Filters(tenant=Tenant.of("bench", "s1"))
        found = searcher.search.search("emu", mine, limit=5)
        assert [h.kind for h in found.hits] == ["dialog"]  # the record, indexed by the search
        assert found.pending == 1 and kicked  # the output: pending, the background started
        assert background_module.ENABLED
        writer.search.catch_up()  # the background's work
        found = searcher.search.search("emu", mine, limit=5)
        assert found.pending == 0 and "tool_result" in {h.kind for h in found.hits}
    finally:
        writer.close()
        searcher.close()


@pytest.mark.parametrize("enabled", [False])
def test_without_background_indexing_a_search_indexes_a_piece_itself(
    tmp_path: Path,
    pg_server: Any,
    pg_password: str,
    pg_schema: str,
    monkeypatch: Any,
    enabled: bool,
) -> None:
    monkeypatch.setattr(background_module, "ENABLED", enabled)
    config = _config(tmp_path, pg_server, pg_schema)
    stores = open_stores(config, agent="bench", session="s1")
    try:
        big = "".join(f"{n:06d} the ibis line\n" for n in range(INDEX_AT_SAVE_BYTES // 10))
        stores.outputs.save(big)
        found = stores.search.search("ibis", Filters(tenant=Tenant.of("bench", "s1")))
        assert found.hits and found.pending == 0  # indexed in its own path, as before
    finally:
        stores.close()
