"""The findings of issue 28 item 1, each pinned: what one user's session could read of another's
on one store, through the agent's own tools (a real agent of the installed line, a scripted
model), and the database's own wall (row-level security) against a query that forgets its
filter. PostgreSQL runs as an ordinary role (`test_tenants.app_role`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.core._tenant import Tenant
from tests.fleet.test_tenants import APP_ENV, _store, app_role  # noqa: F401 (a fixture)
from tests.support.lines import IS_1X, Msg, text_of

SECRET = "hunter2-zqx"
DAY = "2026-12-02"


def manager(tmp_path: Path, store: dict[str, Any], session: str) -> ContextManager:
    """A manager of one user's session (the same working dir and store for every session)."""
    config = ContextConfig(
        working_dir=tmp_path / "shared", store=store, recall={"session": session}
    )
    return ContextManager(config)


@pytest.fixture(params=["local", "postgres"])
def kind(request: pytest.FixtureRequest) -> str:
    """The store's kind: each test runs on both."""
    return str(request.param)


@pytest.fixture
async def sessions(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> AsyncIterator[tuple[ContextManager, ContextManager]]:
    """Alice's and Bob's sessions on one store of `kind`, closed after the test."""
    store = _store(kind, request)
    alice, bob = manager(tmp_path, store, "s-alice"), manager(tmp_path, store, "s-bob")
    try:
        yield alice, bob
    finally:
        await alice.close()
        await bob.close()


async def alice_writes(alice: ContextManager) -> tuple[str, Msg]:
    """Alice's agent ``assistant`` saves an output and a message leaves its context: what its
    pipeline does (the stores it is given name it)."""
    _, outputs, dialog = alice._recall_for("assistant")
    ref = os.fspath(outputs.save(f"ok\nthe root password is {SECRET}\n"))
    msg = Msg("user", f"my password is {SECRET}", "user")
    msg.timestamp = f"{DAY} 17:01:49.123"
    await dialog.append([msg])
    alice.search_index.catch_up(seconds=None)
    return ref, msg


async def agent_reads(session: ContextManager, ref: str) -> str:
    """What the session's agent ``assistant`` is answered when it calls ``read_file(ref)``."""
    if IS_1X:
        from agentscope.agent import ReActAgent
        from agentscope.formatter import OpenAIChatFormatter
        from agentscope.tool import Toolkit

        from tests.support.fakes import FakeChatModel

        agent = ReActAgent(
            name="assistant",
            sys_prompt="You help.",
            model=FakeChatModel([]),
            formatter=OpenAIChatFormatter(),
            toolkit=Toolkit(),
        )
        session.attach(agent)
        return text_of(await agent.toolkit.tools["read_file"].original_func(ref))
    from agentscope.agent import Agent
    from agentscope.message import TextBlock, ToolResultBlock, UserMsg
    from agentscope.tool import Toolkit

    from tests.support.fakes import FakeChatModel, tool_call

    model = FakeChatModel([tool_call("read_file", file_path=ref), "ok"])
    agent2 = Agent(
        name="assistant",
        system_prompt="You help.",
        model=model,
        toolkit=Toolkit(),
        middlewares=[session.middleware()],  # type: ignore[attr-defined]
    )
    await agent2.reply(UserMsg("user", "read it"))
    blocks = [b for m in agent2.state.context for b in m.content if isinstance(b, ToolResultBlock)]
    output = blocks[-1].output
    if isinstance(output, str):
        return output
    return "".join(item.text for item in output if isinstance(item, TextBlock))


async def test_the_same_agent_in_another_session_cannot_read_its_saved_output(
    tmp_path: Path, kind: str, sessions: tuple[ContextManager, ContextManager]
) -> None:
    """Found: the ``pg-output:<id>`` refs named in another session's day (and a local
    ``tool_result/`` file) opened another user's saved output."""
    alice, bob = sessions
    ref, _ = await alice_writes(alice)
    assert SECRET in await agent_reads(alice, ref)
    answer = await agent_reads(bob, ref)
    assert SECRET not in answer
    missing = ref[: -len(ref.rsplit(":", 1)[-1])] + "0" * 32 if kind == "postgres" else ref
    if kind == "local":
        name = Path(ref).name
        missing = ref.replace(name, name[:-36] + "0" * 32 + ".txt")
    assert answer == (await agent_reads(bob, missing)).replace(missing, ref)


async def test_a_day_of_the_dialog_shows_only_the_sessions_own_records(
    tmp_path: Path, kind: str, sessions: tuple[ContextManager, ContextManager]
) -> None:
    """Found: ``read_file("pg-dialog:<today>")`` returned the whole day of the database (and a
    local day file every session's records)."""
    alice, bob = sessions
    await alice_writes(alice)
    if kind == "postgres":
        day, none = f"pg-dialog:{DAY}", "pg-dialog:1999-01-01"
    else:
        day = str((tmp_path / "shared" / "dialog" / f"{DAY}.jsonl").resolve())
        none = day.replace(DAY, "1999-01-01")
    assert SECRET in await agent_reads(alice, day)
    answer = await agent_reads(bob, day)
    assert SECRET not in answer
    assert answer == (await agent_reads(bob, none)).replace(none, day)


async def test_search_by_the_same_agent_name_in_another_session_finds_nothing(
    tmp_path: Path, kind: str, sessions: tuple[ContextManager, ContextManager]
) -> None:
    """Found: search_history was scoped by agent name only; the same agent name in another
    user's session found the first user's password."""
    alice, bob = sessions
    await alice_writes(alice)
    alice_recall, _, _ = alice._recall_for("assistant")
    bob_recall, _, _ = bob._recall_for("assistant")
    assert alice_recall is not None and bob_recall is not None
    assert SECRET in text_of(await alice_recall.search_history("password"))
    for query in ("password", SECRET, "root password"):
        answer = text_of(await bob_recall.search_history(query))
        assert SECRET not in answer.replace(query, "")
        assert "No hits" in answer


def test_with_row_level_security_an_unfiltered_query_returns_nothing_of_another_tenant(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The database's own wall: queries with no owner filter at all, issued through the store's
    own connection and transaction setup (`_tenant.transaction`), as an ordinary role."""
    import asyncio

    from agentscope_ctx.stores.postgres import PostgresEngine
    from agentscope_ctx.stores.postgres._tenant import transaction

    store = _store("postgres", request)
    alice = manager(tmp_path, store, "s-alice")
    try:
        asyncio.run(alice_writes(alice))
        alice.search_index.describe_output("pg-output:" + "0" * 32, tool="t", args=None)
        alice.long_term_of("assistant").remember("alice's agent prefers tabs")
    finally:
        asyncio.run(alice.close())
    engine = PostgresEngine(store["dsn"], password_env=APP_ENV, schema=store["schema_name"])
    s = engine.schema
    tables = (
        "dialog",
        "dialog_days",
        "outputs",
        "output_chunks",
        "owners",
        "chunks",
        "memory_docs",
    )
    unfiltered = {t: f"SELECT count(*) FROM {s}.{t}" for t in tables}

    def counts(tenant: Tenant | None) -> dict[str, int]:
        with transaction(engine, tenant) as conn:
            return {t: int(conn.execute(q).fetchone()[0]) for t, q in unfiltered.items()}

    try:
        with engine.connection() as conn:
            row = conn.execute(
                "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
            ).fetchone()
            assert row == (False, False)
            # no transaction, no setting: nothing, not even alice's own
            assert all(conn.execute(q).fetchone()[0] == 0 for q in unfiltered.values())
            assert not conn.execute(f"DELETE FROM {s}.dialog RETURNING seq").fetchall()
        mine = counts(Tenant.of("assistant", "s-alice"))
        assert mine["dialog"] == mine["dialog_days"] == 1
        assert mine["outputs"] == 1 and mine["output_chunks"] == 1
        assert mine["chunks"] >= 2 and mine["owners"] >= 1 and mine["memory_docs"] == 1
        everyone = counts(None)
        assert everyone["owners"] == mine["owners"] + 1  # the owner-less row: nobody's
        for other in (
            Tenant.of("assistant", "s-bob"),
            Tenant.of("assistant", "s-alice", user="mallory"),
            Tenant.of("other", "s-alice", scope="agent"),
            Tenant("assistant", "s-alice", "bogus"),  # type: ignore[arg-type]
        ):
            # long-term memory is the agent's, shared by its sessions (docs/tenants.md)
            same_agent = other.agent == "assistant" and other.scope in ("session", "agent")
            expected = {**dict.fromkeys(tables, 0), "memory_docs": int(same_agent)}
            assert counts(other) == expected, other
            with pytest.raises(Exception, match="policy"), transaction(engine, other) as conn:
                conn.execute(
                    f"INSERT INTO {s}.dialog (msg_id, agent, session, day, record) "
                    "VALUES ('x', 'assistant', 's-alice', %s, '{}')",
                    (DAY,),
                )
        assert counts(Tenant.of("assistant", None, scope="agent"))["dialog"] == 1
    finally:
        engine.close()


def test_a_version_1_schema_is_migrated_in_place(
    pg_server: Any, pg_password: str, pg_schema: str
) -> None:
    """Schema 2: a store made by version 1 (NULL owners, idempotent by msg_id alone) is
    migrated by the first worker that opens it: its rows kept (owned by ``""``), the dialog
    keyed by owner, row-level security on."""
    import asyncio

    import psycopg

    from agentscope_ctx.stores.postgres import PostgresDialogStore, PostgresEngine
    from agentscope_ctx.stores.postgres._schema import _DDL, SCHEMA_VERSION

    s = pg_schema
    with psycopg.connect(pg_server.dsn, password=pg_password, autocommit=True) as conn:
        conn.execute(_DDL.format(s=s))  # version 1's tables, as version 1 made them
        conn.execute(f"INSERT INTO {s}.schema_version (version) VALUES (1)")
        conn.execute(
            f"INSERT INTO {s}.dialog (msg_id, agent, session, day, record) VALUES "
            "('old', NULL, NULL, %s, '{}'), ('a1', 'assistant', NULL, %s, '{}')",
            (DAY, DAY),
        )
    engine = PostgresEngine(pg_server.dsn, password_env="AGENTSCOPE_CTX_TEST_PGPASSWORD", schema=s)
    try:
        dialog = PostgresDialogStore(engine, record_fields={"agent": "other"})
        msg = Msg("user", "same id, another owner", "user")
        msg.id = "old"
        assert asyncio.run(dialog.append([msg])) == 1  # version 1 refused a second "old"
        with engine.connection() as conn:
            assert conn.execute(f"SELECT max(version) FROM {s}.schema_version").fetchone() == (
                SCHEMA_VERSION,
            )
            rows = conn.execute(
                f"SELECT msg_id, agent, session FROM {s}.dialog ORDER BY seq"
            ).fetchall()
            forced = conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace "
                "AND relrowsecurity AND relforcerowsecurity ORDER BY relname",
                (s,),
            ).fetchall()
        assert rows == [("old", "", ""), ("a1", "assistant", ""), ("old", "other", "")]
        assert [r[0] for r in forced] == [
            "chunks",
            "dialog",
            "dialog_days",
            "memory_docs",
            "output_chunks",
            "outputs",
            "owners",
            "steps",
        ]
    finally:
        engine.close()


async def test_a_record_naming_another_tenants_output_does_not_make_it_found(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    """The owner the index learns from a dialog record (after a rebuild, or when the save's
    notice to the index was lost) is not the output's owner: Bob's message naming Alice's
    saved output (its ref in a notice) must not make her output Bob's search hit."""
    from agentscope_ctx.core.truncation._truncation import excerpt_with_notice
    from agentscope_ctx.stores.factory import open_stores
    from tests.support.lines import TextBlock, ToolResultBlock

    store = _store(kind, request)
    config = ContextConfig(working_dir=tmp_path / "shared", store=store)
    alice = open_stores(config, agent="assistant", session="s-alice")
    bob = open_stores(config, agent="assistant", session="s-bob")
    try:
        text = "".join(f"line {i} of the audit\n" for i in range(200)) + f"key {SECRET}\n"
        ref = os.fspath(alice.outputs.save(text))
        if kind == "local":  # the index is a cache: gone, then made again from the files
            alice.search.close()
            for path in (tmp_path / "shared" / "index").iterdir():
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        else:  # the save's notice to the index was lost
            engine = alice.search.engine  # type: ignore[attr-defined]
            with engine.connection() as conn, conn.transaction():
                conn.execute("SELECT set_config('agentscope_ctx.scope', 'all', true)")
                conn.execute(f"DELETE FROM {engine.schema}.owners")
                conn.execute(f"DELETE FROM {engine.schema}.chunks")
                conn.execute(
                    f"UPDATE {engine.schema}.outputs SET indexed = false, indexed_bytes = 0, "
                    "indexed_lines = 0"
                )
        notice = excerpt_with_notice(text, max_bytes=1_024, file_path=ref)
        result = Msg(
            "system",
            [ToolResultBlock(type="tool_result", id="c1", name="shell",
                             output=[TextBlock(type="text", text=notice)])],
            "system",
        )  # fmt: skip
        result.timestamp = f"{DAY} 18:00:00.000"
        await bob.dialog.append([result])
        bob.search.catch_up(seconds=None)
        from agentscope_ctx.core.search._search_hits import Filters

        bobs = Filters(tenant=Tenant.of("assistant", "s-bob"))
        hits = bob.search.search(SECRET, bobs, limit=10, catch_up_seconds=None).hits
        assert not hits
        alices = Filters(tenant=Tenant.of("assistant", "s-alice"))
        if kind == "postgres":  # the database knows who saved it
            assert alice.search.search(SECRET, alices, limit=10, catch_up_seconds=None).hits
    finally:
        alice.close()
        bob.close()


async def record_a_compaction(
    session: ContextManager, summary: str, agent: str = "assistant"
) -> None:
    """The session's agent `agent` runs its pipeline once, compacting: its steps record keeps
    the summary (`services._steps`), as a real run's does."""
    from agentscope_ctx.core._pipeline import PipelineReport
    from agentscope_ctx.core.context._memory import ContextMemory

    async def nothing(*_: Any) -> None:
        return None

    memory = ContextMemory(session.working_dir)
    pipeline, _, _ = session.make_pipeline(
        memory,
        agent_name=agent,
        calibration_key=agent,
        prompt_parts=lambda: None,  # type: ignore[arg-type,return-value]
        notify=nothing,
        on_compacted=nothing,
    )
    await memory.update_compressed_summary(summary)
    await session._steps[pipeline].note(pipeline, PipelineReport(compacted=2))


async def test_the_package_own_files_read_as_missing_to_every_tenant(tmp_path: Path) -> None:
    """Found (issue 46 item 1): ``usage/steps/<session>/<agent>.jsonl`` keeps the first 4,000
    characters of every compaction summary, and another tenant's ``read_file`` read it on a
    shared local working dir with the default ``read_roots``; so did the usage records, the
    search index's files and the audit file. Now every tenant (``shared`` too) is answered as
    for a file that does not exist; the operator's reader still reads them."""
    store = {"kind": "local"}
    alice, bob = manager(tmp_path, store, "s-alice"), manager(tmp_path, store, "s-bob")
    shared = ContextManager(
        ContextConfig(working_dir=tmp_path / "shared", store=store, recall={"scope": "shared"})
    )
    try:
        await alice_writes(alice)
        await record_a_compaction(alice, f"the user's root password is {SECRET}")
        wd = (tmp_path / "shared").resolve()
        (wd / "audit.jsonl").write_text('{"v": 1, "action": "gc"}\n')
        (wd / "usage" / "worker.s-alice.0123.json").write_text('{"agent": "assistant"}\n')
        steps = sorted((wd / "usage" / "steps").rglob("*.jsonl"))
        assert steps and SECRET in steps[0].read_text()
        index = sorted(p for p in (wd / "index").rglob("*") if p.is_file())
        assert index
        own = [steps[0], wd / "audit.jsonl", wd / "usage" / "worker.s-alice.0123.json", index[0]]
        for path in own:
            for ref in (str(path), str(path.relative_to(wd))):
                missing = ref.replace(path.name, "none-" + path.name)
                for reader in (bob, alice, shared):  # every tenant, its owner too
                    answer = await agent_reads(reader, ref)
                    assert answer == (await agent_reads(reader, missing)).replace(missing, ref)
                    assert "does not exist" in answer
        assert SECRET in alice.reader.read_now(str(steps[0]))  # the operator's reader
    finally:
        for side in (alice, bob, shared):
            await side.close()


async def test_two_users_agents_of_one_name_in_one_session_keep_two_steps_records(
    tmp_path: Path,
) -> None:
    """Found (issue 46 item 1): the steps record was named by the agent's name, so alice's and
    bob's ``assistant`` in one session id wrote one file. Now each agent key has its own
    (its tag, as the stores name a tenant's files); the viewer reads the session's all, and
    a record of before (named by the agent's name) with them."""
    from agentscope_ctx.core._tenant import agent_key, owner_tag
    from agentscope_ctx.stores._steps_file import StepFile

    def user_manager(user: str) -> ContextManager:
        recall = {"session": "s-1", "user": user}
        return ContextManager(
            ContextConfig(working_dir=tmp_path / "wd", store={"kind": "local"}, recall=recall)
        )

    alice, bob = user_manager("alice"), user_manager("bob")
    try:
        await record_a_compaction(alice, "alice's summary")
        await record_a_compaction(bob, "bob's summary")
    finally:
        await alice.close()
        await bob.close()
    folder = tmp_path / "wd" / "usage" / "steps" / "s-1"
    old = folder / "assistant.jsonl"  # a record of before: named by the agent's name
    old.write_text('{"v": 2, "agent": "assistant", "session": "s-1", "run": 1, "summary": "old"}\n')
    files = {p.name: p.read_text() for p in folder.iterdir()}
    for user in ("alice", "bob"):
        text = files[f"{owner_tag(agent_key('assistant', user))}.jsonl"]
        assert f"{user}'s summary" in text and f'"key": "{user}/assistant"' in text
        assert all(other not in text for other in ("alice's", "bob's") if other != f"{user}'s")
    summaries = sorted(str(r["summary"]) for r in StepFile(tmp_path / "wd").read("s-1"))
    assert summaries == ["alice's summary", "bob's summary", "old"]
