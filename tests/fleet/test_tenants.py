"""The tenant boundary (issue 28 item 1, DESIGN.md §15, docs/tenants.md) on both stores: the
local working dir shared by sessions, and PostgreSQL run as an ordinary role (a superuser would
bypass row-level security), on a private server (`conftest`).

Each side is a real manager's agent: its records are written by the stores its pipeline uses
(`Services._recall_for`), and read by its own `read_file` and `search_history`, and by the CLI
with ``--agent``/``--session``."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from agentscope_ctx import ContextManager
from agentscope_ctx.cli import main as cli_main
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.config._config import ContextConfig
from tests.fleet.postgres_server import PORT, PostgresServer
from tests.support.lines import Msg, text_of

KINDS = ["local", "postgres"]
APP_PASSWORD = "app-Pw'd\\x"
APP_ENV = "AGENTSCOPE_CTX_TEST_APP_PGPASSWORD"
DAY = "2026-12-02"


@pytest.fixture
def app_role(pg_server: PostgresServer, pg_password: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A login role of its own for the test: no superuser, no BYPASSRLS, may create schemas."""
    import psycopg

    role = f"app_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server.dsn, password=pg_password, autocommit=True) as conn:
        conn.execute(
            f"CREATE ROLE {role} LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD "
            + "'" + APP_PASSWORD.replace("'", "''") + "'"
        )  # fmt: skip
        conn.execute(f"GRANT CREATE ON DATABASE postgres TO {role}")
    monkeypatch.setenv(APP_ENV, APP_PASSWORD)
    return role


def _store(kind: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    if kind == "local":
        return {"kind": "local"}
    server: PostgresServer = request.getfixturevalue("pg_server")
    role = request.getfixturevalue("app_role")
    return {
        "kind": "postgres",
        "dsn": f"host={server.root} port={PORT} user={role} dbname=postgres",
        "password_env": APP_ENV,
        "schema_name": f"t_{uuid.uuid4().hex[:12]}",
    }


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The ``store`` section of one kind (PostgreSQL: as the test's ordinary role)."""
    return _store(request.param, request)


class Side:
    """One agent of one tenant: a manager (its session, user, scope) and the agent's stores,
    `read_file` and `search_history`."""

    def __init__(
        self,
        working_dir: Path,
        store: dict[str, Any],
        agent: str,
        session: str | None,
        user: str | None = None,
        scope: str = "session",
    ) -> None:
        recall = {"session": session, "user": user, "scope": scope}
        self.config = ContextConfig(working_dir=working_dir, store=store, recall=recall)
        self.manager = ContextManager(self.config)
        self.agent = agent
        self.tenant = self.manager.tenant_of(agent)
        self.recall, self.outputs, self.dialog = self.manager._recall_for(agent)
        self.reader = self.manager.reader_for(agent)

    async def write(self, text: str) -> list[str]:
        """A user message and a saved output holding `text`; the output's ref."""
        msg = Msg("user", f"my password is {text}", "user")
        msg.timestamp = f"{DAY} 17:01:49.123"
        await self.dialog.append([msg])
        ref = os.fspath(self.outputs.save(f"line one\nthe output of {text}\n"))
        self.manager.search_index.catch_up(seconds=None)
        return [ref]

    async def read(self, ref: str) -> str:
        return text_of(await self.reader.read_file(ref))

    async def search(self, query: str, role: str | None = None, since: str | None = None) -> str:
        assert self.recall is not None
        answer = await self.recall.search_history(query, role=role, since=since, limit=20)
        return text_of(answer)

    def day_refs(self) -> list[str]:
        """How this side names the day of the dialog it wrote on."""
        if self.config.store.kind == "postgres":
            return [f"pg-dialog:{DAY}", f" pg-dialog:{DAY}\n"]
        absolute = Path(self.config.working_dir).resolve() / "dialog" / f"{DAY}.jsonl"
        return [str(absolute), f"dialog/{DAY}.jsonl"]

    async def close(self) -> None:
        await self.manager.close()


def _missing(ref: str) -> str:
    """A ref of the same form as `ref` that names nothing."""
    if "pg-output:" in ref:
        return ref.replace(ref.strip()[-32:], "0" * 32)
    if "dialog" in ref:
        return ref.replace(DAY, "1999-01-01")
    name = Path(ref).name
    return ref.replace(name, name[:-36] + "0" * 32 + ".txt")


def _cli(side: Side, tmp: Path, *args: str) -> str:
    config = tmp / f"cli-{uuid.uuid4().hex[:6]}.yaml"
    data = {"working_dir": str(side.config.working_dir), "store": side.config.store.model_dump()}
    config.write_text(yaml.safe_dump(data))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            cli_main(["search", "--config", str(config), *args])
        except SystemExit:
            pass
    return out.getvalue()


_name = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=12,
)


@pytest.fixture
def sides(tmp_path: Path, store: dict[str, Any]) -> Iterator[list[Side]]:
    made: list[Side] = []
    yield made
    for side in made:
        asyncio.run(side.close())


@settings(
    max_examples=12,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    names=st.tuples(_name, _name | st.none(), _name | st.none(), _name, _name | st.none()),
    same_agent=st.booleans(),
    b_user=_name | st.none(),
    b_scope=st.sampled_from(["session", "agent"]),
    b_writes=st.booleans(),
    query=_name,
    role=st.sampled_from([None, "user", "tool", "assistant"]),
    since=st.sampled_from([None, DAY, "2026-12-01 09:00"]),
)
@example(  # a session of no id is the session "" (on the CLI: --session=)
    names=("0", "0", None, "0", None),
    same_agent=False, b_user=None, b_scope="session", b_writes=False, query="0", role=None,
    since=None,
)  # fmt: skip
@example(  # the findings: the same agent name in another session; another user's same agent
    names=("assistant", "s-alice", None, "assistant", "s-bob"),
    same_agent=True, b_user=None, b_scope="session", b_writes=False, query="password", role=None, since=None,
)  # fmt: skip
@example(
    names=("assistant", "s1", "alice", "assistant", "s1"),
    same_agent=True, b_user="bob", b_scope="agent", b_writes=True, query="my", role="user", since=DAY,
)  # fmt: skip
@example(
    names=("-a/b%2F", "../x", "u/v", "a\nb 'x'", "--agent"),
    same_agent=False, b_user="u%2Fv", b_scope="session", b_writes=True, query="*", role="tool", since=None,
)  # fmt: skip
def test_a_tenant_never_reads_another_tenants_bytes(
    tmp_path: Path,
    store: dict[str, Any],
    sides: list[Side],
    names: tuple[str, str | None, str | None, str, str | None],
    same_agent: bool,
    b_user: str | None,
    b_scope: str,
    b_writes: bool,
    query: str,
    role: str | None,
    since: str | None,
) -> None:
    a_agent, a_session, a_user, b_agent, b_session = names
    b_agent = a_agent if same_agent else b_agent
    a_tenant = Tenant.of(a_agent, a_session, user=a_user)
    b_tenant = Tenant.of(b_agent, b_session, user=b_user, scope=b_scope)  # type: ignore[arg-type]
    assume(not b_tenant.sees(a_tenant.agent, a_tenant.session))
    working_dir = tmp_path / uuid.uuid4().hex[:8]
    if store["kind"] == "postgres":
        store = {**store, "schema_name": f"t_{uuid.uuid4().hex[:12]}"}
    a = Side(working_dir, store, a_agent, a_session, a_user)
    b = Side(working_dir, store, b_agent, b_session, b_user, b_scope)
    sides += [a, b]
    secret, own = f"zq{uuid.uuid4().hex[:10]}", f"zk{uuid.uuid4().hex[:10]}"

    async def run() -> None:
        refs = await a.write(secret)
        if b_writes:
            await b.write(own)
        # what A itself reads back (the test can see a leak: the bytes are there)
        assert secret in await a.read(refs[0])
        assert secret in await a.read(a.day_refs()[0])
        assert secret in await a.search(secret)
        # B: every ref of A's reads exactly as a ref that names nothing
        for ref in [*refs, f" {refs[0]} ", *b.day_refs()]:
            answer = await b.read(ref)
            assert secret not in answer
            if "dialog" not in ref or not b_writes:
                missing = _missing(ref)
                other = await b.read(missing)  # it names its ref, as written or stripped
                assert answer == other.replace(missing, ref).replace(missing.strip(), ref.strip())
            else:
                assert own in answer  # its own records of the same day
        for words in (secret, f'"{secret}"', secret[:5] + "*", "password", query):
            answer = (await b.search(words, role, since)).replace(words, "")  # not its echo
            assert secret not in answer
        if b_writes:
            assert own in await b.search(own)
        args = [f"--agent={b_agent}"]
        args += [f"--session={b_session or ''}"] if b_scope == "session" else []
        args += [] if b_user is None else [f"--user={b_user}"]
        for words in (secret, "password"):
            out = _cli(b, tmp_path, *args, *(["--"] if words.startswith("-") else []), words)
            assert secret not in out.replace(words, "")
            assert "Traceback" not in out

    asyncio.run(run())


def test_gc_for_one_tenant_deletes_only_its_expired_outputs(
    tmp_path: Path, store: dict[str, Any], sides: list[Side]
) -> None:
    """``agentscope-ctx gc --agent --session``: that tenant's expired outputs only."""
    a = Side(tmp_path / "w", store, "assistant", "s-alice")
    b = Side(tmp_path / "w", store, "assistant", "s-bob")
    sides += [a, b]
    refs = [os.fspath(side.outputs.save(f"output of {side.agent}\n")) for side in (a, b)]
    config = tmp_path / "gc.yaml"
    data = {"working_dir": str(a.config.working_dir), "store": a.config.store.model_dump()}
    config.write_text(yaml.safe_dump(data))
    later = ["--retention-days", "0.000001"]
    import time

    time.sleep(0.2)
    args = ["gc", "--config", str(config), *later, "--agent=assistant", "--session=s-alice"]
    assert cli_main(args) == 0
    assert a.manager.store.size(refs[0]) is None
    assert b.manager.store.size(refs[1]) is not None
