"""The fleet example's operator commands (docs/fleet-example.md, section 4) on a store whose
working dir no process made: `servers.py` names one in maintenance.yaml, and neither the CLI
nor indexer.py writes a file there on a PostgreSQL store. `agentscope-ctx view --session ID`
writes its page there all the same (it stopped on the temporary file's missing folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_ctx.cli import main as cli_main
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.stores.factory import open_backend
from tests.fleet.pg_config import PgStore, config_file

SESSION = "f55d9f4efafe40b9a975072785033917"

STEP = {  # one model call's record, as an example worker wrote it (the steps table)
    "v": 2, "at": "2026-12-06T18:45:12.705+00:00", "agent": "assistant",
    "key": "alice/assistant", "session": SESSION, "run": 1, "call": True,
    "before": 8881, "after": 8881, "threshold": 9000, "budget": 12000, "freed": {},
    "compacted": 0, "summary_source": None, "summary": None, "truncated": 0, "outputs": [],
    "input": 8805, "cache_read": 0, "cache_creation": None,
}  # fmt: skip


def test_view_writes_its_page_into_a_working_dir_never_made(
    tmp_path: Path, pg_store: PgStore, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "maintenance"  # named by the config, made by nobody
    backend = open_backend(ContextConfig(working_dir=tmp_path / "worker", store=pg_store.fields()))
    try:
        assert backend.steps is not None
        backend.steps.append(STEP)
    finally:
        backend.close()
    config = config_file(tmp_path / "maintenance.yaml", work, pg_store.fields())

    assert cli_main(["view", "--config", str(config), "--session", SESSION]) == 0
    assert f"{work / 'view.html'} (1 model calls" in capsys.readouterr().out
    assert SESSION in (work / "view.html").read_text()
