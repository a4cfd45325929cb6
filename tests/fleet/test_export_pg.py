"""Export and import across stores (issue 47): a session of a real agent on the fleet store
exported from PostgreSQL and imported into a local working dir, and back into another
PostgreSQL schema: every output byte for byte, its notices pointing at the restored outputs,
read by `read_file` and found by search; one audit row or line each. At its 3,000-token
budget the compactions' summaries are shown cut, their whole text saved beside the outputs:
each store tells them apart (`core.search._saved_summary`), and export, import and `inspect` count
them apart from the two outputs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentscope_ctx import ContextConfig
from agentscope_ctx.cli import main
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.ladder._tool_policy import ToolResultPolicy
from agentscope_ctx.recall._read_file import FileReader
from agentscope_ctx.stores._audit import AuditFile
from agentscope_ctx.stores._export import saved_summaries
from agentscope_ctx.stores.factory import open_backend, open_stores
from agentscope_ctx.stores.postgres._audit import PostgresAudit
from tests.fleet.pg_config import PgStore, config_file
from tests.support.agent_line import Line
from tests.support.two_outputs import two_outputs_session


async def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert await asyncio.to_thread(main, argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def _saved(config: ContextConfig, ref: str) -> bytes:
    stores = open_stores(config)
    try:
        chunks = stores.outputs.read_saved(ref)
        assert chunks is not None, ref
        return b"".join(chunks)
    finally:
        stores.close()


async def test_a_fleet_session_exports_and_imports_into_a_local_working_dir(
    tmp_path: Path, pg_store: PgStore, line: Line, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = config_file(tmp_path / "fleet.yaml", tmp_path / "w", pg_store.fields())
    config = ContextConfig.from_yaml(fleet).model_copy(
        update={
            "max_input_tokens": 3_000,
            "summarizer": ContextConfig().summarizer.model_copy(update={"enabled": False}),
        }
    )
    config = config.model_copy(
        update={
            "recall": config.recall.model_copy(update={"session": "s1"}),
            "tool_result": config.tool_result.model_copy(
                update={"recent_max_bytes": 2_048, "old_max_bytes": 1_024}
            ),
            "compactor": config.compactor.model_copy(update={"enabled": False}),
        }
    )
    await two_outputs_session(line, config)

    archive = tmp_path / "s1.jsonl"
    out = await _run(
        ["export", "--config", str(fleet), "--session", "s1", "-o", str(archive), "--json"], capsys
    )
    assert out["counts"]["outputs"] == 2 and out["counts"]["dialog"] > 0, out
    assert pg_store.password not in archive.read_text(encoding="utf-8")
    # the summaries shown cut at this budget: their saved texts apart from the outputs
    summaries = saved_summaries(config, "s1")
    assert out["counts"]["saved_summaries"] == len(summaries) >= 1
    inspected = await _run(["inspect", "--config", str(fleet), "--json"], capsys)
    assert inspected["outputs"]["count"] == 2
    assert inspected["saved_summaries"]["count"] == len(summaries)
    local = tmp_path / "local"
    back = await _run(["import", str(archive), "--working-dir", str(local), "--json"], capsys)
    assert back["counts"]["outputs"] == 2 and back["counts"]["dialog"] == out["counts"]["dialog"]
    assert back["counts"]["saved_summaries"] == len(summaries)
    for old, new in back["refs"].items():
        assert old.startswith("pg-output:") and Path(new).parent == local.resolve() / "tool_result"
        assert Path(new).read_bytes() == _saved(config, old)
    restored = saved_summaries(ContextConfig(working_dir=local), "s1")
    assert set(restored) == {back["refs"][ref] for ref in summaries}
    refs = {old: new for old, new in back["refs"].items() if old not in summaries}
    dialog = "".join(p.read_text(encoding="utf-8") for p in (local / "dialog").glob("*.jsonl"))
    assert all(new in dialog and old not in dialog for old, new in refs.items())
    reader = FileReader(
        [local], ToolResultPolicy(config.tool_result), store_dir=local / "tool_result"
    ).scoped(Tenant("coder", "s1"))
    for new in refs.values():
        assert reader.read_now(new).startswith(("line 0 of the quokka log\r\n", "日志 wombat"))
    for new in restored:
        assert reader.read_now(new).startswith("## Goal")
    found = await _run(["search", str(local), "quokka", "--json"], capsys)
    assert any(h["tool"] == "cat" for h in found["hits"]), found  # its tool call named

    # and back into another PostgreSQL schema (local -> PostgreSQL)
    other = tmp_path / "other.yaml"
    other.write_text(
        yaml.safe_dump(
            {
                "working_dir": str(tmp_path / "w2"),
                "store": pg_store.fields(schema_name=pg_store.schema + "_b"),
            }
        )
    )
    again = tmp_path / "again.jsonl"
    await _run(["export", str(local), "--session", "s1", "-o", str(again), "--json"], capsys)
    into = await _run(["import", str(again), "--config", str(other), "--json"], capsys)
    second = ContextConfig.from_yaml(other)
    for old, new in into["refs"].items():
        assert new.startswith("pg-output:") and _saved(second, new) == Path(old).read_bytes()
    assert set(saved_summaries(second, "s1")) == {into["refs"][ref] for ref in restored}
    backend = open_backend(second)
    try:
        text = (
            FileReader([tmp_path], ToolResultPolicy(second.tool_result), sources=backend.source)
            .scoped(Tenant("coder", "s1"))
            .read_now(into["refs"][next(iter(refs.values()))])
        )
        assert "quokka" in text or "wombat" in text
        [line_] = PostgresAudit(backend.search.engine).read()  # type: ignore[attr-defined]
        assert line_["action"] == "import" and line_["counts"]["outputs"] == 2
    finally:
        backend.close()
    first = open_backend(config)
    try:
        [exported] = PostgresAudit(first.search.engine).read()  # type: ignore[attr-defined]
        assert exported["action"] == "export" and exported["store"] == "postgres"
    finally:
        first.close()
    assert [a["action"] for a in AuditFile(local).read()] == ["import", "export"]
