"""A store shared by a few tenants, for the forget tests (`test_forget.py`): each tenant
writes dialog records, saved outputs, steps, a usage record and a media file holding its own
random token; `scan` greps every file under the working dir and every row of every table of
the schema for the tokens, directly (not through the stores' API)."""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentscope_ctx.core._tenant import Tenant, agent_key, owner_tag
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.stores._steps_file import StepFile
from agentscope_ctx.stores._usage_file import write_usage
from agentscope_ctx.stores.factory import Stores, open_backend, open_stores
from tests.support.lines import Msg

USERS = ("alice", "bob")


@dataclass
class Who:
    """One tenant: its parts and the token its data holds."""

    user: str | None
    agent: str
    session: str
    token: str
    """In its content only (never in a name): no byte of it may remain anywhere."""
    refs: list[str] = field(default_factory=list)
    outputs: dict[str, bytes] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return agent_key(self.agent, self.user)

    @property
    def tenant(self) -> Tenant:
        return Tenant(self.key, self.session)


def tenants(rng: random.Random, count: int) -> list[Who]:
    """`count` tenants: users and agents shared between some, sessions their own."""
    out = []
    for k in range(count):
        user = USERS[k % 2] if k < 4 else None
        token = "tok" + "".join(rng.choice("bcdfghjkmnpqrstvwxz") for _ in range(14))
        out.append(Who(user, f"agent{k % 3}", f"sess-{k}-{rng.randrange(10**6)}", token))
    return out


def message(who: Who, n: int) -> Msg:
    msg = Msg("user", f"{who.token} says line {n} about {who.token}x{n}", "user")
    msg.id = f"{who.session}-m{n}"
    msg.timestamp = f"2026-12-0{1 + n % 2} 10:00:0{n % 10}.000"
    return msg


def output(who: Who, n: int) -> bytes:
    body = "".join(f"row {i} of {who.token} output {n}\n" for i in range(40))
    return body.encode()


class World:
    """The tenants of one store (`kind`), and what each wrote."""

    def __init__(self, config: ContextConfig, whos: list[Who]) -> None:
        self.config = config
        self.root = Path(config.working_dir).resolve()
        self.whos = whos
        self.kind = config.store.kind

    def stores(self, who: Who) -> Stores:
        return open_stores(self.config, agent=who.key, session=who.session)

    async def write(self, who: Who, first: int, count: int) -> None:
        """`count` records and an output per two records, from record `first` on."""
        stores = self.stores(who)
        try:
            for n in range(first, first + count):
                await stores.dialog.append([message(who, n)])
                if n % 2 == 0:
                    data = output(who, n)
                    ref = await asyncio.to_thread(stores.outputs.save, data)
                    who.refs.append(str(ref))
                    who.outputs[str(ref)] = data
            backend = open_backend(self.config)
            try:
                assert backend.steps is not None
                backend.steps.append(
                    {"agent": who.agent, "session": who.session, "run": first, "note": who.token}
                )
            finally:
                backend.close()
            steps = backend.steps
            if isinstance(steps, StepFile) or self.kind == "postgres":
                write_usage(self.root, who.agent, {"note": who.token}, session=who.session)
            media = self.root / "media" / f"{owner_tag(who.key)}-{owner_tag(who.session)}"
            media.mkdir(parents=True, exist_ok=True)
            (media / f"img{first}.txt").write_text(f"image of {who.token}")
        finally:
            stores.close()

    async def write_all(self, count: int = 4, first: int = 0) -> None:
        """Every tenant writes at once (the store made first: workers making one schema at
        once may collide, which is the engine's business, not this test's)."""
        stores = self.stores(self.whos[0])
        try:
            stores.dialog.days()
        finally:
            stores.close()
        await asyncio.gather(*(self.write(w, first, count) for w in self.whos))

    def search(self, who: Who) -> list[tuple[str, int, str]]:
        """What `who`'s own search finds of its token (as hits: source, line, text)."""
        stores = self.stores(who)
        try:
            result = stores.search.search(
                who.token, Filters(tenant=who.tenant), limit=50, catch_up_seconds=None
            )
            return sorted((str(h.path), h.start_line, repr(h.lines)) for h in result.hits)
        finally:
            stores.close()

    def reads(self, who: Who) -> dict[str, bytes | None]:
        """Each of `who`'s outputs as its store reads it (`None`: no such output)."""
        stores = self.stores(who)
        try:
            got: dict[str, bytes | None] = {}
            for ref in who.refs:
                size = stores.outputs.size(ref)
                got[ref] = None if size is None else stores.outputs.read_range(ref, 0, size)
            return got
        finally:
            stores.close()

    def read_file(self, who: Who) -> list[str]:
        """What `who`'s own `read_file` shows of each of its outputs and of every dialog day."""
        from agentscope_ctx.core.ladder._tool_policy import ToolResultPolicy
        from agentscope_ctx.recall._read_file import FileReader, ReadFileError

        backend = open_backend(self.config)
        try:
            reader = FileReader.on_store(
                backend,
                [self.root],
                ToolResultPolicy(self.config.tool_result),
                working_dir=self.root,
            ).scoped(who.tenant)
            days = ["2026-12-01", "2026-12-02"]
            refs = who.refs + [
                f"pg-dialog:{d}"
                if self.kind == "postgres"
                else str(self.root / "dialog" / f"{d}.jsonl")
                for d in days
            ]
            shown = []
            for ref in refs:
                try:
                    shown.append(reader.read_now(ref))
                except ReadFileError as exc:  # as the tool answers it
                    shown.append(f"Error: {exc}")
            return shown
        finally:
            backend.close()

    def cli(self, tmp: Path, command: str, *args: str) -> str:
        """What ``agentscope-ctx COMMAND`` prints of the store (the working dir, or a config
        naming the fleet store); it must succeed."""
        import contextlib
        import io

        import yaml

        from agentscope_ctx.cli import main

        argv = [command, str(self.root), *args]
        if self.kind == "postgres":
            config = tmp / "cli.yaml"
            store = self.config.store.model_dump(exclude_none=True)
            config.write_text(yaml.safe_dump({"working_dir": str(self.root), "store": store}))
            argv = [command, "--config", str(config), *args]
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(argv)
        assert code == 0, out.getvalue()
        return out.getvalue()

    def inspect(self, tmp: Path) -> str:
        """What ``agentscope-ctx inspect --json`` prints of the store."""
        return self.cli(tmp, "inspect", "--json")

    def view(self, who: Who, page: Path) -> None:
        """``agentscope-ctx view`` of `who`'s session, written to `page`."""
        user = [] if who.user is None else ["--user", who.user]
        self.cli(page.parent, "view", "--session", who.session, *user, "-o", str(page))

    def dialog(self, who: Who) -> list[str]:
        stores = self.stores(who)
        try:
            msgs, _ = stores.dialog.read(session=who.session)
            return [str(m.content) for m in msgs if who.token in str(m.content)]
        finally:
            stores.close()

    # -- the scans -------------------------------------------------------------------------

    def file_bytes(self, *, audit: bool = True) -> list[tuple[Path, bytes]]:
        """Every regular file under the working dir (the index, usage/, media/ included)."""
        out = []
        for folder, _, names in os.walk(self.root):
            for name in names:
                path = Path(folder) / name
                if path.is_symlink() or not path.is_file():
                    continue
                if not audit and name == "audit.jsonl":
                    continue
                out.append((path, path.read_bytes()))
        return out

    def rows(self) -> list[tuple[str, str]]:
        """Every row of every table of the schema, as text (in the maintenance scope)."""
        if self.kind != "postgres":
            return []
        from agentscope_ctx.stores.postgres import PostgresEngine
        from agentscope_ctx.stores.postgres._tenant import transaction

        store = self.config.store
        assert store.dsn is not None
        engine = PostgresEngine(
            store.dsn, password_env=store.password_env, schema=store.schema_name
        )
        try:
            with transaction(engine, None) as conn:
                tables = [
                    t
                    for (t,) in conn.execute(
                        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                        (store.schema_name,),
                    )
                ]
                out: list[tuple[str, str]] = []
                for table in tables:
                    for (row,) in conn.execute(
                        f"SELECT t::text FROM {store.schema_name}.{table} AS t"
                    ):
                        out.append((table, str(row)))
                    if table == "output_chunks":  # bytea shows as hex: the bytes themselves
                        for (data,) in conn.execute(
                            f"SELECT data FROM {store.schema_name}.output_chunks"
                        ):
                            out.append((table, bytes(data).decode("utf-8", "replace")))
            return out
        finally:
            engine.close()

    def holding(self, text: str, *, audit: bool = True) -> list[str]:
        """Where `text` is found: files (relative) and tables."""
        needle = text.encode()
        places = [
            str(p.relative_to(self.root))
            for p, data in self.file_bytes(audit=audit)
            if needle in data
        ]
        places += [
            f"table {t}" for t, row in self.rows() if text in row and (audit or t != "audit")
        ]
        return sorted(set(places))


def run(coro: Any) -> Any:
    return asyncio.run(coro)
