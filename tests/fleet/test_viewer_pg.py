"""The session viewer on the fleet store (issue 32 item 2): the scripted logs demo runs on a
private PostgreSQL server, its steps go to the ``steps`` table, and the page `agentscope-ctx
view --config` writes from the database passes the same browser check as the local one."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_ctx.cli import main as cli_main
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.demo import run_demo
from agentscope_ctx.demo._runner import DEFAULT_CONTEXT
from agentscope_ctx.stores.factory import open_backend, open_stores
from tests.edge.test_viewer import check_page
from tests.fleet.pg_config import PgStore, config_file


async def test_i32_2_view_a_fleet_session_in_chromium(
    tmp_path: Path,
    pg_store: PgStore,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = pg_store.fields()
    work = tmp_path / "run"
    config = ContextConfig(**DEFAULT_CONTEXT, store=store)  # the demo's budget, on the fleet
    report = await run_demo("logs", work, config=config, out=lambda _: None)
    assert report.compactions >= 1
    assert not (work / "usage" / "steps").exists()  # recorded in the database instead
    backend = open_backend(ContextConfig(working_dir=work, store=store))
    try:
        assert backend.steps is not None and backend.steps.sessions() == ["default"]
        records = backend.steps.read("default")
    finally:
        backend.close()
    assert sum(1 for r in records if r["call"]) == report.steps
    refs = [o["ref"] for r in records for o in r["outputs"] if o["ref"].startswith("pg-output:")]
    assert refs and all(o["bytes"] for r in records for o in r["outputs"] if o["ref"] in refs)

    path = config_file(tmp_path / "fleet.yaml", work, store)
    page = tmp_path / "fleet.html"
    assert cli_main(["view", "--config", str(path), "-o", str(page)]) == 0
    printed = capsys.readouterr().out
    assert f"{report.steps} model calls" in printed
    shown = await check_page(page, report.steps)
    stores = open_stores(ContextConfig(working_dir=work, store=store))
    try:
        first = next(o["ref"] for r in records for o in r["outputs"])
        head = stores.outputs.read_range(first, 0, 200).decode("utf-8", "replace")
    finally:
        stores.close()
    assert shown.startswith(head.splitlines()[0])
