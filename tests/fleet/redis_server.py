"""A private Redis server for the fleet tests: `redis_server` (session-scoped fixture).

Started from the `redis-server` binary (Debian's `redis-server` package; `.ci/run` installs it)
on a free TCP port of 127.0.0.1, in a temporary directory, with no persistence (no RDB, no
AOF); stopped at the end of the test session. Without the binary the tests that use it skip,
saying so. Import the fixture into a test module:

    from tests.fleet.redis_server import RedisServer, redis_server  # noqa: F401

Each test takes its own database (`server.fresh_db()`, flushed first) or its own key prefix,
so that tests sharing the server never see each other's keys.
"""

from __future__ import annotations

import itertools
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.procs import scratch, wait_or_kill

__all__ = ["RedisServer", "redis_server", "start_redis"]

BINARY = "redis-server"
DATABASES = 16


@dataclass
class RedisServer:
    """A running private Redis server."""

    host: str
    port: int
    process: subprocess.Popen[bytes]
    _next_db: Iterator[int] = field(default_factory=lambda: itertools.cycle(range(1, DATABASES)))

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def fresh_db(self) -> int:
        """A database number for one test, flushed (db 0 is left for ad-hoc use)."""
        db = next(self._next_db)
        import redis

        client = redis.Redis(host=self.host, port=self.port, db=db)
        try:
            client.flushdb()
        finally:
            client.close()
        return db

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            wait_or_kill(self.process, 10)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_redis(directory: Path) -> RedisServer:
    """Start a private server with its files in `directory`.

    Raises:
        RuntimeError: the server did not answer within 10 s (its log is in the message).
    """
    binary = shutil.which(BINARY)
    if binary is None:
        raise FileNotFoundError(BINARY)
    log = directory / "redis.log"
    for _attempt in range(3):  # a port taken between picking and binding: pick again
        port = _free_port()
        process = subprocess.Popen(
            [
                binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--dir",
                str(directory),
                "--save",
                "",
                "--appendonly",
                "no",
                "--databases",
                str(DATABASES),
                "--logfile",
                str(log),
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return RedisServer("127.0.0.1", port, process)
            except OSError:
                time.sleep(0.05)
        if process.poll() is None:
            process.kill()
        process.wait()
    text = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
    raise RuntimeError(f"redis-server did not start on 127.0.0.1: {text}")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A private Redis server for the whole test session (per xdist worker)."""
    if shutil.which(BINARY) is None:
        pytest.skip(
            f"{BINARY} is not installed (Debian: apt-get install -y redis-server; "
            ".ci/run installs it)"
        )
    try:
        import redis  # noqa: F401
    except ImportError:
        pytest.skip("the Python client `redis` is not installed (the `dev` extra has it)")
    with scratch("agentscope-ctx-redis-") as directory:
        server = start_redis(directory)
        try:
            yield server
        finally:
            server.stop()
