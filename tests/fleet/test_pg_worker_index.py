"""The search index under the two-role setup (issue 46 item 6's follow-up, docs/tenants.md):
a worker logged in as the workers' role (no privilege of the schema's owner, so row-level
security shows it a tenant's rows only when it binds that tenant) indexes what its tenants
save and append as theirs, at once and without a warning, and the migration role's catch-up
still indexes everyone's. Nothing crosses tenants. On a real server.

Before the fix every save as the workers' role logged "search index not updated ... new row
violates row-level security policy for table "owners"" (the index bound every tenant's scope,
``all``, which that role may no longer use) and its tenants found nothing of it until the
migration role's indexer caught up."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path

import pytest

from agentscope_ctx import ContextConfig
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.stores.factory import Stores, open_stores
from tests.fleet.postgres_server import PostgresServer
from tests.fleet.test_pg_roles import ENV, PASSWORD, config, roles, writes
from tests.support.lines import Msg

ALICE = Tenant.of("assistant", "s-alice")
BOB = Tenant.of("assistant", "s-bob")


def two_roles(
    tmp_path: Path, server: PostgresServer, password: str
) -> tuple[ContextConfig, ContextConfig]:
    """A schema of its own made by the migration role, the workers' role granted what
    docs/tenants.md grants it; a config logging in as each (the migration role's first)."""
    import psycopg

    schema = f"w_{uuid.uuid4().hex[:12]}"
    migrate, worker = roles(server, password)
    as_owner = config(tmp_path, server, migrate, schema)
    writes(as_owner, "setup", "s-setup", "the schema made")
    with psycopg.connect(server.dsn, password=password, autocommit=True) as conn:
        for statement in (
            f"GRANT USAGE ON SCHEMA {schema} TO {worker}",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {worker}",
            f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {worker}",
        ):
            conn.execute(statement)
    return as_owner, config(tmp_path, server, worker, schema)


def found(
    stores: Stores, word: str, tenant: Tenant | None, catch_up: float | None = 0
) -> list[str]:
    """What `tenant` finds of `word` (`catch_up`: the search's own catch-up, 0: none, so
    only what is indexed already is found)."""
    result = stores.search.search(word, Filters(tenant=tenant), catch_up_seconds=catch_up)
    return [" ".join(text for _, text in hit.lines).strip() for hit in result.hits]


def test_a_worker_indexes_its_tenants_rows_as_theirs_and_the_migration_role_everyones(
    tmp_path: Path,
    pg_server: PostgresServer,
    pg_password: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(ENV, PASSWORD)
    as_owner, as_worker = two_roles(tmp_path, pg_server, pg_password)
    caplog.set_level(logging.INFO, logger="agentscope_ctx")
    alice = open_stores(as_worker, agent="assistant", session="s-alice")
    bob = open_stores(as_worker, agent="assistant", session="s-bob")
    try:
        # a save is indexed as it is saved, as its saver's: found with no catch-up at all
        ref = alice.outputs.save("alice ledger zanzibar\n")
        alice.search.describe_output(ref, tool="read_file", args="ledger.txt")
        assert found(alice, "zanzibar", ALICE) == ["alice ledger zanzibar"]
        # a message leaving her context: indexed as she appends it (her index has met her)
        asyncio.run(alice.dialog.append([Msg("user", "alice asks about quokka", "user")]))
        assert found(alice, "quokka", ALICE) == ["alice asks about quokka"]
        # bob's index has not met bob before his search: the search catches up his rows
        asyncio.run(bob.dialog.append([Msg("user", "bob asks about wombat", "user")]))
        assert found(bob, "wombat", BOB, catch_up=None) == ["bob asks about wombat"]
        # and nobody finds the other's, with or without a catch-up
        others = ((bob, BOB, ("zanzibar", "quokka")), (alice, ALICE, ("wombat",)))
        for stores, tenant, words in others:
            for word in words:
                assert found(stores, word, tenant, catch_up=None) == [], word
        hit = alice.search.search("zanzibar", Filters(tenant=ALICE), catch_up_seconds=0).hits[0]
        assert (hit.tool, hit.args) == ("read_file", "ledger.txt")
    finally:
        alice.close()
        bob.close()
    told = [r.getMessage() for r in caplog.records if "search index not updated" in r.message]
    assert told == []
    # the migration role's catch-up still indexes every tenant's rows (a rebuild: all again)
    operator = open_stores(as_owner)
    try:
        operator.search.rebuild()
        assert len(found(operator, "zanzibar wombat", None)) == 2
    finally:
        operator.close()
    again = open_stores(as_worker, agent="assistant", session="s-alice")
    try:
        assert found(again, "zanzibar", ALICE) == ["alice ledger zanzibar"]
        assert found(again, "quokka", ALICE) == ["alice asks about quokka"]
        assert found(again, "wombat", ALICE) == []
    finally:
        again.close()


def test_a_record_naming_another_tenants_output_is_indexed_as_its_owners(
    tmp_path: Path,
    pg_server: PostgresServer,
    pg_password: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Bob's dialog names the saved output of Alice's (a ref pasted into his session): the
    worker indexes his record as his, and leaves what is known of her output as it was (its
    row is not his to update: recording it in his transaction failed the whole catch-up, every
    time, and his record was never indexed)."""
    from agentscope_ctx.core.truncation._truncation import (
        Notice,
        Position,
        advance,
        render_notice,
        utf8_len,
    )
    from tests.support.lines import ToolResultBlock

    monkeypatch.setenv(ENV, PASSWORD)
    _, as_worker = two_roles(tmp_path, pg_server, pg_password)
    caplog.set_level(logging.INFO, logger="agentscope_ctx")
    alice = open_stores(as_worker, agent="assistant", session="s-alice")
    bob = open_stores(as_worker, agent="assistant", session="s-bob")
    try:
        ref = alice.outputs.save("alice ledger zanzibar\n")
        alice.search.describe_output(ref, tool="read_file", args="ledger.txt")
        excerpt = "bob pasted kookaburra"  # (a notice is genuine when it says what it cut)
        notice = Notice(2, Position(), utf8_len(excerpt), ref, advance(Position(), excerpt))
        output = f"{excerpt}\n{render_notice(notice)}"
        block = ToolResultBlock(type="tool_result", id="k1", name="grep", output=output)
        asyncio.run(bob.dialog.append([Msg("system", [block], "system")]))
        hits = found(bob, "kookaburra", BOB, catch_up=None)  # (the notice shown as a mark)
        assert len(hits) == 1 and hits[0].startswith("bob pasted kookaburra"), hits
        assert found(bob, "zanzibar", BOB, catch_up=None) == []
        hit = alice.search.search("zanzibar", Filters(tenant=ALICE), catch_up_seconds=0).hits[0]
        assert (hit.tool, hit.args) == ("read_file", "ledger.txt")
    finally:
        alice.close()
        bob.close()
    told = [r.getMessage() for r in caplog.records if "search index not updated" in r.message]
    assert told == []


def test_a_workers_memory_write_is_indexed_as_its_agents(
    tmp_path: Path, pg_server: PostgresServer, pg_password: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-term memory document written as the workers' role is found by its agent at
    once (before: indexed in a transaction that saw every agent's documents, which that role
    sees none of, so it was never indexed)."""
    from agentscope_ctx.stores.postgres import PostgresEngine
    from agentscope_ctx.stores.postgres._memory import PostgresMemoryDocs

    monkeypatch.setenv(ENV, PASSWORD)
    _, as_worker = two_roles(tmp_path, pg_server, pg_password)
    store = as_worker.store
    assert store.dsn is not None
    engine = PostgresEngine(store.dsn, password_env=store.password_env, schema=store.schema_name)
    try:
        docs = PostgresMemoryDocs(engine, "assistant")
        docs.append("MEMORY.md", lambda text: text + "- alice keeps a platypus\n")
    finally:
        engine.close()
    stores = open_stores(as_worker, agent="assistant", session="s-alice")
    try:
        agent = Tenant.of("assistant", "s-alice", scope="agent")
        assert found(stores, "platypus", agent) == ["- alice keeps a platypus"]
        assert found(stores, "platypus", Tenant.of("other", "s-alice", scope="agent")) == []
    finally:
        stores.close()
