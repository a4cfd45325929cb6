"""The CLI on the fleet store (issue 23 item 2): `inspect`, `search` and `gc` with a config
naming ``store: {kind: postgres}`` act on the database (a private PostgreSQL server, see
`conftest`), not on a working dir's files; the DSN's password is never printed."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest

from agentscope_ctx.cli import main as cli_main
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.stores.factory import open_stores
from tests.fleet.pg_config import PgStore, config_file
from tests.fleet.postgres_server import PASSWORD
from tests.support.lines import Msg


async def test_inspect_search_and_gc_act_on_the_database(
    tmp_path: Path,
    pg_store: PgStore,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = config_file(tmp_path / "fleet.yaml", tmp_path / "w", pg_store.fields())
    stores = open_stores(ContextConfig.from_yaml(config), agent="a1")
    msg = Msg("user", "the quokka report is due on friday", "user")
    msg.timestamp = "2026-12-02 17:01:49.123"
    await stores.dialog.append([msg])
    kept = stores.outputs.save("line one\nERROR: the wombat daemon crashed\n")
    old = stores.outputs.save("an old output about a numbat\n")
    engine = stores.search.engine  # type: ignore[attr-defined]
    with engine.connection() as conn:  # `old` was last used 30 days ago
        conn.execute(
            f"UPDATE {pg_store.schema}.outputs SET used_at = %s WHERE id = %s",
            (time.time() - 30 * 86_400, old.removeprefix("pg-output:")),
        )
    stores.close()

    assert cli_main(["inspect", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "dialog: 1 messages over 1 day(s)" in out and "2026-12-02: 1 messages" in out, out
    assert "saved outputs: 2," in out, out
    assert PASSWORD not in out

    assert cli_main(["search", "--config", str(config), "wombat"]) == 0
    out = capsys.readouterr().out  # how to read on, as a command a person runs (issue 31)
    read_on = f"read on: agentscope-ctx read {kept} --start-line 1 --config {config}"
    assert "the wombat daemon crashed" in out and read_on in out, out
    assert cli_main(["read", kept, "--start-line", "2", "--config", str(config)]) == 0
    assert capsys.readouterr().out == "ERROR: the wombat daemon crashed\n"
    assert cli_main(["search", "--config", str(config), "quokka", "--json"]) == 0
    [hit] = json.loads(capsys.readouterr().out)["hits"]
    assert hit["ref"] == "pg-dialog:2026-12-02" and hit["start_line"] == 1
    assert cli_main(shlex.split(hit["read"])[1:]) == 0
    out = capsys.readouterr().out
    assert out.startswith("the quokka report is due on friday"), out
    assert cli_main(["read", "pg-output:0123456789abcdef", "--config", str(config)]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert cli_main(["inspect", "--config", str(config), "--json"]) == 0
    out = capsys.readouterr().out
    facts = json.loads(out)
    assert facts["store"] == {"kind": "postgres", "schema": pg_store.schema}
    assert facts["dialog"]["messages"] == 1 and facts["outputs"]["count"] == 2
    assert PASSWORD not in out and pg_store.server.dsn not in out

    assert cli_main(["gc", "--config", str(config)]) == 0  # retention: 7 days
    out = capsys.readouterr().out
    assert "gc: removed 1 saved output(s) unused for over 7 days" in out and "1 kept" in out
    assert cli_main(["search", "--config", str(config), "numbat"]) == 0
    out = capsys.readouterr().out  # its index entries went too; what was searched is named
    assert "No hits for 'numbat' in all agents' history (the fleet store: pg-dialog" in out
    assert not (tmp_path / "w").exists()  # nothing was written to the working dir
