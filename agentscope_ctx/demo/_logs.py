"""Demo "logs" — the log detective.

A few megabytes of service logs (deterministic random) hide one real failure among many
transient, retried errors. The agent greps, follows truncation notices with `read_file`,
reads the buried lines in place and tails the database log, well past its token budget.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ..tools import ShellTool
from ._logs_data import TRACE, generate_logs
from ._logs_report import drafts as write_drafts
from ._logs_report import report as write_report
from ._runner import DemoSetup
from ._scripted import Move, Observation, Step, answer, call, follow, say

__all__ = ["generate_logs", "setup"]


def _line_of(obs: Observation, file: str, default: int, *, error: bool = False) -> int:
    """The first line of `file` a `grep -n` output shows (with `error`, its first ERROR line:
    the trace's first postgres line is a checkpoint, the error is the next one)."""
    found = obs.find(rf"{file}:(\d+):" + (r"[^\n]* ERROR " if error else ""))
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
        seen["db_line"] = _line_of(obs, "logs/db/postgres.log", 1, error=True)
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
        return answer(write_report(seen, detailed=False))

    def revised(obs: Observation) -> Move:
        _keep(seen, obs)
        return answer(write_report(seen, detailed=True))

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
        return answer(write_drafts(seen))

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
