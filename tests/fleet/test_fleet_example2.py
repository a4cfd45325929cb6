"""examples/fleet/ on AgentScope 2.x, run as docs/fleet-example.md says: the servers script,
the scripted model server, AgentScope's app server under `uvicorn --workers 2`, and the client,
which SIGKILLs the worker of one turn while that turn runs. Every turn is answered, no user
message is lost (each once in the app's messages, and once in the session's history: our
dialog store followed by the state the app saved), and the outputs are read and searched with
`agentscope-ctx` (slow: the servers' and the workers' start-up, a lease of the dead worker)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from typing import Any
from urllib.parse import urlparse

import pytest

from tests.support.lines import IS_1X

if IS_1X:
    pytest.skip(
        "AgentScope 2.x's app server (the 1.x example: test_fleet_example1.py)",
        allow_module_level=True,
    )
pytest.importorskip("uvicorn")

from tests.fleet.example_run import EXAMPLE, fleet, free_port, skip_unless_servers
from tests.fleet.example_steps import check_compactions_and_indexing

pytestmark = pytest.mark.slow
TURNS, KILL_AT = 10, 5


async def saved_state(redis_url: str, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent state the app saved for the session (AgentScope's RedisStorage)."""
    from agentscope.app.storage import RedisStorage

    at = urlparse(redis_url)
    async with RedisStorage(host=at.hostname, port=at.port) as storage:
        record = await storage.get_session(
            summary["user"], summary["agent_id"], summary["session_id"]
        )
    assert record is not None
    return [m.model_dump(mode="json") for m in record.state.context]


def test_two_uvicorn_workers_one_killed_mid_turn() -> None:
    skip_unless_servers()
    with fleet() as run:
        run.start_servers()
        model, app = free_port(), free_port()
        run.spawn(
            sys.executable, str(EXAMPLE / "model_server.py"), "--port", str(model), log="model.log"
        )
        run.spawn(
            sys.executable, "-m", "uvicorn", "app2:app", "--app-dir", str(EXAMPLE),
            "--workers", "2", "--port", str(app), log="uvicorn.log",
        )  # fmt: skip
        run.wait_http(f"http://127.0.0.1:{app}/health")
        out = run.run(
            sys.executable, str(EXAMPLE / "client2.py"), "--app", f"http://127.0.0.1:{app}",
            "--model", f"http://127.0.0.1:{model}/v1", "--turns", str(TURNS),
            "--kill-at", str(KILL_AT),
        )  # fmt: skip
        summary = json.loads(out.splitlines()[-1])
        assert summary["answered"] == TURNS, out
        assert summary["killed"] and summary["replays"] >= 1, out
        assert summary["pids"][KILL_AT - 1] != summary["killed"], out  # answered by another
        ids = summary["message_ids"]

        # the app's messages: each user message once, each followed by its answer
        import httpx

        page = httpx.get(
            f"http://127.0.0.1:{app}/sessions/{summary['session_id']}/messages",
            params={"agent_id": summary["agent_id"], "limit": 200},
            headers={"X-User-ID": summary["user"]},
        ).json()["messages"]
        users = [m["id"] for m in page if m["role"] == "user"]
        assert users == ids
        for t, mid in enumerate(ids, start=1):
            after = page[[m["id"] for m in page].index(mid) + 1]
            assert after["role"] == "assistant" and f"turn {t} answered." in json.dumps(after)

        # the session's history: our dialog store, then the state; each user message in it
        state = asyncio.run(saved_state(run.env["REDIS_URL"], summary))
        dialog = [row["msg"] for row in run.dialog() if row["session"] == summary["session_id"]]
        assert dialog, "a compaction saved the old turns to the dialog store"
        check_compactions_and_indexing(run.env, run.folder, summary["session_id"])
        for where in (state, dialog):
            twice = [i for i, n in Counter(m["id"] for m in where).items() if n > 1]
            assert not twice, twice
        history = {m["id"] for m in dialog} | {m["id"] for m in state}
        assert set(ids) <= history

        # what the workers cut and saved: found and read back from here (any worker's)
        found, read = run.read_hit("disk quota")
        assert "pg-output:" in found
        assert "ERROR disk quota exceeded on node-" in read, read
        # the session's page, as section 4 writes it (into maintenance.yaml's working dir)
        page = run.cli("view", "--session", summary["session_id"])
        assert page.startswith(f"{run.folder / 'maintenance' / 'view.html'} ("), page

        # the session, exported from PostgreSQL and imported into a local working dir (issue
        # 47): every output byte for byte, found and read there as here
        archive, local = run.folder / "session.jsonl", run.folder / "local"
        sid = summary["session_id"]
        out = json.loads(run.cli("export", "--session", sid, "-o", str(archive), "--json"))
        assert out["counts"]["outputs"] >= 1 and out["counts"]["dialog"] >= len(dialog), out
        cli = [sys.executable, "-m", "agentscope_ctx.cli"]
        back = json.loads(
            run.run(*cli, "import", str(archive), "--working-dir", str(local), "--json")
        )
        assert back["counts"]["outputs"] == out["counts"]["outputs"], back
        from pathlib import Path

        from agentscope_ctx.stores._archive import parse_archive

        exported = {o.ref: o.data for o in parse_archive(archive.read_text()).outputs}
        for old, new in back["refs"].items():
            assert Path(new).read_bytes() == exported[old]
        found = run.run(*cli, "search", str(local), "disk quota")
        assert "ERROR disk quota exceeded on node-" in found, found
