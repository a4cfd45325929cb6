"""Benchmark start-up: what importing the package and each quick CLI command costs, against
``import agentscope`` on the installed line.

Run ``python -m benchmarks startup`` (or ``python -m benchmarks.startup.imports --runs N``).
Each case is a fresh interpreter (``sys.executable``, this checkout first on the path), run
once untimed (warms the OS file cache and writes Python's bytecode cache, as a user's
installation has it; `search` builds its index) and then `runs` times,
interleaved with the baseline so that a busy machine slows both alike. The ratio is the
case's median wall time over the baseline's median; the target is 2x at most (issue 20).
The CLI runs the way its console script does (``from agentscope_ctx.cli import main``).
`inspect`, `search` and `gc` act on a small working dir made here with the package's own
stores (one dialog day file, a saved output, a memory note). Numbers only: no limit is
asserted here (the structural check is `tests/edge/test_startup.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TARGET = 2.0
"""A case may cost at most this many times ``import agentscope``."""
_CLI = "import sys; from agentscope_ctx.cli import main; sys.exit(main())"


def cases(working_dir: Path) -> dict[str, list[str]]:
    """Each case's interpreter arguments (after ``python``), the baseline first."""
    wd = str(working_dir)
    return {
        "import agentscope": ["-c", "import agentscope"],
        "import agentscope_ctx": ["-c", "import agentscope_ctx"],
        "--help": ["-c", _CLI, "--help"],
        "config": ["-c", _CLI, "config"],
        "inspect": ["-c", _CLI, "inspect", wd],
        "search": ["-c", _CLI, "search", wd, "deploy token"],
        "gc": ["-c", _CLI, "gc", wd],
    }


def make_working_dir(path: Path) -> Path:
    """A small working dir written by the package's stores: dialog, a saved output, a note."""
    from agentscope_ctx.core._entry import Msg
    from agentscope_ctx.stores._dialog import DialogStore
    from agentscope_ctx.stores._tool_results import ToolResultStore

    msgs = [
        Msg("user", f"step {i}: where is the deploy token of service {i}?", "user")
        for i in range(20)
    ]
    asyncio.run(DialogStore(path).append(msgs))
    ToolResultStore(path, 7.0).save("\n".join(f"line {i} deploy" for i in range(2000)))
    (path / "memory").mkdir(exist_ok=True)
    (path / "memory" / "MEMORY.md").write_text("- the deploy token is in the vault\n", "utf-8")
    return path


def _run(args: Sequence[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=120
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr[-500:]}")
    return elapsed


def main(runs: int = 7, only: Sequence[str] | None = None, *, warm: bool = True) -> dict[str, Any]:
    """Measure every case (or those in `only`) `runs` times; print and return the medians.
    `warm=False` skips the untimed first runs (a smoke test of the benchmark itself)."""
    tmp = Path(tempfile.mkdtemp(prefix="agentscope_ctx_startup_"))
    try:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        env["HOME"] = str(tmp / "home")  # no user state is read or written
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: modules load from bytecode
        todo = cases(make_working_dir(tmp / "wd"))
        if only:
            todo = {k: v for k, v in todo.items() if k in only or k == "import agentscope"}
        times: dict[str, list[float]] = {name: [] for name in todo}
        for args in todo.values() if warm else ():
            _run(args, env)  # warm-up, untimed
        for _ in range(runs):
            for name, args in todo.items():
                times[name].append(_run(args, env))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(times["import agentscope"])
    from agentscope_ctx._line import AGENTSCOPE_VERSION

    print(
        f"start-up on AgentScope {AGENTSCOPE_VERSION}: a fresh interpreter per run, median of "
        f"{runs}; ratio = median / median of `python -c 'import agentscope'` (target <= "
        f"{TARGET:g}x)"
    )
    print(f"{'case':<22} {'median ms':>10} {'min ms':>8} {'ratio':>6}  ok")
    rows: dict[str, Any] = {}
    for name, values in times.items():
        median = statistics.median(values)
        ratio = median / base
        rows[name] = {
            "median_ms": round(median * 1000, 1),
            "min_ms": round(min(values) * 1000, 1),
            "ratio": round(ratio, 2),
            "meets_target": ratio <= TARGET,
        }
        ok = "yes" if ratio <= TARGET else "NO"
        print(f"{name:<22} {median * 1000:>10.1f} {min(values) * 1000:>8.1f} {ratio:>5.2f}x  {ok}")
    return {"agentscope": AGENTSCOPE_VERSION, "runs": runs, "target": TARGET, "cases": rows}


def options(argv: Sequence[str]) -> dict[str, Any]:
    """`main`'s keyword arguments from the command line's options (this module's, and those
    after ``startup`` in ``python -m benchmarks startup ...``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per case (default 7)")
    parser.add_argument("only", nargs="*", help="cases to run (default: all)")
    opts = parser.parse_args(argv)
    return {"runs": opts.runs, "only": opts.only or None}


if __name__ == "__main__":
    main(**options(sys.argv[1:]))
