"""Demo "logs" — the log detective.

A few megabytes of service logs (deterministic random) hide one real failure among many
transient, retried errors. The agent greps, follows truncation notices with `read_file`,
reads the buried lines in place and tails the database log, well past its token budget.
"""

from __future__ import annotations

import asyncio
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..tools import ShellTool
from ._runner import DemoSetup
from ._scripted import Move, Observation, Step, answer, call, follow

__all__ = ["generate_logs", "setup"]

TRACE = "7f3a9c2e"
_PATHS = ["/v1/cart", "/v1/orders", "/v1/checkout", "/v1/users/me", "/v1/catalog", "/healthz"]
_NOISE = [
    "upstream timeout talking to inventory-svc (transient, retried)",
    "connection reset by peer: redis-2:6379 (transient, retried)",
    "rate limited by payments-sandbox (transient, retried)",
]


def _stamp(start: datetime, i: int, n: int) -> str:
    moment = start + timedelta(seconds=6 * 3600 * i / n)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{i % 1000:03d}Z"


def _service_lines(rng: random.Random, host: str, n: int, start: datetime) -> list[str]:
    lines = []
    for i in range(n):
        stamp = _stamp(start, i, n)
        roll = rng.random()
        req = f"req={rng.getrandbits(48):012x}"
        if roll < 0.012:
            lines.append(f"{stamp} ERROR [{host}] {req} {rng.choice(_NOISE)}")
        elif roll < 0.05:
            lines.append(f"{stamp} WARN  [{host}] {req} slow query {rng.randint(300, 2500)}ms")
        else:
            path = rng.choice(_PATHS)
            lines.append(
                f"{stamp} INFO  [{host}] {req} GET {path} 200 {rng.randint(2, 180)}ms "
                f"user={rng.randint(1000, 99999)}"
            )
    return lines


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def generate_logs(root: Path, *, seed: int = 20261128, scale: float = 1.0) -> dict[str, Any]:
    """Write the log tree under `root/logs` and return where the failure is buried."""
    rng = random.Random(seed)
    start = datetime(2026, 11, 28, 0, 0, 0)
    n = int(9_000 * scale)
    facts: dict[str, Any] = {}
    for host in ("api-01", "api-02"):
        _write(root / "logs" / "app" / f"{host}.log", _service_lines(rng, host, n, start))
    worker = _service_lines(rng, "worker-03", n, start)
    at = int(n * 0.58)  # about 03:29, deep in the file
    stamp = _stamp(start, at, n)
    worker[at:at] = [
        f"{stamp} ERROR [worker-03] trace_id={TRACE} ledger-sync failed: OSError: [Errno 122] "
        "Disk quota exceeded: 'cache/ledger/2026-11-28.idx'",
        "Traceback (most recent call last):",
        '  File "/srv/worker/ledger/sync.py", line 214, in flush_index',
        "    index.write(batch)",
        '  File "/srv/worker/ledger/index.py", line 88, in write',
        "    self._fh.write(encoded)",
        "OSError: [Errno 122] Disk quota exceeded",
        f"{stamp} WARN  [worker-03] trace_id={TRACE} checkout queue paused: ledger not writable",
    ]
    facts["worker_line"] = at + 1
    for k in range(40):  # the failure keeps coming back after the first one
        j = at + 8 + int((n - at - 10) * k / 40)
        worker.insert(
            j,
            f"{_stamp(start, j, n)} ERROR [worker-03] trace_id={TRACE} ledger-sync retry "
            "failed: OSError: [Errno 122] Disk quota exceeded",
        )
    _write(root / "logs" / "app" / "worker-03.log", worker)
    db = _service_lines(rng, "postgres", int(n * 0.8), start)
    db_at = int(len(db) * 0.58)
    db[db_at:db_at] = [
        f"{_stamp(start, db_at, len(db))} LOG   [postgres] trace_id={TRACE} checkpoint starting: "
        "time",
        f"{_stamp(start, db_at, len(db))} ERROR [postgres] trace_id={TRACE} could not extend "
        'file "base/16384/24576.7": No space left on device',
        f"{_stamp(start, db_at, len(db))} HINT  [postgres] Check free disk space on volume "
        "/var/lib/ledger (shared with cache/ledger).",
    ]
    facts["db_line"] = db_at + 2
    _write(root / "logs" / "db" / "postgres.log", db)
    return facts


def _line_of(obs: Observation, file: str, default: int) -> int:
    found = obs.find(rf"{file}:(\d+):")
    return int(found) if found else default


def _plan() -> list[list[Step]]:
    seen: dict[str, Any] = {}

    def survey(obs: Observation) -> Move:
        return call("run_shell", command="wc -l logs/app/*.log logs/db/*.log")

    def grep_errors(obs: Observation) -> Move:
        seen["survey"] = obs.last_tool_text.strip().splitlines()[-1:]
        return call("run_shell", command="grep -rn ERROR logs")

    def keep_reading(obs: Observation) -> Move:
        return follow(obs, call("run_shell", command="grep -rc ERROR logs"))

    def filter_noise(obs: Observation) -> Move:
        return call("run_shell", command="grep -rn ERROR logs | grep -v transient | head -20")

    def open_worker(obs: Observation) -> Move:
        line = _line_of(obs, "logs/app/worker-03.log", 1)
        seen["worker_line"] = line
        seen["error"] = obs.find(r"worker-03\.log:\d+:(.*Disk quota exceeded[^\n]*)")
        return call("read_file", file_path="logs/app/worker-03.log", start_line=max(1, line - 3))

    def trace(obs: Observation) -> Move:
        trace_id = obs.find(r"trace_id=(\w+)", TRACE)
        seen["trace"] = trace_id
        return call("run_shell", command=f"grep -rn trace_id={trace_id} logs/db")

    def tail_db(obs: Observation) -> Move:
        seen["db_line"] = _line_of(obs, "logs/db/postgres.log", 1)
        return call("run_shell", command="tail -n 3000 logs/db/postgres.log")

    def read_db(obs: Observation) -> Move:
        return call(
            "read_file", file_path="logs/db/postgres.log", start_line=max(1, seen["db_line"] - 2)
        )

    def conclude(obs: Observation) -> Move:
        hint = obs.find(r"HINT[^\n]*\] (.*)", "check the disk space of the ledger volume")
        return answer(
            "Root cause found.\n"
            f"- logs/app/worker-03.log line {seen.get('worker_line')}: ledger-sync failed with "
            "`OSError: [Errno 122] Disk quota exceeded: 'cache/ledger/2026-11-28.idx'` "
            f"(trace_id={seen.get('trace')}), which paused the checkout queue.\n"
            f"- logs/db/postgres.log line {seen.get('db_line')}: `could not extend file ...: "
            f"No space left on device` for the same trace. {hint}\n"
            "- The ~1% other ERROR lines are transient, retried upstream timeouts: noise.\n"
            "Fix: free space on /var/lib/ledger (cache/ledger shares the volume) and raise the "
            "quota; then resume the checkout queue."
        )

    def tail_worker(obs: Observation) -> Move:
        return call("run_shell", command="tail -n 2500 logs/app/worker-03.log")

    def follow_tail(obs: Observation) -> Move:
        return follow(obs, call("run_shell", command="grep -c quota logs/app/worker-03.log"))

    def count_quota(obs: Observation) -> Move:
        return call("run_shell", command="grep -c 'Disk quota exceeded' logs/app/worker-03.log")

    def note(obs: Observation) -> Move:
        seen["count"] = obs.find(r"^(\d+)", "several")
        return call(
            "log_today",
            note="Incident 2026-11-28: checkout failed because worker-03 ledger-sync hit "
            "`Disk quota exceeded` on cache/ledger (postgres: No space left on device, same "
            "volume /var/lib/ledger). Lesson: filter out '(transient, retried)' ERROR lines "
            "first, then follow the trace_id across services.",
        )

    def still(obs: Observation) -> Move:
        count = seen["count"]
        return answer(
            f"Yes: worker-03 logged `Disk quota exceeded` {count} times, the last ones near the "
            "end of the file (retries of ledger-sync), so the volume is still full. The earlier "
            "findings (worker-03 line "
            f"{seen.get('worker_line')}, postgres line {seen.get('db_line')}) stay readable: "
            "the full outputs are saved, and search_history finds them."
        )

    return [
        [
            survey,
            grep_errors,
            keep_reading,
            keep_reading,
            filter_noise,
            open_worker,
            trace,
            tail_db,
            keep_reading,
            read_db,
            conclude,
        ],
        [tail_worker, follow_tail, count_quota, note, still],
    ]


async def setup(working_dir: Path) -> DemoSetup:
    """Generate the logs in `working_dir` and return the demo."""
    facts = await asyncio.to_thread(generate_logs, working_dir)
    shell = ShellTool(working_dir)
    total = sum(p.stat().st_size for p in (working_dir / "logs").rglob("*.log"))
    return DemoSetup(
        title=(
            f"log detective: {total / 1e6:.1f} MB of logs in {working_dir / 'logs'}; the real "
            f"failure is buried at worker-03.log line {facts['worker_line']}"
        ),
        sys_prompt=(
            "You are an SRE investigating an incident. Use run_shell (grep, tail, wc, ...) on "
            "the logs/ directory and read_file to read files or truncated outputs further. "
            "Cite file names, line numbers and exact error messages."
        ),
        tools=[shell.run_shell],
        prompts=[
            "Checkout failed for many users last night around 03:30. Find the root cause in "
            "./logs.",
            "Is it still happening? Check the newest worker-03 entries.",
        ],
        turns=_plan(),
    )
