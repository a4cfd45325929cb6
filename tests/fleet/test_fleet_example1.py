"""examples/fleet/ on AgentScope 1.x, run as docs/fleet-example.md says: the servers script,
the scripted model server, two worker processes on RedisMemory, and the client, which SIGKILLs
the worker of one turn while that turn runs. Every turn is answered, no user message is lost
(each once in the session's history: our dialog store and the RedisMemory the workers share),
and the outputs are read and searched with `agentscope-ctx` (slow: the 1.x slow runs)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from typing import Any
from urllib.parse import urlparse

import pytest

from tests.support.lines import IS_1X

if not IS_1X:
    pytest.skip(
        "AgentScope 1.x's RedisMemory (the 2.x example: test_fleet_example2.py)",
        allow_module_level=True,
    )
pytest.importorskip("uvicorn")

from tests.fleet.example_run import EXAMPLE, fleet, free_port, skip_unless_servers
from tests.fleet.example_steps import check_compactions_and_indexing

pytestmark = pytest.mark.slow
TURNS, KILL_AT = 10, 5


async def shared_memory(redis_url: str, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The session's messages in the RedisMemory the workers share."""
    from agentscope.memory import RedisMemory

    at = urlparse(redis_url)
    memory = RedisMemory(
        session_id=summary["session_id"], user_id=summary["user"], host=at.hostname, port=at.port
    )
    try:
        return [m.to_dict() for m in await memory.get_memory()]
    finally:
        await memory.close()


def test_two_workers_on_redis_memory_one_killed_mid_turn() -> None:
    skip_unless_servers()
    with fleet() as run:
        run.start_servers()
        model, ports = free_port(), (free_port(), free_port())
        run.spawn(
            sys.executable, str(EXAMPLE / "model_server.py"), "--port", str(model), log="model.log"
        )
        for port in ports:
            run.spawn(
                sys.executable, str(EXAMPLE / "worker1.py"), "--port", str(port),
                "--model", f"http://127.0.0.1:{model}/v1", log=f"worker-{port}.log",
            )  # fmt: skip
        for port in ports:
            run.wait_http(f"http://127.0.0.1:{port}/")
        out = run.run(
            sys.executable, str(EXAMPLE / "client1.py"), "--turns", str(TURNS),
            "--kill-at", str(KILL_AT), "--workers", *(f"http://127.0.0.1:{p}" for p in ports),
        )  # fmt: skip
        summary = json.loads(out.splitlines()[-1])
        assert summary["answered"] == TURNS and summary["replays"] == 1, out
        for t in range(1, TURNS + 1):
            assert f"turn {t}: worker " in out and f"turn {t} answered." in out, out
        ids = summary["message_ids"]

        memory = asyncio.run(shared_memory(run.env["REDIS_URL"], summary))
        dialog = [row["msg"] for row in run.dialog() if row["session"] == summary["session_id"]]
        assert dialog, "a compaction saved the old turns to the dialog store"
        # the ten turns outgrow worker1.py's budget: its compactions are its model's
        check_compactions_and_indexing(run.env, run.folder, summary["session_id"])
        for where in (memory, dialog):
            twice = [i for i, n in Counter(m["id"] for m in where).items() if n > 1]
            assert not twice, twice
        assert set(ids) <= {m["id"] for m in dialog} | {m["id"] for m in memory}

        found, read = run.read_hit("disk quota")
        assert "pg-output:" in found
        assert "ERROR disk quota exceeded on node-" in read, read
        # the session's page, as section 4 writes it (into maintenance.yaml's working dir)
        page = run.cli("view", "--session", summary["session_id"])
        assert page.startswith(f"{run.folder / 'maintenance' / 'view.html'} ("), page
