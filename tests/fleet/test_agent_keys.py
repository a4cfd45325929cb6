"""Agent keys of version 2 (issue 46 item 2, `core._tenant`) on both stores: an agent without
a user whose name reads as ``user/agent`` is not that user's agent, and a store written with
keys of version 1 keeps every owner's records, outputs and memory when a worker of version 2
opens it (local: `stores._keys_local`; PostgreSQL: schema version 8)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentscope_ctx.stores._keys_local as keys_local
from agentscope_ctx.core._tenant import agent_key, agent_name, owner_tag, upgraded_key
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.stores._dialog_record import decode_owned
from agentscope_ctx.stores.factory import open_backend, open_stores
from tests.fleet.test_tenants import DAY, KINDS, Side, _store
from tests.fleet.test_tenants import app_role as app_role  # (the fixture `_store` asks for)
from tests.support.lines import Msg


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The ``store`` section of one kind (PostgreSQL: as an ordinary role of the test's)."""
    return _store(request.param, request)


@pytest.fixture
def sides() -> Iterator[list[Side]]:
    made: list[Side] = []
    yield made
    for side in made:
        asyncio.run(side.close())


_part = st.text(st.sampled_from("a/%25F"), max_size=6)


def _v1_key(agent: str, user: str | None) -> str:
    """The key version 1 wrote (`agent_key` before: the name of an agent without a user as is)."""
    if user is None:
        return agent
    return f"{user.replace('%', '%25').replace('/', '%2F')}/{agent}"


@given(a=st.tuples(_part, _part | st.none()), b=st.tuples(_part, _part | st.none()))
def test_distinct_owners_have_distinct_keys(
    a: tuple[str, str | None], b: tuple[str, str | None]
) -> None:
    assert (agent_key(*a) == agent_key(*b)) == (a == b)
    assert agent_name(agent_key(*a)) == a[0]
    # a key of version 1 that was not shared by two owners is its owner's key of version 2
    if a[1] is not None or "/" not in a[0]:
        assert upgraded_key(_v1_key(*a)) == agent_key(*a)


async def _wrote(side: Side, text: str) -> str:
    return (await side.write(text))[0]


def test_an_agent_without_a_user_named_user_slash_agent_is_not_that_users_agent(
    tmp_path: Path, store: dict[str, Any], sides: list[Side]
) -> None:
    """The finding: ``alice/assistant`` without a user had alice's ``assistant``'s key; with
    ``scope: agent`` it read her outputs and searched her dialog (no session id needed)."""
    alice = Side(tmp_path / "wd", store, "assistant", "s1", "alice")
    other = Side(tmp_path / "wd", store, "alice/assistant", None, None, "agent")
    sides += [alice, other]
    assert alice.tenant.agent != other.tenant.agent

    async def run() -> None:
        secret, own = f"zq{uuid.uuid4().hex[:10]}", f"zk{uuid.uuid4().hex[:10]}"
        ref = await _wrote(alice, secret)
        theirs = await _wrote(other, own)
        assert secret in await alice.read(ref) and own in await other.read(theirs)
        for reader, ref_, word in ((other, ref, secret), (alice, theirs, own)):
            assert word not in await reader.read(ref_)
            assert word not in (await reader.search(word)).replace(word, "")
        for day in other.day_refs():
            assert secret not in await other.read(day)

    asyncio.run(run())


OWNERS: list[tuple[str, str | None]] = [
    ("assistant", "alice"),  # alice/assistant: kept
    ("100%", None),  # 100% -> 100%25
    ("100%25", None),  # 100%25 -> 100%2525 (100%'s new key was this one's old key)
    ("50%/x", None),  # 50%/x (no user could have written it) -> 50%25%2Fx
    ("c", "a/b"),  # a%2Fb/c: kept
    ("plain", None),  # kept
]


def _old_store(config: ContextConfig) -> dict[tuple[str, str | None], tuple[str, str]]:
    """A store written with keys of version 1, as version 1 wrote them: each owner's dialog
    record and saved output (and, on PostgreSQL, its long-term memory) hold a secret word."""
    written = {}
    backend = open_backend(config)
    try:
        for agent, user in OWNERS:
            secret = f"zq{uuid.uuid4().hex[:10]}"
            stores = open_stores(config, agent=_v1_key(agent, user), session="s1")
            msg = Msg("user", f"my password is {secret}", "user")
            msg.timestamp = f"{DAY} 17:01:49.123"
            assert asyncio.run(stores.dialog.append([msg])) == 1
            ref = os.fspath(stores.outputs.save(f"line one\nthe output of {secret}\n"))
            stores.search.catch_up(seconds=None)
            stores.close()
            if backend.memory is not None:
                backend.memory(_v1_key(agent, user)).append("MEMORY.md", lambda t, s=secret: t + s)
            written[(agent, user)] = (secret, ref)
    finally:
        backend.close()
    return written


def _as_version_1(config: ContextConfig) -> None:
    """The store as version 1 left it: no format record (local), schema version 7."""
    if config.store.kind == "local":
        (Path(config.working_dir) / "dialog" / keys_local.FORMAT_FILE).unlink()
        keys_local._DONE.clear()
        return
    stores = open_stores(config, agent="x")
    try:
        with stores.outputs.engine.connection() as conn:  # type: ignore[attr-defined]
            s = config.store.schema_name
            conn.execute(f"DELETE FROM {s}.schema_version WHERE version > 7")
            conn.execute(f"INSERT INTO {s}.schema_version (version) VALUES (7)")
    finally:
        stores.close()


def _at_once(work: Callable[[], object], workers: int = 4) -> None:
    """`work` in `workers` threads started together; their exceptions raised."""
    go, errors = threading.Barrier(workers), []

    def one() -> None:
        go.wait()
        try:
            work()
        except BaseException as exc:  # (raised below, in the test's thread)
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def test_a_store_of_version_1_keys_keeps_every_owner(
    tmp_path: Path, store: dict[str, Any], sides: list[Side]
) -> None:
    config = ContextConfig(working_dir=tmp_path / "wd", store=store)
    written = _old_store(config)
    _as_version_1(config)
    if config.store.kind == "local":  # several workers of version 2 start at once
        _at_once(lambda: keys_local.migrate_keys(Path(config.working_dir).resolve()))
    else:
        _at_once(lambda: open_backend(config).close())
    readers = {owner: Side(tmp_path / "wd", store, owner[0], "s1", owner[1]) for owner in OWNERS}
    readers[("alice/assistant", None)] = Side(tmp_path / "wd", store, "alice/assistant", "s1")
    sides += readers.values()
    next(iter(readers.values())).manager.search_index.catch_up(seconds=None)

    def ref_now(owner: tuple[str, str | None], ref: str) -> str:
        """An output's ref after the migration (a local one is named by its new key's tag)."""
        return ref.replace(owner_tag(_v1_key(*owner)), owner_tag(agent_key(*owner)))

    async def run() -> None:
        for owner, reader in readers.items():
            for (agent, user), (secret, ref) in written.items():
                mine = (agent, user) == owner
                answer = await reader.read(ref_now((agent, user), ref))
                assert (secret in answer) == mine, (owner, agent, user, answer)
                found = (await reader.search(secret)).replace(secret, "", 1)
                assert (secret in found) == mine, (owner, agent, user, found)
                day = await reader.read(reader.day_refs()[0])
                assert (secret in day) == mine, (owner, agent, user, day)
                if config.store.kind == "postgres":
                    memory = reader.manager.backend.memory
                    assert memory is not None
                    note = memory(reader.tenant.agent).read("MEMORY.md")
                    assert (secret in note) == mine, (owner, agent, user, note)

    asyncio.run(run())
    if config.store.kind == "local":  # the working dir says so: no second migration
        record = Path(config.working_dir) / "dialog" / keys_local.FORMAT_FILE
        assert record.read_text() == '{"keys": 2}'
        assert not list((Path(config.working_dir) / "dialog").glob(".keys-migration*"))


@pytest.mark.parametrize("store", ["local"], indirect=True)
@pytest.mark.parametrize("killed_at", [1, 2, 3])
def test_a_local_migration_killed_midway_finishes_where_it_stopped(
    tmp_path: Path, store: dict[str, Any], monkeypatch: pytest.MonkeyPatch, killed_at: int
) -> None:
    """Killed before the files of its first, second or last key (the dialog of that key
    already rewritten), the next worker's migration finishes it: every owner keeps its own."""
    config = ContextConfig(working_dir=tmp_path / "wd", store=store)
    written = _old_store(config)
    _as_version_1(config)
    root = Path(config.working_dir).resolve()
    calls = []
    real = keys_local._named

    def killed(*args: Any) -> None:
        calls.append(args)
        if len(calls) == killed_at:
            raise KeyboardInterrupt
        real(*args)

    monkeypatch.setattr(keys_local, "_named", killed)
    with pytest.raises(KeyboardInterrupt):
        keys_local.migrate_keys(root)
    monkeypatch.setattr(keys_local, "_named", real)
    keys_local.migrate_keys(root)
    owners = set()
    for day in (root / "dialog").glob("*.jsonl"):
        owners |= {decode_owned(line)[1] for line in day.read_bytes().splitlines()}
    assert owners == {agent_key(*owner) for owner in OWNERS}
    for (agent, user), (_, ref) in written.items():
        key = agent_key(agent, user)
        name = Path(ref).name.replace(owner_tag(_v1_key(agent, user)), owner_tag(key))
        assert (root / "tool_result" / name).is_file(), (agent, user)
        stores = open_stores(config, agent=key, session="s1")
        assert stores.outputs.holds(str(root / "tool_result" / name), "line one\n")
        stores.close()


@pytest.mark.parametrize("keys", [None, 2])
def test_an_archive_exported_before_names_its_owners_by_their_keys_of_version_2(
    keys: int | None,
) -> None:
    from agentscope_ctx.stores._archive import ARCHIVE_VERSION, FORMAT, output_line, parse_archive

    header = {"v": ARCHIVE_VERSION, "kind": "session", "format": FORMAT, "session": "s1"}
    if keys is not None:
        header["keys"] = keys
    record = {"v": 1, "msg": {"id": "m1"}, "agent": "100%", "session": "s1"}
    lines = [
        header,
        output_line("tool_result/x.txt", "50%/x", "s1", b"data\n"),
        {"v": ARCHIVE_VERSION, "kind": "dialog", "record": record},
        {"v": ARCHIVE_VERSION, "kind": "end", "counts": {}, "bytes": 5},
    ]
    archive = parse_archive("\n".join(json.dumps(line) for line in lines))
    owners = [archive.outputs[0].agent, archive.dialog[0]["agent"]]
    assert owners == (["50%/x", "100%"] if keys else ["50%25%2Fx", "100%25"])
