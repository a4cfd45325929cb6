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
from ._scripted import Move, Observation, Step, answer, call, follow, say

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
        why = "First, how big are the logs?"
        return say(why, call("run_shell", command="wc -l logs/app/*.log logs/db/*.log"))

    def grep_errors(obs: Observation) -> Move:
        seen["survey"] = obs.last_tool_text.strip().splitlines()[-1:]
        total = obs.find(r"^\s*(\d+) total", "many")
        why = f"{total} lines in all: too many to read. Every ERROR line first, with its place."
        return say(why, call("run_shell", command="grep -rn ERROR logs"))

    def keep_reading(obs: Observation) -> Move:
        why = "The output was cut and saved whole; reading on where the notice says."
        return say(why, follow(obs, call("run_shell", command="grep -rc ERROR logs")))

    def filter_noise(obs: Observation) -> Move:
        why = (
            "Most ERROR lines so far are '(transient, retried)' timeouts and resets: noise. "
            "Filtering them out to see what is left."
        )
        command = "grep -rn ERROR logs | grep -v transient | head -20"
        return say(why, call("run_shell", command=command))

    def open_worker(obs: Observation) -> Move:
        line = _line_of(obs, "logs/app/worker-03.log", 1)
        seen["worker_line"] = line
        seen["error"] = obs.find(r"worker-03\.log:\d+:(.*Disk quota exceeded[^\n]*)")
        why = (
            f"One failure is not transient: worker-03.log line {line}: {seen['error'][-90:]}. "
            "Reading it in place, with the lines around it."
        )
        start = max(1, line - 3)
        return say(why, call("read_file", file_path="logs/app/worker-03.log", start_line=start))

    def trace(obs: Observation) -> Move:
        trace_id = obs.find(r"trace_id=(\w+)", TRACE)
        seen["trace"] = trace_id
        why = (
            "A traceback from ledger/index.py: the ledger index could not be written. "
            f"Following trace_id={trace_id} into the database logs."
        )
        return say(why, call("run_shell", command=f"grep -rn trace_id={trace_id} logs/db"))

    def tail_db(obs: Observation) -> Move:
        seen["db_line"] = _line_of(obs, "logs/db/postgres.log", 1)
        why = (
            f"postgres logged the same trace at line {seen['db_line']}. What did the database "
            "do afterwards?"
        )
        return say(why, call("run_shell", command="tail -n 3000 logs/db/postgres.log"))

    def read_db(obs: Observation) -> Move:
        why = "Nothing more on that trace at the end. Reading the postgres lines of the trace."
        start = max(1, seen["db_line"] - 2)
        return say(why, call("read_file", file_path="logs/db/postgres.log", start_line=start))

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
        why = "Checking the newest entries of worker-03's log."
        return say(why, call("run_shell", command="tail -n 2500 logs/app/worker-03.log"))

    def follow_tail(obs: Observation) -> Move:
        why = "Cut again; reading on to the end of the file."
        fallback = call("run_shell", command="grep -c quota logs/app/worker-03.log")
        return say(why, follow(obs, fallback))

    def count_quota(obs: Observation) -> Move:
        why = "The quota errors go on to the end. How many in all?"
        command = "grep -c 'Disk quota exceeded' logs/app/worker-03.log"
        return say(why, call("run_shell", command=command))

    def note(obs: Observation) -> Move:
        seen["count"] = obs.find(r"^(\d+)", "several")
        why = "Noting the incident and the lesson in today's notes."
        return say(
            why,
            call(
                "log_today",
                note="Incident 2026-11-28: checkout failed because worker-03 ledger-sync hit "
                "`Disk quota exceeded` on cache/ledger (postgres: No space left on device, same "
                "volume /var/lib/ledger). Lesson: filter out '(transient, retried)' ERROR lines "
                "first, then follow the trace_id across services.",
            ),
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
        *_postmortem(seen),
    ]


def _postmortem(seen: dict[str, Any]) -> list[list[Step]]:
    """Turns 3 to 5: the incident report and its revision (the conversation itself grows
    past what the cheap rungs can relieve: a model compaction moves the investigation to
    dialog/), then a question about a detail of the investigation, which has left the
    context: the agent finds it with search_history."""
    quota = "'Disk quota exceeded' logs/app/worker-03.log"

    def shell(key: str, command: str, why: str) -> Step:
        def step(obs: Observation) -> Move:
            _keep(seen, obs)
            seen["next"] = key
            return say(why, call("run_shell", command=command))

        return step

    def read_on(obs: Observation) -> Move:
        _keep(seen, obs)
        seen["next"] = "api-more"
        why = "The output is cut; reading on where the notice says."
        return say(why, follow(obs, call("run_shell", command="wc -l logs/app/api-01.log")))

    def report(obs: Observation) -> Move:
        _keep(seen, obs)
        return answer(_report(seen, detailed=False))

    def revised(obs: Observation) -> Move:
        _keep(seen, obs)
        return answer(_report(seen, detailed=True))

    def search(obs: Observation) -> Move:
        why = (
            "The database findings are from the start of the investigation, which has been "
            "compacted: my summary has them only in brief. Searching the history for the "
            "exact words."
        )
        query = "postgres disk space volume"
        return say(why, call("search_history", query=query, role="assistant"))

    def quote(obs: Observation) -> Move:
        found = obs.find(r"(logs/db/postgres\.log line \d+: [^\n]*)")
        where = obs.find(r"read on: read_file (file_path=\S+ start_line=\d+)")
        if not found:
            return answer("I could not find it in the history; grep logs/db again.")
        return answer(
            f"From my earlier findings (search_history, {where}):\n{found}\n"
            "So the storage team should look at /var/lib/ledger, which cache/ledger shares."
        )

    report_turn: list[Step] = [
        shell("first", f"grep -n {quota} | head -3", "For the timeline: the first quota errors."),
        shell("last", f"grep -n {quota} | tail -3", "And the last ones."),
        shell("paused", "grep -rn 'queue paused' logs", "When was the checkout queue paused?"),
        shell("db", "grep -n 'No space left' logs/db/postgres.log", "The database side."),
        shell("api", "tail -n 1500 logs/app/api-01.log", "Impact: what the API did meanwhile."),
        read_on,
        shell("slow", "grep -c 'slow query' logs/app/api-01.log", "How many slow queries?"),
        report,
    ]
    revision_turn: list[Step] = [
        shell("checkpoint", "grep -n 'checkpoint' logs/db/postgres.log", "Detection first."),
        shell("retries", "grep -c 'retry failed' logs/app/worker-03.log", "Retries so far?"),
        shell("hosts", "grep -c 'ledger' logs/app/api-01.log logs/app/api-02.log", "Spread?"),
        revised,
    ]

    def drafts(obs: Observation) -> Move:
        _keep(seen, obs)
        return answer(_drafts(seen))

    update_turn: list[Step] = [
        shell("queue", "grep -rc 'queue paused' logs/app", "Is the queue still paused?"),
        shell("resumed", "grep -c 'GET /v1/checkout' logs/app/api-02.log", "Checkouts today?"),
        drafts,
    ]
    return [report_turn, revision_turn, update_turn, [search, quote]]


def _keep(seen: dict[str, Any], obs: Observation) -> None:
    """Note the last tool result under the key of the call that made it."""
    key = seen.pop("next", None)
    if key is not None:
        seen[f"out:{key}"] = obs.last_tool_text.strip()


def _lines(seen: dict[str, Any], key: str, limit: int = 3) -> list[str]:
    text = str(seen.get(f"out:{key}", ""))
    return [line for line in text.splitlines() if line.strip()][:limit] or ["(nothing found)"]


def _drafts(seen: dict[str, Any]) -> str:
    """The status-page update and the chat message, from the findings."""
    first = _lines(seen, "first", 1)[0]
    return "\n".join(
        [
            "## Status page",
            "**Checkout degraded (resolved pending fix).** From 03:29 UTC on 2026-11-28, many "
            "checkouts failed or hung: a storage volume shared by the order ledger and the "
            "database ran out of space. The checkout queue was paused to protect order data; "
            "no order was lost. We are freeing space, raising the quota, and will replay the "
            "paused checkouts. Next update within the hour.",
            "",
            "## Slack, #incidents",
            "Checkout outage 2026-11-28 03:29 UTC: worker-03 ledger-sync hit `Disk quota "
            "exceeded` on cache/ledger (first: "
            f"`{first}`); postgres hit `No space left on device` on the same volume "
            "(/var/lib/ledger). Queue paused, no data loss. Actions: free space + raise quota "
            "(storage team), replay paused checkouts (payments), alert at 80% (SRE). "
            f"Today's checkout requests on api-02 so far: {_lines(seen, 'resumed', 1)[0]}; "
            f"'queue paused' lines per log: {', '.join(_lines(seen, 'queue', 3))}.",
        ]
    )


def _report(seen: dict[str, Any], *, detailed: bool) -> str:
    """The incident report, written from what the tools returned."""
    first, last = _lines(seen, "first", 1)[0], _lines(seen, "last", 3)[-1]
    parts = [
        "# Incident report: checkout outage, 2026-11-28",
        "",
        "## Summary",
        "Checkout failed for many users from about 03:29 UTC: worker-03's ledger-sync could "
        "not write its index (`OSError: [Errno 122] Disk quota exceeded`), which paused the "
        "checkout queue. postgres hit `No space left on device` on the same volume at the same "
        "minute.",
        "",
        "## Timeline (UTC, from the logs)",
        f"- first quota error: `{first}`",
        f"- checkout queue paused: `{_lines(seen, 'paused', 1)[0]}`",
        f"- postgres: `{_lines(seen, 'db', 1)[0]}`",
        f"- last quota error (still failing at the end of the logs): `{last}`",
    ]
    if detailed:
        parts += ["", "## Detection", "Nothing alerted on the volume; users reported it. Logs:"]
        parts += [f"- `{line}`" for line in _lines(seen, "checkpoint", 4)]
        parts += [f"- `{line}`" for line in _lines(seen, "first", 3)]
        parts += ["The last quota errors, at the end of the logs:"]
        parts += [f"- `{line}`" for line in _lines(seen, "last", 3)]
        parts += [
            f"- ledger-sync retries that failed: {_lines(seen, 'retries', 1)[0]}",
            f"- API lines naming the ledger (per host): {', '.join(_lines(seen, 'hosts', 2))}",
        ]
    parts += [
        "",
        "## Impact",
        "Every checkout after 03:29 waited on the paused queue; the API served other routes "
        f"normally (only transient, retried errors; {_lines(seen, 'slow', 1)[0]} slow queries "
        "on api-01, as usual).",
        "",
        "## Root cause",
        "cache/ledger and postgres share /var/lib/ledger; the ledger index outgrew the "
        "volume's quota.",
        "",
        "## Fix and follow-ups",
        "- free space on /var/lib/ledger and raise the quota;",
        "- resume the checkout queue and replay the paused checkouts;",
        "- alert on the volume's usage at 80%;",
        "- move cache/ledger to its own volume.",
    ]
    return "\n".join(parts)


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
            "Write the incident report for the postmortem: timeline, impact, root cause, fix.",
            "Add a Detection section with the exact log lines, and how far the retries got.",
            "Draft the status-page update and a short message for #incidents.",
            "Before I page the storage team: what exactly did postgres report, and on which "
            "volume?",
        ],
        turns=_plan(),
    )
