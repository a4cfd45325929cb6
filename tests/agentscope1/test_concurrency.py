"""Concurrency: several agents and several processes on one working_dir.

- agents as asyncio tasks (each with its own ContextManager, or one manager shared by all) and
  processes (tests/support/crash_session.py, two agents each) share one working_dir: dialog/ has no
  torn or interleaved line, every message is stored exactly once (dialog/ + memory, in the
  order it was added, per agent); every truncation notice names a file of its own that holds
  exactly that tool output (followed with `read_file` to the end);
- `consolidate` never runs twice at once: a run that finds the lock held reports `skipped`;
  runs that do not overlap serialise, and the later one merges nothing new.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.dialog_order import dialog_then_live
from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("ContextManager on ReActAgents and consolidation as a 1.x agent"),
        allow_module_level=True,
    )

from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg

from agentscope_ctx import ContextManager
from agentscope_ctx.core.tokens._tokens import TokenCounter
from agentscope_ctx.memory._consolidation import consolidate
from agentscope_ctx.services._cleanup import forget
from agentscope_ctx.stores._dialog import DialogStore
from tests.support.consolidate_proc import MODEL_ANSWER, SlowModel
from tests.support.crash_checks import check_notices, duplicates
from tests.support.crash_session import (
    DONE_TEXT,
    SESSION_ID,
    id_log_path,
    make_agent,
    make_config,
    read_id_log,
    restore,
    run_one,
    script_turn,
)
from tests.support.fakes import FakeChatModel

REPO = Path(__file__).resolve().parents[2]


class _YieldingModel(FakeChatModel):
    """Gives the event loop a turn at every call, so that the agents' steps interleave."""

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.001)
        return await super().__call__(*args, **kwargs)


def _runs(owners: list[int]) -> int:
    """How many runs of consecutive equal items `owners` has (interleaving shows as many)."""
    return sum(1 for i, owner in enumerate(owners) if i == 0 or owners[i - 1] != owner)


class _ListLog:
    def __init__(self) -> None:
        self.ids: list[str] = []

    def log(self, msg_id: str) -> None:
        if msg_id not in self.ids:
            self.ids.append(msg_id)


def _spy(memory: Any, log: _ListLog) -> None:
    original_add = memory.add

    async def spy_add(memories: Any, *args: Any, **kwargs: Any) -> None:
        for msg in [memories] if isinstance(memories, Msg) else memories or []:
            log.log(msg.id)
        await original_add(memories, *args, **kwargs)

    memory.add = spy_add


def _check_dialog(working_dir: Path) -> tuple[list[Msg], dict[str, int]]:
    stored, report = DialogStore(working_dir).read()
    assert report.bad_lines == [], f"torn or interleaved dialog lines: {report.bad_lines}"
    ids = [m.id for m in stored]
    assert not duplicates(ids), f"dialog/ holds ids twice: {duplicates(ids)}"
    for path in (working_dir / "dialog").glob("*.jsonl"):
        for line in path.read_bytes().splitlines():  # one whole record per line
            assert line.startswith(b'{"v": 1, "msg": {') and line.endswith(b"}"), line[:80]
            assert isinstance(json.loads(line)["msg"], dict), line[:80]
    return stored, {msg_id: i for i, msg_id in enumerate(ids)}


def _check_agent(added: list[str], stored: list[Msg], live: list[Msg]) -> None:
    """This agent's messages: each exactly once, dialog/ first then memory, in added order."""
    mine = set(added)
    in_dialog = [m for m in stored if m.id in mine]
    assert dialog_then_live(in_dialog, live) == added
    assert in_dialog, "no compaction happened: the test checks nothing"


async def _run_tasks(working_dir: Path, n_agents: int, *, shared: bool) -> None:
    counter = TokenCounter("cl100k_base")
    shared_manager = ContextManager(make_config(working_dir), token_counter=counter)
    agents, managers, logs, models = [], [], [], []
    for i in range(n_agents):
        model = _YieldingModel()
        agent = make_agent(model, name=f"worker{i}")
        manager = (
            shared_manager
            if shared
            else ContextManager(make_config(working_dir), token_counter=counter)
        )
        log = _ListLog()
        _spy(manager.attach(agent), log)
        agents.append(agent)
        managers.append(manager)
        logs.append(log)
        models.append(model)

    async def session(i: int) -> None:
        for turn in range(3):
            script_turn(models[i], turn, 8, tag=f"t{i}-")
            reply = await agents[i](Msg("user", f"task {turn}", "user"))
            assert reply.get_text_content() == DONE_TEXT.format(turn=turn)

    await asyncio.gather(*(session(i) for i in range(n_agents)))
    stored, _ = _check_dialog(working_dir)
    all_files: set[str] = set()
    for agent, manager, log in zip(agents, managers, logs, strict=True):
        live = manager.memory_of(agent).messages()
        _check_agent(log.ids, stored, live)
        followed, files = await check_notices(manager, live, stored)
        assert followed > 0
        assert not files & all_files, "two agents' notices point to one tool_result file"
        all_files |= files
    owner = {msg_id: i for i, log in enumerate(logs) for msg_id in log.ids}
    runs = _runs([owner[m.id] for m in stored])
    assert runs > 2 * n_agents, f"the agents did not interleave their dialog appends ({runs})"
    for manager in {id(m): m for m in managers}.values():
        await manager.close()


async def test_agents_as_tasks_with_own_managers(tmp_path: Path) -> None:
    await _run_tasks(tmp_path / "wd", 4, shared=False)


async def test_agents_as_tasks_with_one_shared_manager(tmp_path: Path) -> None:
    await _run_tasks(tmp_path / "wd", 4, shared=True)


def spawn(module: str, arguments: list[str], log: Path) -> subprocess.Popen[str]:
    """`python -m module arguments` on this worktree's package; its stdout piped, its stderr
    into `log`."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *arguments],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.mark.slow  # subprocesses: several processes on one working_dir (in-process twins: test_agents_as_tasks_*; cross-process locking: test_dialog.py::test_two_processes_append_concurrently)
def test_processes_share_one_working_dir(tmp_path: Path) -> None:
    working_dir = tmp_path / "wd"
    n_procs, n_agents, turns = 3, 2, 4
    procs = [
        spawn(
            "tests.support.crash_session",
            [
                str(working_dir),
                f"--turns={turns}",
                "--steps=8",
                f"--agents={n_agents}",
                f"--prefix=p{k}",
            ],
            tmp_path / f"p{k}.log",
        )
        for k in range(n_procs)
    ]
    for k, proc in enumerate(procs):
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "DONE" in out, (tmp_path / f"p{k}.log").read_text()[-3000:]

    asyncio.run(_check_sessions(working_dir, n_procs, n_agents, turns))


async def _check_sessions(working_dir: Path, n_procs: int, n_agents: int, turns: int) -> None:
    stored, _ = _check_dialog(working_dir)
    counter = TokenCounter("cl100k_base")
    all_files: set[str] = set()
    everyone: set[str] = set()
    for k in range(n_procs):
        for i in range(n_agents):
            session_id = f"p{k}{SESSION_ID}{i}"
            ids = read_id_log(id_log_path(working_dir, session_id))
            agent, manager, progress = await restore(working_dir, session_id, counter=counter)
            assert progress.turn == turns and progress.ids_logged == len(ids)
            live = manager.memory_of(agent).messages()
            _check_agent(ids, stored, live)
            followed, files = await check_notices(manager, live, stored)
            assert followed > 0
            assert not files & all_files, "two agents' notices point to one tool_result file"
            all_files |= files
            everyone |= set(ids)
            await manager.close()
    assert {m.id for m in stored} <= everyone, "dialog/ holds a message nobody added"


# -- consolidation -------------------------------------------------------------------------


def _write_notes(working_dir: Path) -> None:
    memory_dir = working_dir / "memory"
    memory_dir.mkdir(parents=True)
    today = date.today()
    for back, lines in ((1, ["the user prefers pytest"]), (0, ["run ruff before committing"])):
        day = (today - timedelta(days=back)).isoformat()
        body = "".join(f"- {line}\n" for line in lines)
        (memory_dir / f"{day}.md").write_text(f"# {day}\n\n{body}", encoding="utf-8")


def _run_procs(working_dir: Path, tmp_path: Path, n: int, extra: list[str]) -> list[dict[str, Any]]:
    go = tmp_path / "go"
    procs = [
        spawn(
            "tests.support.consolidate_proc",
            [str(working_dir), str(go), *extra],
            tmp_path / f"c{k}.log",
        )
        for k in range(n)
    ]
    for proc in procs:  # every process is ready (imports done): release them together
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    go.touch()
    reports = []
    for k, proc in enumerate(procs):
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, (tmp_path / f"c{k}.log").read_text()[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def _check_memory_md(working_dir: Path) -> None:
    text = (working_dir / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    bullets = [
        line for line in text.split("## Change log")[0].splitlines() if line.startswith("- ")
    ]
    assert sorted(bullets) == ["- run ruff before committing", "- the user prefers pytest"]
    log = text.split("## Change log")[1].strip().splitlines()
    assert len(log) == 1, f"consolidation logged more than one merge: {log}"


@pytest.mark.slow  # subprocesses (in-process twin: test_consolidation_as_two_tasks_in_one_process)
def test_consolidation_in_two_processes_at_once_one_is_skipped(tmp_path: Path) -> None:
    """The model takes 1.5 s: the first run holds the lock all that time, the other skips."""
    working_dir = tmp_path / "wd"
    _write_notes(working_dir)
    reports = _run_procs(working_dir, tmp_path, 2, ["--model-delay=1.5"])
    skipped = [r for r in reports if r["skipped"]]
    ran = [r for r in reports if not r["skipped"]]
    assert len(skipped) == 1 and len(ran) == 1, reports
    assert ran[0]["source"] == "model" and ran[0]["changed"] and len(ran[0]["notes"]) == 2
    assert skipped[0]["reason"] == "another consolidation is running"
    _check_memory_md(working_dir)


@pytest.mark.slow  # subprocesses
def test_consolidation_in_processes_never_merges_twice(tmp_path: Path) -> None:
    """Extractive runs are quick: they either skip or serialise; the merge happens once."""
    working_dir = tmp_path / "wd"
    _write_notes(working_dir)
    reports = _run_procs(working_dir, tmp_path, 3, [])
    merged = [r for r in reports if r["notes"]]
    assert len(merged) == 1, reports
    for report in reports:
        if report is not merged[0]:
            assert report["skipped"] or (not report["changed"] and report["added"] == 0), report
    _check_memory_md(working_dir)


async def test_consolidation_as_two_tasks_in_one_process(tmp_path: Path) -> None:
    """flock locks open files, not processes: two tasks of one event loop exclude each other."""
    _write_notes(tmp_path)
    model = SlowModel(0.5, MODEL_ANSWER)

    started = time.monotonic()
    first, second = await asyncio.gather(
        consolidate(tmp_path, model=model, formatter=OpenAIChatFormatter()),
        consolidate(tmp_path, model=model, formatter=OpenAIChatFormatter()),
    )
    assert sorted([first.skipped, second.skipped]) == [False, True], (first, second)
    assert time.monotonic() - started < 5
    _check_memory_md(tmp_path)
    again = await consolidate(tmp_path)  # afterwards: serialised, nothing new
    assert not again.skipped and again.notes == () and not again.changed
    _check_memory_md(tmp_path)


async def test_another_manager_does_not_delete_files_a_live_agent_points_to(
    tmp_path: Path,
) -> None:
    working_dir = tmp_path / "wd"
    counter = TokenCounter("cl100k_base")
    await run_one(working_dir, "crash", 1, 4, counter)
    # process A: the session, restored and live (e.g. a long-running agent)
    agent, manager, _ = await restore(working_dir, counter=counter)
    live = manager.memory_of(agent).messages()
    stored, _ = DialogStore(working_dir).read()
    followed, files = await check_notices(manager, live, stored)
    assert followed > 0
    # its files grow older than retention_days while it lives
    eight_days_ago = time.time() - 8 * 86_400
    for path in files:
        os.utime(path, (eight_days_ago, eight_days_ago))
    # a live agent keeps working: its hourly cleanup marks the files it points to as used
    forget()  # an hour has passed
    await manager._run(agent)
    orphan = working_dir / "tool_result" / "0123456789abcdef0123456789abcdef.txt"
    orphan.write_text("nobody points here\n")
    os.utime(orphan, (eight_days_ago, eight_days_ago))
    # process B: another manager on the same working_dir runs its cleanup
    other = ContextManager(make_config(working_dir), token_counter=counter)
    other_agent = make_agent(FakeChatModel(), name="other")
    other.attach(other_agent)
    forget()  # (a process of its own cleans up on its own clock)
    await other._run(other_agent)
    missing = [path for path in files if not Path(path).exists()]
    assert not missing, f"{len(missing)} files of a live agent deleted by another manager"
    assert not orphan.exists()  # expired and unreferenced: deleted
