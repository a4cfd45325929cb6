"""`Forker`: many short ``python -c/-m/SCRIPT ...`` runs for the price of one start-up.

`import agentscope` takes seconds on 1.x, and every interpreter that imports the package pays
it. A `Forker` starts one interpreter that imports ``agentscope`` (and the few standard modules
it needs to serve) and nothing else (or also the modules given as `preload`); each run is a
child forked from it, which begins where a fresh interpreter would be right after
``import agentscope``: it takes the run's working dir, environment, ``sys.argv``, stdout and
stderr, runs the code or module as ``__main__``, and ends the way that interpreter would (an
uncaught exception prints its traceback and exits 1; the flush of stdout at exit happens).
`Forker.run` waits for its run; `Forker.start` returns at once, with the child's pid, so that
runs go side by side or a test kills one. One `Forker` per test process (the session fixture
``forker``; the README's tests have their own, with a preload).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

_SERVER = """
import gc, importlib, json, os, runpy, signal, sys, time
import agentscope
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ImportError:  # a module of the other AgentScope line
        pass
gc.freeze()  # what the children share is never collected: a child's exit copies no pages
for line in sys.stdin:
    case = json.loads(line)
    if "reap" in case:  # wait for a child to end, killing it at the deadline
        deadline = time.monotonic() + case["timeout"]
        while not (ended := os.waitpid(case["reap"], os.WNOHANG))[0]:
            if time.monotonic() > deadline:
                os.kill(case["reap"], signal.SIGKILL)
                ended = os.waitpid(case["reap"], 0)
                print("timeout", flush=True)
                break
            time.sleep(0.005)
        else:
            print(os.waitstatus_to_exitcode(ended[1]), flush=True)
        continue
    pid = os.fork()
    if pid:
        print(pid, flush=True)
        continue
    os.chdir(case["cwd"])
    os.environ.update(case["env"])
    if case["stdout"] is None:  # a pipe whose reader has gone
        read_end, write_end = os.pipe()
        os.close(read_end)
    else:
        write_end = os.open(case["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(write_end, 1)
    os.dup2(os.open(case["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    os.dup2(os.open(case["stdin"] or os.devnull, os.O_RDONLY), 0)  # (this one's is ours)
    if case["argv"][0] == "-m":
        _, target, *args = case["argv"]
        sys.argv = [target, *args]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    elif case["argv"][0] == "-c":
        _, target, *args = case["argv"]
        sys.argv = ["-c", *args]
        exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})
    else:  # a script: its directory first on the path, as `python script.py` puts it
        sys.argv = list(case["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
        runpy.run_path(sys.argv[0], run_name="__main__")
    sys.exit(0)
"""
"""Reads one request a line (JSON): a run, answered with the pid of the child forked for it, or
``reap`` (a pid and a timeout), answered with the child's exit code once it ends (``timeout``: it
was killed at the deadline). In the child, an exception or `SystemExit` leaves the loop: the
child's interpreter ends as a fresh one would."""


@dataclass
class Done:
    """What a run left: like `subprocess.CompletedProcess`."""

    returncode: int
    stdout: str
    stderr: str


class Forker:
    """One interpreter after `import agentscope`, forking a child for each run.

    Args:
        tmp: a directory of its own (its stderr, the runs' output files).
        preload: modules imported after ``agentscope`` too (skipped where they do not exist);
            only for runs whose own imports are not under test (the README's examples).
    """

    def __init__(self, tmp: Path, preload: Sequence[str] = ()) -> None:
        self.tmp = tmp
        self.runs = 0
        self._errors = tmp / "forker.err"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, json.dumps(list(preload))],
            cwd=tmp,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors.open("w"),
            text=True,
        )

    def run(self, argv: list[str], *, timeout: float = 300.0, **how: Any) -> Done:
        """Run ``python *argv`` (``-c CODE ...``, ``-m MODULE ...`` or ``SCRIPT ...``) as
        `start` does (`how`: its keywords) and wait for it (`Child.wait`)."""
        return self.start(argv, **how).wait(timeout)

    def start(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: dict[str, str] | None = None,
        stdin: str = "",
        closed_stdout: bool = False,
        stdout: Path | None = None,
    ) -> Child:
        """Start ``python *argv`` in `cwd`, with `env` added to the environment and `stdin` to
        read, and return at once (several may run side by side). Its stdout goes to `stdout`, a
        file (or FIFO) of the caller's, when given; else to a file `Child.wait` reads, or to a
        pipe whose reader has gone if `closed_stdout`."""
        self.runs += 1
        out = stdout or self.tmp / f"run{self.runs}.out"
        err = self.tmp / f"run{self.runs}.err"
        given = self.tmp / f"run{self.runs}.in"
        given.write_text(stdin, encoding="utf-8")
        case = {
            "argv": argv,
            "cwd": str(cwd),
            "env": env or {},
            "stdin": str(given),
            "stdout": None if closed_stdout else str(out),
            "stderr": str(err),
        }
        pid = int(self._ask(case))
        return Child(self, pid, None if closed_stdout or stdout else out, err)

    def _ask(self, request: dict[str, object]) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        assert answer, f"the forker died: {self._errors.read_text(encoding='utf-8')}"
        return answer

    def close(self) -> None:
        """Tell the interpreter to end (its stdin closed) and wait for it; killed, and this
        raises, if it is still running after 120 s: then a process forked from this one still
        holds its stdin's write end (a test's child left running)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("the forker never read the end of its stdin: killed") from None


@dataclass
class Child:
    """A run `Forker.start` started: its pid (to signal it), and the wait for its end."""

    forker: Forker
    pid: int
    out: Path | None
    err: Path

    def wait(self, timeout: float = 300.0) -> Done:
        """Wait for the child to end (killed, and this raises, after `timeout` seconds)."""
        status = self.forker._ask({"reap": self.pid, "timeout": timeout})
        stderr = self.err.read_text(encoding="utf-8")
        assert status != "timeout", f"run {self.pid} killed after {timeout} s:\n{stderr[-3000:]}"
        stdout = "" if self.out is None else self.out.read_text(encoding="utf-8")
        return Done(int(status), stdout, stderr)
