"""`forget` on both stores (DESIGN.md §19, issue 47): two to five tenants write at once; one
is forgotten (by session, by agent or by user) while the others keep writing; then none of
the forgotten tenants' bytes is found by a direct scan of every file under the working dir
and every row of every table (`forget_world.World.holding`), their names only in the audit
line, and the search, the reads and the dialog of every other tenant are as they were. The
local index's files that held them are gone (a new generation). Also: the background
indexer running beside the forget, and a worker killed mid-forget (running it again
completes it)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_ctx.core._errors import ContextUsageError
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.stores._forget import ForgetTarget, forget_store
from agentscope_ctx.stores.factory import open_backend
from tests.fleet.forget_world import Who, World, tenants
from tests.fleet.pg_config import fleet_config

if TYPE_CHECKING:
    from tests.support.forked import Forker

ROOT = Path(__file__).resolve().parents[2]
KINDS = ["local", "postgres"]
FEW = settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
MANY = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(params=KINDS)
def make_config(request: pytest.FixtureRequest) -> Callable[[], ContextConfig]:
    """A fresh store of the kind for each call (a working dir; with its own schema)."""
    if request.param == "local":
        return lambda: ContextConfig(working_dir=Path(tempfile.mkdtemp(prefix="forget-")))
    server = request.getfixturevalue("pg_server")
    request.getfixturevalue("pg_password")
    return lambda: fleet_config(
        Path(tempfile.mkdtemp(prefix="forget-")), server, f"t_{uuid.uuid4().hex[:12]}"
    )


def target_of(victim: Who, mode: str) -> ForgetTarget:
    if mode == "user" and victim.user is not None:
        return ForgetTarget(user=victim.user)
    if mode in ("agent", "user"):
        return ForgetTarget(user=victim.user, agent=victim.agent)
    return ForgetTarget(user=victim.user, agent=victim.agent, session=victim.session)


def index_files(world: World) -> set[tuple[str, int]]:
    """The local index's data files (path, inode): the generation's database and segments."""
    out = set()
    for folder, _, names in os.walk(world.root / "index"):
        for name in names:
            if name not in ("current", ".lock"):
                path = Path(folder) / name
                out.add((str(path), path.stat().st_ino))
    return out


def snapshot(world: World, whos: list[Who]) -> dict[str, object]:
    return {
        w.session: (world.search(w), world.reads(w), world.dialog(w), search_one(world, w))
        for w in whos
    }


def search_one(world: World, who: Who) -> list[object]:
    """The hits of one record's own word (`{token}x1`): the same before and after."""
    from agentscope_ctx.core.search._search_hits import Filters

    stores = world.stores(who)
    try:
        result = stores.search.search(
            f"{who.token}x1", Filters(tenant=who.tenant), limit=10, catch_up_seconds=None
        )
        return sorted((str(h.path), h.start_line, repr(h.lines)) for h in result.hits)
    finally:
        stores.close()


def check_forgotten(world: World, gone: list[Who], before_index: set[tuple[str, int]]) -> None:
    for who in gone:
        assert world.holding(who.token) == [], who  # its content: nowhere, audit included
        assert world.holding(who.session, audit=False) == [], who  # its name: the audit only
        assert world.search(who) == [] and search_one(world, who) == []
        assert set(world.reads(who).values()) <= {None}
        assert world.dialog(who) == []
        shown = world.read_file(who)  # its outputs: no such output; its days: none of it
        assert not any(who.token in text for text in shown), shown
        assert all("does not exist" in t or "no such" in t for t in shown[: len(who.refs)]), shown
        tmp = Path(tempfile.mkdtemp(prefix="inspect-"))
        printed = world.inspect(tmp)
        assert who.token not in printed and who.session not in printed
    if world.kind == "local" and before_index:
        assert not before_index & index_files(world)  # the segments that held them: gone


def check_kept(world: World, kept: list[Who], before: dict[str, object], *, more: bool) -> None:
    for who in kept:
        hits, reads, dialog, one = before[who.session]  # type: ignore[misc]
        assert search_one(world, who) == one, who
        now_reads = world.reads(who)
        assert {r: now_reads[r] for r in reads} == reads  # byte for byte
        assert all(now_reads[r] == who.outputs[r] for r in who.refs)
        now_dialog = world.dialog(who)
        assert now_dialog[: len(dialog)] == dialog
        assert len(now_dialog) == len(dialog) + (4 if more else 0)
        if not more:
            assert world.search(who) == hits
        assert world.holding(who.token)  # (the scan finds what is there)
        shown = world.read_file(who)
        assert all(t.startswith(f"row 0 of {who.token}") for t in shown[: len(who.refs)]), shown


def audit_lines(world: World) -> list[dict[str, object]]:
    if world.kind == "local":
        path = world.root / "audit.jsonl"
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        return [json.loads(line) for line in path.read_text().splitlines()]
    from agentscope_ctx.stores.postgres import PostgresEngine
    from agentscope_ctx.stores.postgres._audit import PostgresAudit

    store = world.config.store
    assert store.dsn is not None
    engine = PostgresEngine(store.dsn, password_env=store.password_env, schema=store.schema_name)
    try:
        return PostgresAudit(engine).read()
    finally:
        engine.close()


async def forget_beside_writers(
    world: World, target: ForgetTarget, kept: list[Who], *, indexer: bool
) -> None:
    """Forget `target` in a thread while the `kept` tenants write 4 more records each (and,
    with `indexer`, another worker's index catches up in a loop)."""
    done = threading.Event()
    errors: list[BaseException] = []

    def catch_up() -> None:
        search = open_backend(world.config).search
        try:
            while not done.is_set():
                search.catch_up()
        except BaseException as exc:  # pragma: no cover - shown by the assertion
            errors.append(exc)
        finally:
            search.close()

    worker = threading.Thread(target=catch_up) if indexer else None
    if worker is not None:
        worker.start()
    try:
        await asyncio.gather(
            asyncio.to_thread(forget_store, world.config, target, who="test"),
            *(world.write(w, 100, 4) for w in kept),
        )
    finally:
        done.set()
        if worker is not None:
            worker.join()
    assert not errors


def scenario(
    config: ContextConfig, count: int, victim: int, mode: str, seed: int, *, indexer: bool
) -> None:
    whos = tenants(random.Random(seed), count)
    world = World(config, whos)
    asyncio.run(world.write_all())
    target = target_of(whos[victim % count], mode)
    gone = [w for w in whos if target.owns(w.key, w.session)]
    kept = [w for w in whos if w not in gone]
    before = snapshot(world, kept)
    for w in gone:  # what the scan must not find after: it finds it now
        assert world.holding(w.token) and world.search(w)
    before_index = index_files(world) if world.kind == "local" else set()
    world.view(gone[0], world.root / "view.html")  # the viewer's pages, where view puts them
    world.view(kept[0], world.root / "kept.html")
    asyncio.run(forget_beside_writers(world, target, kept, indexer=indexer))
    check_forgotten(world, gone, before_index)
    check_kept(world, kept, before, more=True)
    assert not (world.root / "view.html").exists() and (world.root / "kept.html").exists()
    [line] = [a for a in audit_lines(world) if a["action"] == "forget"]
    assert line["tenant"] == target.fields and line["who"] == "test"
    assert line["counts"]["dialog"] == 4 * len(gone)  # type: ignore[index]
    assert line["counts"]["outputs"] == 2 * len(gone)  # type: ignore[index]


@FEW
@given(
    count=st.integers(2, 5),
    victim=st.integers(0, 4),
    mode=st.sampled_from(["session", "agent", "user"]),
    seed=st.integers(0, 2**32),
)
def test_forget_leaves_no_byte_of_the_tenant_and_every_other_as_it_was(
    make_config: Callable[[], ContextConfig], count: int, victim: int, mode: str, seed: int
) -> None:
    scenario(make_config(), count, victim, mode, seed, indexer=False)


@FEW
@given(count=st.integers(2, 5), victim=st.integers(0, 4), seed=st.integers(0, 2**32))
def test_forget_beside_the_background_indexer(
    make_config: Callable[[], ContextConfig], count: int, victim: int, seed: int
) -> None:
    scenario(make_config(), count, victim, "session", seed, indexer=True)


@pytest.mark.slow
@MANY
@given(
    count=st.integers(2, 5),
    victim=st.integers(0, 4),
    mode=st.sampled_from(["session", "agent", "user"]),
    seed=st.integers(0, 2**32),
    indexer=st.booleans(),
)
def test_forget_many(
    make_config: Callable[[], ContextConfig],
    count: int,
    victim: int,
    mode: str,
    seed: int,
    indexer: bool,
) -> None:
    scenario(make_config(), count, victim, mode, seed, indexer=indexer)


# -- a worker killed mid-forget -------------------------------------------------------------

_WORKER = """
import signal, sys
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.stores._forget import ForgetTarget, forget_store

config = ContextConfig.model_validate_json(sys.argv[1])
target = ForgetTarget(**__import__("json").loads(sys.argv[2]))
stop = sys.argv[3]

def step(kind):
    if kind == stop:
        print("at", kind, flush=True)
        signal.pause()  # killed here

forget_store(config, target, who="worker", on_step=step)
print("done", flush=True)
"""
STEPS = {"local": ["outputs", "media", "usage", "dialog"], "postgres": ["files", "rows"]}


def kill_at(forker: Forker, config: ContextConfig, target: ForgetTarget, stop: str) -> None:
    """Run the forget in a worker process and SIGKILL it once it reports `stop` done. The
    worker is a child of the forker (forked after ``import agentscope``, which took a fresh
    interpreter 1.7 s on 1.x); it writes to a FIFO this end reads, as it wrote to a pipe."""
    fifo = Path(tempfile.mkdtemp(prefix="forget-kill-")) / "out"
    os.mkfifo(fifo)
    argv = ["-c", _WORKER, config.model_dump_json(), json.dumps(target.fields), stop]
    child = forker.start(argv, cwd=ROOT, env=dict(os.environ), stdout=fifo)
    with fifo.open(encoding="utf-8") as out:  # the child opens it first thing: no hang
        line = out.readline()
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert line.split() == ["at", stop], line


def test_a_forget_killed_midway_is_completed_by_the_next(
    make_config: Callable[[], ContextConfig], forker: Forker
) -> None:
    """Killed after its files, before the index (local) or before the rows (PostgreSQL)."""
    config = make_config()
    stop = {"local": "dialog", "postgres": "files"}[config.store.kind]
    killed_then_completed(forker, config, stop)


@pytest.mark.slow
def test_a_forget_killed_at_each_step_is_completed_by_the_next(
    make_config: Callable[[], ContextConfig], forker: Forker
) -> None:
    kind = make_config().store.kind
    for stop in STEPS[kind]:
        killed_then_completed(forker, make_config(), stop)


def killed_then_completed(forker: Forker, config: ContextConfig, stop: str) -> None:
    stops = STEPS[config.store.kind]
    step = stops.index(stop)
    whos = tenants(random.Random(step), 3)
    world = World(config, whos)
    asyncio.run(world.write_all())
    for w in whos:
        world.search(w)
    victim = whos[0]
    target = target_of(victim, "user")
    gone = [w for w in whos if target.owns(w.key, w.session)]
    kept = [w for w in whos if w not in gone]
    before = snapshot(world, kept)
    before_index = index_files(world) if world.kind == "local" else set()
    kill_at(forker, config, target, stop)
    report = forget_store(config, target, who="test")  # completes it
    done = step >= stops.index("dialog" if world.kind == "local" else "rows")
    assert report.counts["dialog"] == (0 if done else 4 * len(gone))
    check_forgotten(world, gone, before_index)
    check_kept(world, kept, before, more=False)


# -- the call itself -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({}, "at least one"),
        ({"user": ""}, "user"),
        ({"agent": ""}, "agent"),
        ({"session": ""}, "session"),
        ({"user": 3}, "user"),
        ({"agent": "a\x00"}, "agent"),
    ],
)
def test_a_bad_target_names_the_field(fields: dict[str, object], named: str) -> None:
    with pytest.raises(ContextUsageError, match=named):
        ForgetTarget(**fields)  # type: ignore[arg-type]


def test_a_dry_run_deletes_nothing_and_writes_no_audit_line(tmp_path: Path) -> None:
    config = ContextConfig(working_dir=tmp_path)
    whos = tenants(random.Random(7), 2)
    world = World(config, whos)
    asyncio.run(world.write_all())

    def files() -> dict[str, bytes]:  # (SQLite's -wal and -shm come with any reader)
        return {str(p): d for p, d in world.file_bytes() if not p.name.endswith(("-wal", "-shm"))}

    before = files()
    report = forget_store(config, target_of(whos[0], "session"), dry_run=True)
    assert report.counts["dialog"] == 4 and report.counts["outputs"] == 2
    assert report.counts["media"] == 1 and report.counts["steps"] == 1
    assert files() == before
    assert not (tmp_path / "audit.jsonl").exists()


def test_local_shared_memory_is_left_and_said(tmp_path: Path) -> None:
    """Local long-term memory names no tenant: a forget leaves it byte for byte and its
    report says so (docs/data.md)."""
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("- the user likes tea\n")
    (memory / "2026-12-01.md").write_text("- a note\n")
    report = forget_store(ContextConfig(working_dir=tmp_path), ForgetTarget(user="alice"))
    assert (memory / "MEMORY.md").read_text() == "- the user likes tea\n"
    assert (memory / "2026-12-01.md").read_text() == "- a note\n"
    assert report.counts["memory"] == 0 and any("memory/" in n for n in report.notes)


def test_retentions_tombstones_of_the_tenant_go_with_it(
    make_config: Callable[[], ContextConfig],
) -> None:
    """A tombstone names its record's owner (a saved output's tags, a day's owner tags, a
    row's agent and session): the forgotten tenant's go, the others' stay."""
    from agentscope_ctx.core._tenant import owner_tag
    from agentscope_ctx.stores._tombstones import read_local, write_local

    config = make_config()
    victim, other = tenants(random.Random(11), 2)
    world = World(config, [victim, other])
    asyncio.run(world.write_all())
    tags = {w.session: (owner_tag(w.key), owner_tag(w.session)) for w in (victim, other)}
    if world.kind == "local":
        outputs = world.root / "tool_result"
        for w in (victim, other):
            gone = outputs / f"{tags[w.session][0]}-{tags[w.session][1]}-{'0' * 32}.txt"
            write_local(gone, reason="retention", at=1.0, size=10)
        day = world.root / "dialog" / "2026-11-01.jsonl"
        write_local(day, reason="retention", at=1.0, owners=list(tags.values()))
    else:
        from agentscope_ctx.stores.postgres import PostgresEngine
        from agentscope_ctx.stores.postgres._tenant import transaction
        from agentscope_ctx.stores.postgres._tombstones import record_tombstones

        store = config.store
        assert store.dsn is not None
        engine = PostgresEngine(
            store.dsn, password_env=store.password_env, schema=store.schema_name
        )
        try:
            with transaction(engine, None) as conn:
                rows = [(f"pg-output:{w.session}", w.key, w.session, 10) for w in (victim, other)]
                record_tombstones(conn, store.schema_name, rows, at=1.0)
        finally:
            engine.close()
    report = forget_store(config, target_of(victim, "session"))
    assert report.counts["tombstones"] == (2 if world.kind == "local" else 1)
    assert world.holding(victim.session, audit=False) == []
    if world.kind == "local":
        left = sorted(p.name for p in (world.root / "tool_result").glob("*.deleted"))
        assert left == [f"{tags[other.session][0]}-{tags[other.session][1]}-{'0' * 32}.txt.deleted"]
        stone = read_local(world.root / "dialog" / "2026-11-01.jsonl")
        assert stone is not None and stone.owners == (tags[other.session],)
    else:
        assert [r for t, r in world.rows() if t == "tombstones" and other.session in r]


def test_vacuum_full_leaves_no_byte_in_the_databases_files(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """With ``--vacuum-full`` the tables are written anew: after a checkpoint, none of the
    forgotten tenant's bytes is in the database's files (its tables, indexes, TOAST, the
    statistics), where they were before. (The WAL is not scanned: docs/data.md.)"""
    server = request.getfixturevalue("pg_server")
    request.getfixturevalue("pg_password")
    config = fleet_config(tmp_path, server, f"t_{uuid.uuid4().hex[:12]}")
    victim, other = tenants(random.Random(5), 2)
    world = World(config, [victim, other])
    asyncio.run(world.write_all())
    world.search(victim)

    def files_holding(token: str) -> list[str]:
        import psycopg

        from tests.fleet.postgres_server import PASSWORD

        with psycopg.connect(server.dsn, password=PASSWORD, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            (db,) = conn.execute(
                "SELECT oid FROM pg_database WHERE datname = current_database()"
            ).fetchone()
        base = server.root / "data" / "base" / str(db)
        return sorted(
            p.name for p in base.iterdir() if p.is_file() and token.encode() in p.read_bytes()
        )

    assert files_holding(victim.token) and files_holding(other.token)
    forget_store(config, target_of(victim, "agent"), vacuum_full=True)
    assert files_holding(victim.token) == []
    assert files_holding(other.token)


@pytest.mark.parametrize("by", ["agent", "session"])
def test_fleet_memory_goes_with_its_agent_not_with_one_session(
    request: pytest.FixtureRequest, tmp_path: Path, by: str
) -> None:
    """Long-term memory on the fleet store is per agent key, shared by its sessions: forgetting
    the agent (or its user) removes its documents and their index rows; forgetting one session
    leaves them; another agent's stay."""
    from agentscope_ctx.stores.postgres import PostgresEngine
    from agentscope_ctx.stores.postgres._memory import PostgresMemoryDocs

    server = request.getfixturevalue("pg_server")
    request.getfixturevalue("pg_password")
    config = fleet_config(tmp_path, server, f"t_{uuid.uuid4().hex[:12]}")
    victim, other = tenants(random.Random(9), 2)
    world = World(config, [victim, other])
    asyncio.run(world.write_all())
    store = config.store
    assert store.dsn is not None
    engine = PostgresEngine(store.dsn, password_env=store.password_env, schema=store.schema_name)
    try:
        for w in (victim, other):
            PostgresMemoryDocs(engine, w.key).append(
                "MEMORY.md", lambda t, w=w: t + f"- {w.token} likes tea\n"
            )
    finally:
        engine.close()
    world.search(victim)  # (indexes the memory too)
    report = forget_store(config, target_of(victim, by))
    memory = [r for t, r in world.rows() if t == "memory_docs" or "pg-memory:" in r]
    if by == "agent":
        assert report.counts["memory"] == 1
        assert world.holding(victim.token) == []
    else:
        assert report.counts["memory"] == 0
        assert any(victim.token in r for r in memory)  # the agent's, kept
    assert any(other.token in r for r in memory)


def test_the_cli_forgets_on_the_fleet_store(
    request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``agentscope-ctx forget --config fleet.yaml --user U --json``: what it will delete and
    what it deleted, by kind; the audit table's row names the OS user."""
    from agentscope_ctx.cli import main
    from tests.fleet.pg_config import config_file

    server = request.getfixturevalue("pg_server")
    request.getfixturevalue("pg_password")
    config = fleet_config(tmp_path / "wd", server, f"t_{uuid.uuid4().hex[:12]}")
    whos = tenants(random.Random(4), 3)
    world = World(config, whos)
    asyncio.run(world.write_all())
    path = config_file(
        tmp_path / "fleet.yaml", tmp_path / "wd", config.store.model_dump(exclude_none=True)
    )
    victim = whos[0]
    gone = [w for w in whos if w.user == victim.user]
    assert main(["forget", "--config", str(path), "--user", str(victim.user), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["store"] == "postgres" and out["will_delete"] == out["deleted"]
    assert out["deleted"]["dialog"] == 4 * len(gone) and out["deleted"]["outputs"] == 2 * len(gone)
    assert all(world.holding(w.token) == [] for w in gone)
    [line] = audit_lines(world)
    assert str(line["who"]).startswith("cli:") and line["tenant"]["user"] == victim.user  # type: ignore[index]


def test_steps_records_carrying_the_agent_key_go_by_it(
    make_config: Callable[[], ContextConfig],
) -> None:
    """Two users' agents of one name in one session: a steps record that carries its agent
    key (``key``) is forgotten by it, the other user's stays."""
    config = make_config()
    steps = open_backend(config).steps
    assert steps is not None
    for user, token in (("alice", "tokalicesteps"), ("bob", "tokbobsteps")):
        steps.append({"agent": "coder", "key": f"{user}/coder", "session": "s1", "note": token})
    world = World(config, [])
    report = forget_store(config, ForgetTarget(user="alice"))
    assert report.counts["steps"] == 1
    assert world.holding("tokalicesteps") == [] and world.holding("tokbobsteps")


def test_a_role_that_does_not_own_the_schema_is_told_to_use_the_one_that_does(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A workers' role (granted the tables, owning nothing) cannot see the other tenants'
    rows nor vacuum: the forget says which role it needs, and deletes nothing."""
    import psycopg

    from agentscope_ctx.core._errors import PersistenceError
    from tests.fleet.postgres_server import PASSWORD

    server = request.getfixturevalue("pg_server")
    request.getfixturevalue("pg_password")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    config = fleet_config(tmp_path, server, schema)
    whos = tenants(random.Random(2), 2)
    asyncio.run(World(config, whos).write_all())
    role = f"w_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server.dsn, password=PASSWORD, autocommit=True) as conn:
        from psycopg import sql

        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(PASSWORD)
            )
        )
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        conn.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}"
        )
    worker = config.model_copy(
        update={
            "store": config.store.model_copy(
                update={"dsn": server.dsn.replace("user=postgres", f"user={role}")}
            )
        }
    )
    with pytest.raises(PersistenceError, match="the role that owns the schema"):
        forget_store(worker, target_of(whos[0], "agent"))
    assert World(config, whos).holding(whos[0].token)  # nothing deleted


def test_the_owners_a_busy_index_keeps_in_memory_are_forgotten_too(tmp_path: Path) -> None:
    """While its index is busy, a process keeps the owners of outputs it saved, to write at
    the next write: a forget through that index drops the forgotten ones (no row naming them
    comes back), and keeps the others'."""
    from agentscope_ctx.stores._search import SearchIndex

    config = ContextConfig(working_dir=tmp_path)
    victim, other = tenants(random.Random(6), 2)
    world = World(config, [victim, other])
    asyncio.run(world.write_all())
    index = SearchIndex(tmp_path)
    try:
        for w in (victim, other):
            index._keep(
                (w.refs[0].replace(str(tmp_path) + "/", ""), (w.key, w.session, None, None), None)
            )
        forget_store(config, target_of(victim, "session"), search=index)
        assert all(owner[:2] == (other.key, other.session) for _, owner, _ in index._kept.pending)
        index.catch_up()  # (writes what is still kept)
    finally:
        index.close()
    assert world.holding(victim.session, audit=False) == []
    assert any("index/" in place for place in world.holding(other.session))


def test_a_forget_leaves_no_connection_open(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Its engines (the store's, the audit table's) give their connections back: a service
    that forgets on request does not keep one more per forget (counted on the server, beside
    what other tests of the process may hold)."""
    import psycopg

    from tests.fleet.postgres_server import PASSWORD

    server = request.getfixturevalue("pg_server")
    request.getfixturevalue("pg_password")
    config = fleet_config(tmp_path, server, f"t_{uuid.uuid4().hex[:12]}")
    whos = tenants(random.Random(8), 2)
    asyncio.run(World(config, whos).write_all())

    def connections() -> int:
        with psycopg.connect(server.dsn, password=PASSWORD, autocommit=True) as conn:
            (n,) = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                "AND pid <> pg_backend_pid() AND datname = current_database()"
            ).fetchone()
        return int(n)

    before = connections()
    for w in whos:
        forget_store(config, target_of(w, "session"))
    assert connections() <= before
