"""The fleet example's start scripts as a user runs them again (issue 48): `servers.py start`
on the folder a previous start made (after `stop`, or while its servers run) runs them on the
data they left, with the same roles and passwords; on any other folder that is not empty it
stops with an error naming it, and touches nothing. The model server on a port that is in use
says so (sections 2 and 3 of docs/fleet-example.md each start one) instead of a traceback."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.fleet.example_run import EXAMPLE, ROOT, skip_unless_servers
from tests.support.procs import scratch

if TYPE_CHECKING:
    from tests.support.forked import Done, Forker


def servers(forker: Forker, *args: str) -> Done:
    """`python examples/fleet/servers.py ARGS`, from the root of the checkout: a child of the
    forker (forked after ``import agentscope``, which a `start` loads with the package: a
    fresh interpreter spent some 1.6 CPU-s on that on 1.x, at each of the three starts below)."""
    argv = [str(EXAMPLE / "servers.py"), *args]
    return forker.run(argv, cwd=ROOT, env=dict(os.environ), timeout=240)


def env_of(folder: Path) -> dict[str, str]:
    import shlex

    lines = (folder / "env.sh").read_text().splitlines()
    pairs = (line.removeprefix("export ").partition("=") for line in lines)
    return {key: shlex.split(value)[0] for key, _, value in pairs}


@pytest.mark.parametrize("left", ["notes.txt", "pg"], ids=["a file", "a start that failed"])
def test_a_folder_that_is_not_a_previous_start_is_refused_by_name(
    tmp_path: Path, left: str, forker: Forker
) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine") if left == "notes.txt" else (folder / left).mkdir()
    done = servers(forker, "start", str(folder))
    assert done.returncode == 1, done
    assert f"{folder} is not the data folder of a previous `servers.py start`" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert [p.name for p in folder.iterdir()] == [left]


def test_a_start_on_its_folder_runs_its_servers_again_on_their_data(forker: Forker) -> None:
    skip_unless_servers()
    import psycopg
    import redis

    with scratch("actx-fleet-servers-") as folder:
        folder.chmod(0o755)  # as root: one the OS user postgres can reach
        try:
            first = servers(forker, "start", str(folder))
            assert first.returncode == 0, first
            env = env_of(folder)
            dsn = f"host={folder / 'pg'} port=5432 user=ctx_migrate dbname=ctx"
            with psycopg.connect(dsn, password=env["CTX_MIGRATE_PASSWORD"]) as conn:
                conn.execute("CREATE TABLE kept (note text)")
                conn.execute("INSERT INTO kept VALUES ('before the restart')")
            redis.Redis.from_url(env["REDIS_URL"]).set("kept", "before the restart")

            running = servers(forker, "start", str(folder))  # while they run: left running
            assert running.returncode == 0, running
            assert "PostgreSQL runs already" in running.stdout, running.stdout
            assert "Redis runs already" in running.stdout, running.stdout
            assert env_of(folder) == env

            stopped = servers(forker, "stop", str(folder))
            assert stopped.returncode == 0, stopped
            again = servers(forker, "start", str(folder))
            assert again.returncode == 0, again
            assert "PostgreSQL started again" in again.stdout, again.stdout
            after = env_of(folder)  # the same passwords (Redis's port, if it is still free)
            assert {k: v for k, v in after.items() if k != "REDIS_URL"} == {
                k: v for k, v in env.items() if k != "REDIS_URL"
            }
            with psycopg.connect(dsn, password=after["CTX_MIGRATE_PASSWORD"]) as conn:
                assert conn.execute("SELECT note FROM kept").fetchall() == [("before the restart",)]
            agent = f"host={folder / 'pg'} port=5432 user=agent dbname=ctx"
            with psycopg.connect(agent, password=after["CTX_DB_PASSWORD"]) as conn:
                conn.execute("SELECT 1")  # the workers' role logs in as before
            kept = redis.Redis.from_url(after["REDIS_URL"]).get("kept")
            assert kept == b"before the restart"
        finally:
            servers(forker, "stop", str(folder))


def test_the_model_server_on_a_port_in_use_says_so(forker: Forker) -> None:
    """The script runs in a child of the forker (forked after ``import agentscope``: a fresh
    interpreter took 2.5 s to start it on 1.x)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        script = [str(EXAMPLE / "model_server.py"), "--port", str(port)]
        done = forker.run(script, cwd=ROOT, timeout=120)
    assert done.returncode == 1, done
    assert f"port {port} of 127.0.0.1 is in use" in done.stderr, done.stderr
    assert "--port" in done.stderr and "Traceback" not in done.stderr, done.stderr
