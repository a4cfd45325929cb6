"""Running examples/fleet/ as its page (docs/fleet-example.md) says, for the tests: the start
script's servers, the processes a user starts (each a subprocess, stopped at the end), and the
`agentscope-ctx` commands that read what the workers saved."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.postgres_server import why_unavailable
from tests.support.procs import scratch

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "fleet"


def skip_unless_servers() -> None:
    why = why_unavailable()
    if why:
        pytest.skip(why)
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Fleet:
    """The example's folder, its environment (env.sh), and the processes started in it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.procs: list[subprocess.Popen[bytes]] = []

    def start_servers(self) -> None:
        """`python examples/fleet/servers.py start FOLDER`, `. FOLDER/env.sh`, and the index's
        catch-up as the migration role (`indexer.py`)."""
        self.run(sys.executable, str(EXAMPLE / "servers.py"), "start", str(self.folder))
        for line in (self.folder / "env.sh").read_text().splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            self.env[key] = shlex.split(value)[0]
        self.spawn(sys.executable, str(EXAMPLE / "indexer.py"), log="indexer.log")

    def run(self, *command: str, timeout: float = 240) -> str:
        done = subprocess.run(
            command, env=self.env, capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )
        assert done.returncode == 0, f"{command}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def spawn(self, *command: str, log: str) -> subprocess.Popen[bytes]:
        with (self.folder / log).open("wb") as out:
            proc = subprocess.Popen(
                command, env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)
        return proc

    def wait_http(self, url: str, timeout: float = 120) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                raise AssertionError(f"a process died: {self.logs()}")
            try:
                httpx.get(url, headers={"X-User-ID": "probe"}, timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.3)
        raise AssertionError(f"{url} did not answer: {self.logs()}")

    def logs(self) -> str:
        return "\n".join(
            f"{p.name}:\n{p.read_text(errors='replace')[-3000:]}" for p in self.folder.glob("*.log")
        )

    def cli(self, *args: str) -> str:
        """`agentscope-ctx ARGS --config $MAINTENANCE_CONFIG` (the operator's tools see every
        tenant's rows: as the migration role)."""
        command = [sys.executable, "-m", "agentscope_ctx.cli", *args]
        return self.run(*command, "--config", self.env["MAINTENANCE_CONFIG"])

    def dialog(self) -> list[dict[str, Any]]:
        """Every record of the dialog store (each day that `inspect --json` lists, read whole
        from the store, as `agentscope-ctx read pg-dialog:DAY` reads it in excerpts)."""
        from agentscope_ctx import ContextConfig
        from agentscope_ctx.stores.factory import open_backend

        days = json.loads(self.cli("inspect", "--json"))["dialog"]["days"]
        before = os.environ.get("CTX_MIGRATE_PASSWORD")
        os.environ["CTX_MIGRATE_PASSWORD"] = self.env["CTX_MIGRATE_PASSWORD"]
        backend = open_backend(ContextConfig.from_yaml(self.env["MAINTENANCE_CONFIG"]))
        try:
            rows: list[dict[str, Any]] = []
            for day in sorted(days):
                source = backend.source(f"pg-dialog:{day}")
                assert source is not None
                data = source.read_range(f"pg-dialog:{day}", 0, 1 << 31).decode()
                rows += [json.loads(line) for line in data.splitlines() if line]
            return rows
        finally:
            backend.close()
            if before is None:
                os.environ.pop("CTX_MIGRATE_PASSWORD")
            else:
                os.environ["CTX_MIGRATE_PASSWORD"] = before

    def read_hit(self, query: str) -> tuple[str, str]:
        """`agentscope-ctx search QUERY`, then its first hit's `read on:` command: both outputs."""
        found = self.cli("search", query)
        command = next(
            line.split("read on: ", 1)[1] for line in found.splitlines() if "read on: " in line
        )
        args = shlex.split(command)
        assert args[0] == "agentscope-ctx", command
        config_at = args.index("--config")
        return found, self.cli(*args[1:config_at], *args[config_at + 2 :])

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        subprocess.run([sys.executable, str(EXAMPLE / "servers.py"), "stop", str(self.folder)],
                       env=self.env, capture_output=True, timeout=120)  # fmt: skip


@contextmanager
def fleet() -> Iterator[Fleet]:
    """A folder for the example's servers (as root, one the OS user postgres can reach)."""
    with scratch("actx-fleet-example-") as folder:
        folder.chmod(0o755)
        running = Fleet(folder)
        try:
            yield running
        finally:
            running.stop()
