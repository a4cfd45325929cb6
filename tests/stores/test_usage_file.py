"""``usage/`` records are kept per agent AND session (issue 31 item 8: ``usage/{agent}.json``
let two apps' agents named "assistant" overwrite each other's record)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.cli import main
from agentscope_ctx.stores._usage_file import read_usage, usage_path, write_usage
from tests.support.lines import IS_1X


async def _one_reply(name: str, config: ContextConfig) -> None:
    """A real agent of the installed line, named `name`, answers once with the manager
    attached (a scripted model)."""
    manager = ContextManager(config)
    try:
        if IS_1X:
            from agentscope.agent import ReActAgent
            from agentscope.formatter import OpenAIChatFormatter
            from agentscope.message import Msg
            from agentscope.tool import Toolkit

            from tests.support.fakes import FakeChatModel

            agent = ReActAgent(
                name=name,
                sys_prompt="s",
                model=FakeChatModel(),
                formatter=OpenAIChatFormatter(),
                toolkit=Toolkit(),
            )
            agent.set_console_output_enabled(False)
            manager.attach(agent)
            await agent(Msg("user", "hello", "user"))
        else:
            from agentscope.agent import Agent
            from agentscope.message import UserMsg
            from agentscope.tool import Toolkit as Toolkit2

            from tests.support.fakes import FakeChatModel

            agent2 = Agent(name=name, system_prompt="s", model=FakeChatModel(), toolkit=Toolkit2())
            manager.attach(agent2)
            await agent2.reply(UserMsg(name="user", content="hello"))
    finally:
        await manager.close()


async def test_i31_two_apps_agents_of_one_name_keep_their_own_records(tmp_path: Path) -> None:
    working_dir = tmp_path / "wd"
    for session in ("app-a", "app-b"):
        config = ContextConfig(working_dir=working_dir, recall={"session": session})
        await _one_reply("assistant", config)
    records = read_usage(working_dir)
    assert [(r["agent"], r["session"]) for r in records] == [
        ("assistant", "app-a"),
        ("assistant", "app-b"),
    ]
    assert all(r["prompt_tokens"] > 0 for r in records)
    files = [p for p in (working_dir / "usage").iterdir() if p.is_file()]  # (steps/: viewer's)
    assert len(files) == 2


def test_i31_inspect_shows_each_session_and_reads_older_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    working_dir = tmp_path / "wd"
    (working_dir / "usage").mkdir(parents=True)
    old = {"v": 1, "agent": "assistant", "updated": "2026-12-01T08:00:00+00:00"}
    legacy = working_dir / "usage" / "assistant.json"  # an older version's file
    legacy.write_text(json.dumps({**old, "prompt_tokens": 111, "max_input_tokens": 9000}))
    legacy_other = working_dir / "usage" / "helper.json"
    legacy_other.write_text(json.dumps({**old, "agent": "helper", "prompt_tokens": 222}))
    assert [r["prompt_tokens"] for r in read_usage(working_dir)] == [111, 222]
    write_usage(working_dir, "assistant", {"prompt_tokens": 333, "max_input_tokens": 9000})
    write_usage(
        working_dir, "assistant", {"prompt_tokens": 444, "max_input_tokens": 9000}, session="s1"
    )
    records = read_usage(working_dir)  # the newer record of (assistant, no session) wins
    assert [(r["agent"], r.get("session"), r["prompt_tokens"]) for r in records] == [
        ("assistant", None, 333),
        ("assistant", "s1", 444),
        ("helper", None, 222),
    ]
    assert main(["inspect", str(working_dir)]) == 0
    out = capsys.readouterr().out
    assert "agent assistant: context 333 of 9,000 tokens" in out
    assert "agent assistant (session s1): context 444 of 9,000 tokens" in out
    assert "agent helper: context 222 of 0 tokens" in out


names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=300)


@settings(max_examples=200)
@given(agent=names, session=st.none() | names, other=names)
@example(agent="../../etc/passwd", session="a/../../b\x00c", other="..")
@example(agent="a/b", session=None, other="a_b")  # reduced alike, still apart
@example(agent="x", session="", other="x")  # an empty session is not "no session"
@example(agent="000" + "𝋠" * 5 + "𝍠" * 4 + "𝐀" * 10 + "𝕊" * 10, session="00" + "𝕊" * 30, other="0")
def test_i31_a_usage_file_name_stays_in_usage_and_apart(
    agent: str, session: str | None, other: str
) -> None:
    root = Path("/wd")
    path = usage_path(root, agent, session)
    assert path.parent == root / "usage" and path.suffix == ".json"
    assert "/" not in path.name and "\x00" not in path.name and not path.name.startswith(".")
    assert len(path.name.encode("utf-8")) <= 255
    assert path != usage_path(root, other, session) or other == agent
    assert path != usage_path(root, agent, "other:" + (session or ""))


def test_a_worker_keeps_the_records_of_the_sessions_it_served_last(tmp_path: Path) -> None:
    """Issue 46 item 17: a record per session ever served, 1,000 at 1,000 sessions; now the
    256 written last (`MAX_RECORDS`), a session that comes back written again."""
    most = 256
    served = most + 50
    for n in range(served):
        write_usage(tmp_path, "assistant", {"prompt_tokens": n}, session=f"s{n}")
    write_usage(tmp_path, "assistant", {"prompt_tokens": 0}, session="s0")  # it comes back
    assert len(list((tmp_path / "usage").glob("*.json"))) == most
    kept = {record["session"] for record in read_usage(tmp_path)}
    assert kept == {"s0"} | {f"s{n}" for n in range(51, served)}
