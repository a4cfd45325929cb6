"""Worker processes for the fleet harness for the price of one interpreter start-up.

Starting a worker as a fresh interpreter costs seconds (importing AgentScope, the package, the
storage clients, loading the tokenizer), and a trial with kills starts one for every kill: that
start-up, not the session, was most of a trial's time. A `Spawner` starts one interpreter
(`python -m tests.fleet.spawner FD`) that imports what a worker needs and nothing else, and
forks a worker (`tests.fleet.worker`'s loop) on request; the child begins where a fresh
worker would be after its imports, with its own stdin, stdout and stderr (file descriptors
passed over a Unix socket), and shares nothing with its siblings: no connection, no manager,
no event loop (the spawner opens none). A worker killed with SIGKILL dies as a fresh one
would; its replacement is a new child, ready in milliseconds.

The spawner reaps its ended children; the driver sees a child end as end of file on its
stdout (only the child holds the write end).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
import pkgutil
import signal
import socket
import subprocess
import sys
import threading
import traceback
from pathlib import Path

from tests.support.procs import wait_or_kill

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 300.0


class Spawner:
    """The driver's handle on a spawner process (one per harness run)."""

    def __init__(self, log: Path, env: dict[str, str] | None = None) -> None:
        """`env`: added to the workers' environment."""
        self.log = log
        ours, theirs = socket.socketpair()
        with log.open("a") as output:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.fleet.spawner", str(theirs.fileno())],
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                pass_fds=[theirs.fileno()],
                env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)},
            )
        theirs.close()
        self.sock = ours
        self._buffer = b""
        self.ready = False

    def _line(self) -> str:
        self.sock.settimeout(START_TIMEOUT)
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise AssertionError(f"the spawner ended\n{self.log.read_text()[-3000:]}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def spawn(self) -> tuple[int, int, int]:
        """Fork a worker; returns its pid, the write end of its stdin and the read end of
        its stdout (its stderr goes to the log)."""
        if not self.ready:
            line = self._line()
            assert line == "READY", line
            self.ready = True
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            socket.send_fds(self.sock, [b"SPAWN\n"], [stdin_r, stdout_w, stderr])
        finally:
            for fd in (stdin_r, stdout_w, stderr):
                os.close(fd)
        return int(self._line()), stdin_w, stdout_r

    def stop(self) -> None:
        self.sock.close()  # the spawner ends at end of file
        wait_or_kill(self.proc, 30)


def preload() -> None:
    """Import what a worker of the installed line imports, and load the tokenizer."""
    import agentscope_ctx
    from agentscope_ctx._line import IS_1X
    from agentscope_ctx.core.tokens._encodings import make_encoding

    names = ["tests.fleet.checks", "tests.fleet.session", "tests.fleet.worker"]
    names += ["sqlalchemy.ext.asyncio", "aiosqlite"]
    if IS_1X:
        names += ["tests.fleet.session1", "agentscope.memory", "agentscope.session"]
    else:
        names += ["tests.fleet.session2", "agentscope.app.storage"]
    names += [
        info.name
        for info in pkgutil.walk_packages(agentscope_ctx.__path__, "agentscope_ctx.")
        if not info.name.startswith(("agentscope_ctx.agentscope", "agentscope_ctx.demo"))
        and not info.name.startswith("agentscope_ctx.cli")  # (its __main__ would run)
    ]
    adapter = importlib.import_module(
        "agentscope_ctx.agentscope1" if IS_1X else "agentscope_ctx.agentscope2"
    )
    names += [info.name for info in pkgutil.iter_modules(adapter.__path__, f"{adapter.__name__}.")]
    for name in names:
        importlib.import_module(name)
    make_encoding("cl100k_base")


def _child(fds: list[int]) -> None:
    """In a forked child: take the passed descriptors as stdin, stdout, stderr and run the
    worker's loop; never returns."""
    code = 1
    try:
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        from tests.fleet import worker

        code = asyncio.run(worker.main())
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(fd: int) -> None:
    """The spawner's loop: preload, say READY, then fork a worker for each SPAWN."""
    sock = socket.socket(fileno=fd)
    preload()
    running = [thread.name for thread in threading.enumerate()]
    assert running == ["MainThread"], f"a thread would be forked mid-work: {running}"
    gc.freeze()  # what the children share is never collected: no copy of those pages
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    print(f"spawner {os.getpid()} ready", file=sys.stderr, flush=True)
    sock.sendall(b"READY\n")
    while True:
        msg, fds, _flags, _addr = socket.recv_fds(sock, 64, 3)
        if not msg:
            return
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(fds)
        for passed in fds:
            os.close(passed)
        sock.sendall(f"{pid}\n".encode())


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


if __name__ == "__main__":
    serve(int(sys.argv[1]))
