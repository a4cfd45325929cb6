"""Everything under a working_dir is private to its owner (issue #19, item 2).

With the usual umask 022 a plain `mkdir` makes 755 and a plain `open` 644: another local user
could read the dialog, the saved outputs, the memory and the search index. These tests run a
real session on the installed AgentScope line (a 1.x `ReActAgent` or a 2.x `Agent`, real
`Toolkit`, a scripted model): truncated outputs, compaction to `dialog/`, the Summarizer,
`remember` and `log_today`, `search_history`, the usage file, then the CLI in other processes
(consolidation, a search after the index was damaged: a rebuilt index); and walk the working
dir, live and at the end, checking the mode of every file and directory.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.core._private import file_lock, private_dir, write_atomic
from agentscope_ctx.core._runner import tool_text
from agentscope_ctx.memory._consolidation import consolidate
from tests.support.fakes import NOTED_SUMMARY, FakeChatModel, text, tool_call
from tests.support.forked import Forker
from tests.support.lines import IS_1X

SECRET = "sk-live-7f3a9c"


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    """The usual umask, whatever the test runner's (subprocesses inherit it)."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def loose(root: Path, *, include_root: bool = True) -> list[str]:
    """Every path under `root` (and `root`) that a user other than the owner may access."""
    found = []
    paths = [root] if include_root else []
    paths += sorted(root.rglob("*"))
    for path in paths:
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:  # gone since listed (a temporary file of the text index)
            continue
        if stat.S_ISLNK(mode):
            continue
        if stat.S_IMODE(mode) & 0o077:
            found.append(f"{path.relative_to(root.parent)} {stat.S_IMODE(mode):o}")
    return found


def _unreachable(working_dir: Path, found: str) -> bool:
    """Whether a loose path `found` (as `loose` names it) is a file the text index is writing
    inside its private (``0700``) directory, which no other user can enter. Tantivy makes its
    files with the process's umask, which the package leaves alone (it is every thread's);
    they are made ``0600`` after each commit: the walk at the end, after `close`, checks it."""
    path = working_dir.parent / found.rsplit(" ", 1)[0]
    parent = path.parent
    return (
        parent.parent == working_dir / "index"
        and parent.name.startswith("tantivy-")
        and stat.S_IMODE(parent.lstat().st_mode) == 0o700
    )


# -- the primitives ------------------------------------------------------------------------


def test_private_dir_creates_every_missing_level_0700(tmp_path: Path) -> None:
    private_dir(tmp_path / "a" / "b" / "c")
    for path in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_private_dir_tightens_an_existing_dir_and_its_files(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    folder.mkdir(mode=0o755)
    (folder / "a.txt").write_text("secret")
    (folder / "b.txt").write_text("secret")
    os.chmod(folder / "b.txt", 0o664)
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours")
    os.symlink(outside, folder / "link")
    private_dir(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "a.txt").stat().st_mode) == 0o600
    assert stat.S_IMODE((folder / "b.txt").stat().st_mode) == 0o600
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644  # a link is not followed


def test_write_atomic_and_lock_files_are_0600(tmp_path: Path) -> None:
    write_atomic(tmp_path / "f.json", "{}")
    with file_lock(tmp_path / ".lock"):
        pass
    assert stat.S_IMODE((tmp_path / "f.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / ".lock").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "f.json"]  # no temporary


# -- a real session ------------------------------------------------------------------------


@tool_text
def dump(part: int) -> str:
    """Print a long report.

    Args:
        part: Which part of the report.
    """
    return "".join(f"part {part} line {i}: deploy with {SECRET} ok\n" for i in range(300))


def _helper_answer(messages: Any) -> Any:
    """The Compactor's summary, or the Summarizer's steps: append a note, then say so."""
    seen = json.dumps(messages, default=str, ensure_ascii=False)
    if "long-term memory of an AI agent" not in seen:
        return NOTED_SUMMARY
    if "Appended" in seen or "Nothing appended" in seen:
        return text("Recorded one fact.")
    note = f"{date.today().isoformat()}.md"
    return tool_call("write_memory_file", file_path=note, content=f"- Fact: key {SECRET}")


def _script() -> list[Any]:
    steps: list[Any] = [tool_call("dump", f"d{i}", part=i) for i in range(8)]
    steps += [
        tool_call("remember", "r1", fact=f"The deploy key is {SECRET}"),
        tool_call("log_today", "l1", note="Deployed with the key"),
        tool_call("search_history", "s1", query="deploy"),
        text("Done."),
    ]
    return steps


def _config(working_dir: Path) -> ContextConfig:
    return ContextConfig.model_validate(
        {
            "working_dir": str(working_dir),
            "max_input_tokens": 6_000,
            "tool_result": {"recent_n": 2, "recent_max_bytes": 3_000, "old_max_bytes": 1_024},
            "summarizer": {"min_batch_tokens": 0},
            "token_counter": "cl100k_base",
        }
    )


async def _session(working_dir: Path, live: list[str]) -> None:
    """One reply of a real agent with the manager attached; `live` gets the loose paths
    seen while the manager (and its search index) is still open."""
    helper = FakeChatModel(default=_helper_answer)
    model = FakeChatModel(_script(), default="Done.")
    if IS_1X:
        from agentscope.agent import ReActAgent
        from agentscope.formatter import OpenAIChatFormatter
        from agentscope.message import Msg
        from agentscope.tool import Toolkit

        from agentscope_ctx import AtomicJSONSession

        manager = ContextManager(
            _config(working_dir), model=helper, formatter=OpenAIChatFormatter()
        )
        toolkit = Toolkit()
        toolkit.register_tool_function(dump)
        agent = ReActAgent(
            name="worker",
            sys_prompt="You deploy.",
            model=model,
            formatter=OpenAIChatFormatter(),
            toolkit=toolkit,
            max_iters=20,
        )
        agent.set_console_output_enabled(False)
        manager.attach(agent)
        await agent(Msg("user", "Deploy it.", "user"))
        await manager.compact(agent)
        sessions = working_dir.parent / "sessions"  # the user's choice, outside working_dir
        await AtomicJSONSession(save_dir=str(sessions)).save_session_state("s1", worker=agent)
        assert loose(sessions) == [] and [p.name for p in sessions.iterdir()] == ["s1.json"]
    else:
        from agentscope.agent import Agent
        from agentscope.message import UserMsg
        from agentscope.tool import Toolkit

        from agentscope_ctx.agentscope2._tools import function_tool

        manager = ContextManager(_config(working_dir), model=helper)
        agent = Agent(
            name="worker",
            system_prompt="You deploy.",
            model=model,
            toolkit=Toolkit(tools=[function_tool(dump, read_only=True)]),
            middlewares=[manager.middleware()],
        )
        async for _ in agent.reply_stream(UserMsg(name="user", content="Deploy it.")):
            pass
        await manager.compact(agent)
    live.extend(p for p in loose(working_dir) if not _unreachable(working_dir, p))
    live.append("wal seen" if list(working_dir.glob("index/*-wal")) else "")
    await manager.close()


_OTHER_PROCESS = """
import os, sys
from pathlib import Path
from agentscope_ctx.cli import main

os.umask(0o022)  # the usual one, whatever the forking process's

working_dir = Path(sys.argv[1])
assert main(["consolidate", str(working_dir)]) == 0
for db in working_dir.glob("index/search-*.sqlite3"):  # damaged: the search rebuilds it
    db.write_bytes(b"this is not a database" * 100)
assert main(["search", str(working_dir), "deploy"]) == 0
"""


def _other_process(working_dir: Path, forker: Forker) -> None:
    """The CLI in another process (forked after ``import agentscope``, `tests/support/forked.py`):
    a consolidation, then a search after the index database was damaged (so the index is
    rebuilt)."""
    done = forker.run(["-c", _OTHER_PROCESS, str(working_dir)], cwd=working_dir.parent)
    assert done.returncode == 0, done.stderr
    assert "rebuilding" in done.stderr  # the damaged index was replaced


def _check_session_wrote_everything(working_dir: Path) -> None:
    names = {str(p.relative_to(working_dir)) for p in working_dir.rglob("*")}
    today = date.today().isoformat()
    for expected in (
        f"dialog/{today}.jsonl",
        "dialog/.lock",
        "index/current",
        "index/.lock",
        "memory/MEMORY.md",
        f"memory/{today}.md",
        "memory/.lock",
        "memory/.consolidate.lock",
        "memory/.consolidate.json",
        "usage/worker.",  # usage/worker.<hash>.json: the agent (no session), hashed
    ):
        assert expected in names or any(n.startswith(expected) for n in names), expected
    assert any(n.startswith("tool_result/") for n in names)
    assert any(n.startswith("index/search-") and n.endswith(".sqlite3") for n in names)
    assert SECRET in (working_dir / "memory" / f"{today}.md").read_text()  # the Summarizer's


async def test_a_session_leaves_nothing_readable_by_others(tmp_path: Path, forker: Forker) -> None:
    working_dir = tmp_path / "ctx"  # made by the package
    live: list[str] = []
    await _session(working_dir, live)
    _other_process(working_dir, forker)
    assert [p for p in live if p and p != "wal seen"] == []
    assert loose(working_dir) == []
    assert "wal seen" in live  # the live walk saw SQLite's own files
    _check_session_wrote_everything(working_dir)


async def test_files_made_earlier_with_looser_modes_are_tightened(tmp_path: Path) -> None:
    working_dir = tmp_path / "ctx"
    await _session(working_dir, [])
    await consolidate(working_dir)
    for path in [working_dir, *working_dir.rglob("*")]:  # as an older version left them
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    assert len(loose(working_dir)) > 20

    live: list[str] = []
    await _session(working_dir, live)
    # The working dir itself was not made by the package: it is left as it is (it may be a
    # shared project directory); everything the package keeps in it is private.
    assert loose(working_dir, include_root=False) == []
    assert stat.S_IMODE(working_dir.stat().st_mode) == 0o755


def test_a_new_manager_tightens_the_stores_an_older_version_left_open(tmp_path: Path) -> None:
    working_dir = tmp_path / "ctx"
    (working_dir / "tool_result").mkdir(parents=True, mode=0o755)
    (working_dir / "tool_result" / "old.txt").write_text(SECRET)
    os.chmod(working_dir / "tool_result", 0o755)
    ContextManager(_config(working_dir))
    assert loose(working_dir, include_root=False) == []
    assert [p.name for p in working_dir.iterdir()] == ["tool_result"]  # nothing made
