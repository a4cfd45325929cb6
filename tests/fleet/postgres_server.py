"""A private PostgreSQL server for the tests and the benchmark: ``initdb`` into a fresh
directory, ``pg_ctl start`` listening on a unix socket in that directory only (no TCP), with
password authentication (scram-sha-256) for the ``postgres`` user, stopped at the end.

The binaries: ``$PG_BINDIR``, else ``pg_config --bindir``, else the newest
``/usr/lib/postgresql/*/bin`` (Debian's ``postgresql`` package, which `.ci/run` installs).
PostgreSQL refuses to run as root: when the tests run as root, the server runs as the OS user
``postgres`` (made by Debian's package) through ``runuser``, and the directory is given to it.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PostgresServer", "find_bindir", "why_unavailable"]

PASSWORD = "s3cret-Pw!d'q\\x"
"""The superuser's password (quotes and a backslash: the redaction must cope)."""
PORT = 5432


def find_bindir() -> Path | None:
    """Where ``initdb``, ``pg_ctl`` and ``postgres`` are, or `None`."""
    candidates = []
    if os.environ.get("PG_BINDIR"):
        candidates.append(Path(os.environ["PG_BINDIR"]))
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()
            candidates.append(Path(out))
        except (OSError, subprocess.SubprocessError):
            pass
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2] or 0)
    )
    candidates.extend(Path(p) for p in reversed(versions))
    for bindir in candidates:
        if all((bindir / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return bindir
    return None


def _run_as() -> str | None:
    """The OS user the server runs as when we are root (`None`: ourselves)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return ""
    return "postgres"


def why_unavailable() -> str | None:
    """Why no server can be started here, or `None` when one can."""
    if find_bindir() is None:
        return "PostgreSQL server binaries not found (apt-get install postgresql, or set PG_BINDIR)"
    if _run_as() == "" or (_run_as() and shutil.which("runuser") is None):
        return "running as root without a 'postgres' OS user (or runuser) to run the server"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'agentscope-ctx[fleet]')"
    return None


@dataclass
class PostgresServer:
    """One private server; `start` then `stop`."""

    root: Path
    bindir: Path
    user: str | None
    options: str = ""
    """The server's command-line options (`start` sets them)."""

    @classmethod
    def start(cls, *, durable: bool = False) -> PostgresServer:
        """Initialise and start a server in a new directory (`durable`: keep fsync on, as in
        production; the tests turn it off for speed)."""
        bindir = find_bindir()
        if bindir is None:
            raise RuntimeError("no PostgreSQL binaries")
        root = Path(tempfile.mkdtemp(prefix="actx-pg-"))
        user = _run_as()
        server = cls(root, bindir, user or None)
        pwfile = root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if server.user:
            info = pwd.getpwnam(server.user)
            for path in (root, pwfile):
                os.chown(path, info.pw_uid, info.pw_gid)
        server._run(
            "initdb", "-D", str(root / "data"), "-U", "postgres", "--pwfile", str(pwfile),
            "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C.UTF-8", "--no-sync",
        )  # fmt: skip
        pwfile.unlink()
        options = f"-k {root} -c listen_addresses='' -p {PORT}"
        if not durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        server.options = options
        server.resume()
        return server

    @property
    def dsn(self) -> str:
        """A DSN without the password (give it through PGPASSWORD or password_env)."""
        return f"host={self.root} port={PORT} user=postgres dbname=postgres"

    def halt(self) -> None:
        """Stop the server, keeping its data (`resume` starts it again): the database
        becomes unreachable, as when a worker loses its network."""
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start a `halt`-ed server again on the same data."""
        self._run(
            "pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "log"),
            "-o", self.options, "-w", "-t", "60", "start",
        )  # fmt: skip

    def running(self) -> bool:
        """Whether the server runs (`halt` stops it)."""
        data = str(self.root / "data")
        command = [str(self.bindir / "pg_ctl"), "-D", data, "status"]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, capture_output=True, timeout=60).returncode == 0

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        try:
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if result.returncode:
            log = self.root / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{tool} failed ({result.returncode}): {result.stderr[-2000:]}\n{tail}"
            )
