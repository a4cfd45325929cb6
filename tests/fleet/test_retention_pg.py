"""Retention on the fleet store (issue 47, docs/data.md): each kind past its age deleted in
one maintenance transaction with its index rows, a tombstone row per output and owner's day
(a notice to one reads as deleted by retention, to its tenant only), the space vacuumed,
`gc` applying the config's section with one audit row."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from agentscope_ctx.cli import main
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.stores._retention import RetentionDays
from agentscope_ctx.stores.factory import open_backend, open_stores
from agentscope_ctx.stores.postgres._audit import PostgresAudit
from agentscope_ctx.stores.postgres._retention import pg_retention
from tests.fleet.pg_config import PgStore, config_file
from tests.support.lines import Msg

NOW = datetime(2026, 12, 6, 12, 0).timestamp()
OLD_DAY, NEW_DAY = "2026-11-01", "2026-12-05"


async def _world(config: ContextConfig) -> dict[str, str]:
    refs = {}
    for day, word in ((OLD_DAY, "quokka"), (NEW_DAY, "wombat")):
        for agent in ("a1", "a2"):
            stores = open_stores(config, agent=agent, session="s1")
            msg = Msg("user", f"the {word} report of {agent}", "user")
            msg.timestamp = f"{day} 10:00:00.000"
            await stores.dialog.append([msg])
            stores.close()
    backend = open_backend(config)
    for agent in ("a1", "a2"):
        stores = open_stores(config, agent=agent, session="s1")
        refs[f"{agent} old"] = stores.outputs.save(f"an old numbat output of {agent}\n")
        refs[f"{agent} new"] = stores.outputs.save(f"a fresh platypus output of {agent}\n")
        engine = stores.search.engine  # type: ignore[attr-defined]
        with engine.connection() as conn:
            conn.execute(
                f"UPDATE {engine.schema}.outputs SET used_at = %s WHERE id = %s",
                (NOW - 10 * 86_400, refs[f"{agent} old"].removeprefix("pg-output:")),
            )
            conn.execute(
                f"UPDATE {engine.schema}.outputs SET used_at = %s WHERE id = %s",
                (NOW - 3600, refs[f"{agent} new"].removeprefix("pg-output:")),
            )
        stores.search.catch_up(seconds=None)
        stores.close()
        assert backend.steps is not None
        backend.steps.append({"at": f"{OLD_DAY}T10:00:00+00:00", "agent": agent, "session": "s1"})
    assert backend.memory is not None
    memory = backend.memory("a1")
    for name in (f"{OLD_DAY}.md", f"{NEW_DAY}.md", "MEMORY.md"):
        memory.update(name, lambda _, name=name: f"- a note in {name}\n")
    engine = backend.search.engine  # type: ignore[attr-defined]
    with engine.connection() as conn:  # the steps of the old day were saved then
        conn.execute(
            f"UPDATE {engine.schema}.steps SET saved_at = to_timestamp(%s)", (NOW - 40 * 86_400,)
        )
    backend.close()
    return refs


def _hits(config: ContextConfig, word: str) -> list[str]:
    stores = open_stores(config)
    try:
        return [str(h.path) for h in stores.search.search(word).hits]
    finally:
        stores.close()


async def test_each_kind_past_its_age_goes_and_a_notice_says_so(
    tmp_path: Path, pg_store: PgStore
) -> None:
    config = pg_store.config(tmp_path / "w")
    refs = await _world(config)
    assert _hits(config, "quokka") and _hits(config, "numbat")
    backend = open_backend(config)
    engine = backend.search.engine  # type: ignore[attr-defined]
    days = RetentionDays(dialog=30, outputs=7, memory=30, steps=30)
    report = pg_retention(engine, days, now=NOW, referenced=[refs["a1 old"]])
    assert report.counts == {"dialog": 2, "outputs": 1, "memory": 1, "steps": 2}, report
    assert report.outputs == [refs["a2 old"]] and report.bytes > 0
    assert not _hits(config, "quokka")
    assert _hits(config, "numbat") == [refs["a1 old"]]
    assert len(_hits(config, "wombat")) == 2 and len(_hits(config, "platypus")) == 2
    with engine.connection() as conn, conn.transaction():
        conn.execute("SELECT set_config('agentscope_ctx.scope', 'all', true)")
        days_left = conn.execute(
            f"SELECT DISTINCT day::text FROM {engine.schema}.dialog"
        ).fetchall()
        names = conn.execute(f"SELECT name FROM {engine.schema}.memory_docs ORDER BY 1").fetchall()
    assert days_left == [(NEW_DAY,)]
    assert [n for (n,) in names] == [f"{NEW_DAY}.md", "MEMORY.md"]

    def read(ref: str, tenant: Tenant | None) -> str:
        source = backend.source(ref, tenant)
        assert source is not None
        from agentscope_ctx.core.ladder._tool_policy import ToolResultPolicy
        from agentscope_ctx.recall._read_file import FileReader, ReadFileError

        reader = FileReader(
            [tmp_path], ToolResultPolicy(config.tool_result), sources=backend.source
        )
        reader = reader if tenant is None else reader.scoped(tenant)
        try:
            return reader.read_now(ref)
        except ReadFileError as exc:
            return str(exc)

    assert "was deleted by retention on" in read(refs["a2 old"], Tenant("a2", "s1"))
    assert "does not exist" in read(refs["a2 old"], Tenant("a1", "s1"))  # not its tenant's
    assert "was deleted by retention on" in read(f"pg-dialog:{OLD_DAY}", Tenant("a1", "s1"))
    assert "does not exist" in read(f"pg-dialog:{OLD_DAY}", Tenant("a3", "s1"))
    assert "a fresh platypus output of a2" in read(refs["a2 new"], Tenant("a2", "s1"))
    backend.close()


async def test_gc_on_the_fleet_store_writes_an_audit_row(
    tmp_path: Path, pg_store: PgStore, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_file(tmp_path / "fleet.yaml", tmp_path / "w", pg_store.fields())
    data = path.read_text() + "retention: {dialog_days: 30, steps_days: 30}\n"
    path.write_text(data)
    config = ContextConfig.from_yaml(path)
    await _world(config)
    assert main(["gc", "--config", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["removed"] == {"dialog": 2, "outputs": 2, "memory": 0, "steps": 2}
    backend = open_backend(config)
    [line] = PostgresAudit(backend.search.engine).read()  # type: ignore[attr-defined]
    backend.close()
    assert line["action"] == "retention" and line["store"] == "postgres"
    assert line["counts"] == out["removed"] and line["bytes"] == out["bytes"] > 0
    assert "quokka" not in json.dumps(line) and pg_store.password not in json.dumps(line)
    assert not (tmp_path / "w").exists()  # nothing written to a working dir


async def test_the_background_retention_of_the_fleet_store(
    tmp_path: Path, pg_store: PgStore
) -> None:
    """What the hourly task runs after the outputs' cleanup (`Backend.retention`)."""
    config = pg_store.config(tmp_path / "w", retention={"dialog_days": 30, "steps_days": 30})
    await _world(config)
    backend = open_backend(config)
    try:
        assert backend.retention is not None
        report = backend.retention(NOW)
        assert report.counts == {"dialog": 2, "outputs": 0, "memory": 0, "steps": 2}
        assert not _hits(config, "quokka") and _hits(config, "wombat")
    finally:
        backend.close()
