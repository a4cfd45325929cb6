"""The two-worker harness (issue 23, Done-when): two worker processes alternate the replies
of one long scripted session, SIGKILLed at random points, then both check the session.

    stats = run_trials(tmp_path, states=..., store=LOCAL, trials=3, seed=1)

The two worker processes live across trials (a fleet serves many sessions); each is forked
from one preloaded interpreter (tests/fleet/spawner.py), so that a replacement after a kill
costs milliseconds, not an interpreter's start-up. A trial: a new
session; one worker runs turn 0, the other turn 1, and so on (`TURN`); when a
trial draws a kill, the worker running the turn is SIGKILLed after a random delay (within
the time a turn takes) and replaced by a new process; the other worker then runs the next
turn, which is the killed one again when its state was not saved. At the end each worker
checks the session from where it stands (`CHECK`, tests/fleet/checks.py), and the driver
asserts (`assert_session`): every user message exactly once; every tool call and every
tool result exactly once across state and dialog store, after the whole session (each run of
a turn makes calls with ids of its own, as a provider's model would: a killed attempt's calls
that reached the stores are kept, once, beside the replay's), none of an attempt that did not
run, no result without its call, and each turn's last attempt complete; no call without its
result in the context; nothing twice in the dialog store or in the live messages; the
summary intact; every notice in the prompt read back byte for byte and every fact found with
`search_history`, from either worker, both seeing the same history; every prompt within
budget.

The store is the one parameter that names where the workers' agentscope_ctx data lives
(`Store`): `LOCAL`, files and SQLite in a `working_dir` both workers share; a database store
(`postgres_store`) gives each worker a `working_dir` of its own, so that nothing reaches the
other worker but through the store. `PRIVATE_DIRS` is the control: local stores the workers
do not share, which the checks must refuse.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fleet.script import call_id, parse_call_id, user_id
from tests.fleet.session import Spec, line_session
from tests.fleet.spawner import Spawner

TURN_TIMEOUT = 180.0
TARGETED_SHARE = 0.5
"""Of the kills a trial draws, the share aimed at the write-ahead window (`TURNKILL`: the
worker kills itself right after a dialog append) rather than at a random moment."""
ENDED = "<ended>"


@dataclass(frozen=True)
class Store:
    """Where the workers keep what leaves the context (dialog, outputs, search index).

    `fields(trial_root)`: the `ContextConfig` fields of one trial's store (a fresh one per
    trial); ``{worker}`` in `working_dir` is the worker's process id (tests/fleet/script.py
    `worker_fields`). `env`: what the worker processes need in their environment (the
    variable holding a database password; never in the fields)."""

    name: str
    fields: Callable[[Path], dict[str, Any]]
    env: dict[str, str] = field(default_factory=dict)


LOCAL = Store("local", lambda root: {"working_dir": str(root / "ctx")})
"""Today's store: files + SQLite under a `working_dir` the workers share."""

PRIVATE_DIRS = Store("private-dirs", lambda root: {"working_dir": str(root / "ctx-{worker}")})
"""Local stores the workers do not share: the harness's control (its checks must fail)."""

PASSWORD_ENV = "AGENTSCOPE_CTX_FLEET_PGPASSWORD"


def postgres_store(dsn: str, password: str) -> Store:
    """The PostgreSQL store (`store: {kind: postgres}`) on the server `dsn` (no password in
    it): a schema of its own per trial, the password in the workers' environment, a private
    `working_dir` per worker."""

    def fields(root: Path) -> dict[str, Any]:
        schema = f"fleet_{uuid.uuid4().hex[:12]}"
        return {
            "store": {"kind": "postgres", "dsn": dsn, "password_env": PASSWORD_ENV,
                      "schema_name": schema},
            "working_dir": str(root / "worker-{worker}"),
        }  # fmt: skip

    return Store("postgres", fields, env={PASSWORD_ENV: password})


@dataclass
class Stats:
    trials: int = 0
    turns: int = 0
    kills: int = 0
    targeted_kills: int = 0
    """Kills right after a dialog append (the worker's own SIGKILL: `TURNKILL`)."""
    finished_before_kill: int = 0
    replays: int = 0
    """Turns run again after a kill."""
    in_both: int = 0
    """Messages live in the final state and in the dialog store too, counted once (one id:
    one message): the current user turn and pins, written with the older part by design
    (core/compaction/_compaction.py), and what a killed worker archived before the state that keeps
    them was saved."""
    notices: int = 0
    facts: int = 0
    prompts: int = 0
    max_prompt: int = 0
    seconds: float = 0.0
    turn_seconds: list[float] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"fleet trials={self.trials} turns={self.turns} kills={self.kills} "
            f"targeted_kills={self.targeted_kills} "
            f"finished_before_kill={self.finished_before_kill} replays={self.replays} "
            f"in_both={self.in_both} notices_read={self.notices} facts_found={self.facts} "
            f"prompts={self.prompts} max_prompt={self.max_prompt} seconds={self.seconds:.1f} "
            f"turn_p50={_typical(self) / 1.2:.2f}s"
        )


class WorkerProcess:
    """A worker process (`tests.fleet.worker`'s loop, forked by `spawner`) and a thread
    reading its lines."""

    def __init__(self, spawner: Spawner) -> None:
        self.log = spawner.log
        self.pid, stdin, stdout = spawner.spawn()
        self.stdin = os.fdopen(stdin, "w")
        self.stdout = os.fdopen(stdout, "r")
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.ended = threading.Event()
        """Set at end of file on its stdout: the process is gone."""
        self.ready = False
        """Whether READY was read (the first command waits for it)."""
        threading.Thread(target=self._read, daemon=True).start()

    def _wait_ready(self) -> None:
        if self.ready:
            return
        ready = self.read(TURN_TIMEOUT)
        if ready != "READY":
            self.kill()
            raise AssertionError(f"worker did not start: {ready!r}\n{self.log.read_text()[-3000:]}")
        self.ready = True

    def _read(self) -> None:
        for line in self.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)
        self.ended.set()

    def read(self, timeout: float, *, end_ok: bool = False) -> str | None:
        """The next line; None when none came within `timeout` seconds; `ENDED` when the
        worker ended, if `end_ok`.

        Raises:
            AssertionError: the worker ended (and not `end_ok`).
        """
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            if end_ok:
                self.lines.put(None)  # (still ended for the next read)
                return ENDED
            raise AssertionError(f"worker ended\n{self.log.read_text()[-3000:]}")
        return line

    def send(self, command: str) -> None:
        self._wait_ready()
        self.stdin.write(command + "\n")
        self.stdin.flush()

    def kill(self) -> None:
        """SIGKILL, then wait until it is gone."""
        if not self.ended.is_set():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not self.ended.wait(TURN_TIMEOUT):
            raise AssertionError(f"worker {self.pid} did not end after SIGKILL")
        self._close()

    def stop(self) -> None:
        """End of file on its stdin (its loop ends), or SIGKILL after 30 s."""
        try:
            self.stdin.close()
        except OSError:
            pass  # (it is gone)
        if not self.ended.wait(30):
            self.kill()
        self._close()

    def _close(self) -> None:
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except OSError:
                pass


def run_trial(
    root: Path,
    state: Any,
    store: Store,
    rng: random.Random,
    stats: Stats,
    workers: list[WorkerProcess],
    spawner: Spawner,
    *,
    turns: int,
    steps: int,
    kill_chance: float,
    max_kills: int,
) -> None:
    """One session served by `workers` (two; a killed one is replaced in the list)."""
    root.mkdir(parents=True, exist_ok=True)
    spec = Spec(store=store.fields(root), files=str(root / "files"), state=state)
    spec.turns, spec.steps = turns, steps
    spec.session_id = asyncio.run(line_session().create_session(spec))
    raw = spec.to_json()
    log = workers[0].log
    attempts: dict[int, list[str]] = {}
    """Each turn's attempts (their ids, in order): the last one is the one that counts."""
    kills = 0
    current = rng.randrange(2)
    while True:
        worker = workers[current]
        kill = kills < max_kills and rng.random() < kill_chance
        appends = rng.randint(1, 2) if kill and rng.random() < TARGETED_SHARE else 0
        worker.send(f"TURNKILL {appends} {raw}" if appends else f"TURN {raw}")
        line = worker.read(TURN_TIMEOUT)
        if line == "OVER":
            break
        assert line is not None and line.startswith("START "), line
        _, number, attempt = line.split()
        turn = int(number)
        attempts.setdefault(turn, []).append(attempt)
        stats.replays += len(attempts[turn]) > 1
        started = time.monotonic()
        if appends:  # it kills itself after that many dialog appends, if the turn has them
            line = worker.read(TURN_TIMEOUT, end_ok=True)
        else:
            wait = rng.uniform(0.0, _typical(stats)) if kill else TURN_TIMEOUT
            line = worker.read(wait)
        if kill and line in (None, ENDED):
            worker.kill()
            kills += 1
            stats.kills += 1
            stats.targeted_kills += line == ENDED
            workers[current] = WorkerProcess(spawner)
        else:
            if line is None:
                line = worker.read(TURN_TIMEOUT)
            assert line == f"SAVED {turn}", f"{line!r}\n{log.read_text()[-3000:]}"
            stats.turns += 1
            stats.finished_before_kill += kill
            if not kill:
                stats.turn_seconds.append(time.monotonic() - started)
        current = 1 - current
    results = []
    for worker in workers:
        worker.send(f"CHECK {raw}")
        line = worker.read(TURN_TIMEOUT)
        assert line is not None and line.startswith("CHECKED "), line
        results.append(json.loads(line[len("CHECKED ") :]))
    assert_session(results, attempts, turns, steps, stats)
    prompts = [int(x) for x in (root / "prompts.log").read_text().split()]
    over = [p for p in prompts if p > spec.budget]
    assert not over, f"prompts over the budget of {spec.budget}: {over}"
    stats.prompts += len(prompts)
    stats.max_prompt = max([stats.max_prompt, *prompts])
    stats.trials += 1


def _typical(stats: Stats) -> float:
    """About how long a turn takes (kills are drawn within it)."""
    done = sorted(stats.turn_seconds)
    return 1.2 * done[len(done) // 2] if done else 1.0


def assert_session(
    results: list[dict[str, Any]],
    attempts: dict[int, list[str]],
    turns: int,
    steps: int,
    stats: Stats,
) -> None:
    for result in results:
        assert "error" not in result, result.get("error")
        assert result["turns_done"] == turns, result["turns_done"]
        assert not result["dialog_duplicates"], result["dialog_duplicates"]
        assert not result["live_duplicates"], result["live_duplicates"]
        for where in ("dialog", "history"):  # (history: the dialog, then the live messages)
            wrong = result[f"{where}_out_of_order"]
            assert not wrong, f"{where} out of the conversation's order: {wrong}"
        users = result["users"]
        assert users == {user_id(t): 1 for t in range(turns)}, users
        assert not result["live_unanswered"], f"calls without results: {result['live_unanswered']}"
        _assert_exactly_once(result, attempts, turns, steps)
        assert not result["facts_missing"], result["facts_missing"][:3]
        summary = result["summary"]
        assert "## Goal" in summary and "## Next Steps" in summary, summary[:500]
        shown = result["summary_shown"]  # (`summary_max_share`: its writer's text cut)
        assert shown in result["state_summary"], "the summary shown is not the summary kept"
    first, second = results
    for key in (
        "users",
        "calls",
        "results",
        "dialog",
        "live",
        "summary",
        "summary_shown",
        "notices",
    ):
        assert first[key] == second[key], f"the workers see different {key}"
    stats.in_both += results[0]["in_both"]
    stats.notices += sum(r["notices"] for r in results)
    stats.facts += sum(r["facts_found"] for r in results)


def _assert_exactly_once(
    result: dict[str, Any], attempts: dict[int, list[str]], turns: int, steps: int
) -> None:
    """Across state and dialog store, after the whole session: every tool call and every
    result exactly once (a killed attempt's too: its calls carry ids of their own), none of
    an attempt that did not run, no result without its call; and the attempt that counts
    (each turn's last) has all its calls and results."""
    calls, answers, copies = result["calls"], result["results"], result["copies"]
    for name, counts in (("call", calls), ("result", answers)):
        for key, count in counts.items():
            assert count == 1, f"{name} {key} {count} times: {copies.get(f'{name} {key}')}"
            turn, _, attempt = parse_call_id(key)
            assert attempt in attempts.get(turn, []), f"{name} {key} of no attempt: {attempts}"
    assert set(answers) <= set(calls), f"results without calls: {set(answers) - set(calls)}"
    for turn in range(turns):
        last = attempts[turn][-1]
        for step in range(steps):
            key = call_id(turn, step, last)
            assert key in calls and key in answers, f"{key} (turn {turn}'s last attempt) lost"


def run_trials(
    tmp_path: Path,
    states: list[Any],
    store: Store,
    *,
    trials: int,
    seed: int,
    turns: int = 6,
    steps: int = 5,
    kill_chance: float = 0.5,
    max_kills: int = 3,
) -> Stats:
    rng = random.Random(seed)
    stats = Stats()
    started = time.monotonic()
    tmp_path.mkdir(parents=True, exist_ok=True)
    spawner = Spawner(tmp_path / "workers.log", env=store.env)
    workers = [WorkerProcess(spawner), WorkerProcess(spawner)]  # live across trials (a fleet)
    try:
        for trial in range(trials):
            state = states[trial % len(states)]
            run_trial(
                tmp_path / f"trial{trial}",
                state(trial) if callable(state) else state,
                store,
                rng,
                stats,
                workers,
                spawner,
                turns=turns,
                steps=steps,
                kill_chance=kill_chance,
                max_kills=max_kills,
            )
    finally:
        for worker in workers:
            worker.stop()
        spawner.stop()
    stats.seconds = time.monotonic() - started
    return stats
