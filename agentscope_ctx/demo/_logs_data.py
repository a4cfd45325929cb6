"""The log tree of the "logs" demo: a few megabytes of service logs (deterministic random)
hiding one real failure, with its trace id, among many transient, retried errors."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..core._private import private_dir, write_atomic

__all__ = ["TRACE", "generate_logs"]

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
    private_dir(path.parent)
    write_atomic(path, "\n".join(lines) + "\n")


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
