"""`app_middlewares` on AgentScope 2.x's real app server, driven through HTTP
(`tests/support/app_server.py`: SQL session storage on SQLite, a scripted OpenAI-compatible model
server on loopback, a tool whose output is large). On the PostgreSQL store with RedisStorage:
`tests/fleet/test_app_factory_pg.py`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("aiosqlite")

from agentscope.tool import FunctionTool

from agentscope_ctx import ContextUsageError
from agentscope_ctx.agentscope2 import AppMiddlewares
from agentscope_ctx.core.truncation._truncation import parse_notice
from agentscope_ctx.recall._read_file import ReadFileError
from tests.support.app_server import App, build_log, config, running_app, texts, tool_text
from tests.support.fakes import ALLOW


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    with running_app(tmp_path, config(tmp_path)) as running:
        yield running


def test_two_users_one_agent_name_cut_saved_and_kept_apart(app: App) -> None:
    a_agent, a_session = app.setup("alice")
    b_agent, b_session = app.setup("bob")
    app.chat("alice", a_agent, a_session, "fetch the log")
    app.chat("bob", b_agent, b_session, "fetch the log")

    # cut and saved: the prompt the model got holds the notice, not the whole log
    answers = [r for r in app.server.requests if any(m["role"] == "tool" for m in r["messages"])]
    assert len(answers) == 2
    for who, request in zip(("alice", "bob"), answers, strict=True):
        sent = texts([m for m in request["messages"] if m["role"] == "tool"])
        assert f"of {who}" in sent and "line 1999 of" not in sent
        assert "read_file" in sent  # the notice: the rest is saved
    alice = app.factory.manager_for("alice", a_agent, a_session)
    bob = app.factory.manager_for("bob", b_agent, b_session)
    assert alice.backend is bob.backend  # one set of stores for the process
    assert alice.tenant_of("assistant").agent == "alice/assistant"

    # each reads its own saved output, and the other's reads as one that does not exist
    refs = {}
    for who, request in zip(("alice", "bob"), answers, strict=True):
        tool = next(m for m in request["messages"] if m["role"] == "tool")
        parsed = parse_notice(tool_text(tool))
        assert parsed is not None
        refs[who] = parsed[1].file_path
    mine = bob.reader_for("assistant").read_now(refs["bob"], 1999)
    assert "line 1998 of the build log of bob" in mine
    fake = refs["alice"][: -len("00000000.txt")] + "00000000.txt"
    with pytest.raises(ReadFileError) as theirs:
        bob.reader_for("assistant").read_now(refs["alice"], 1)
    with pytest.raises(ReadFileError) as missing:
        bob.reader_for("assistant").read_now(fake, 1)
    assert str(theirs.value) == str(missing.value).replace(fake, refs["alice"])
    assert "line 5 of the build log of alice" in alice.reader_for("assistant").read_now(
        refs["alice"], 1
    )


def test_a_second_turn_reuses_the_session_manager_and_logs_the_raise_once(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    agent_id, session_id = app.setup("carol")
    with caplog.at_level(logging.INFO, logger="agentscope_ctx"):
        app.chat("carol", agent_id, session_id, "hello")
        first = app.factory.manager_for("carol", agent_id, session_id)
        app.chat("carol", agent_id, session_id, "again")
    assert app.factory.manager_for("carol", agent_id, session_id) is first
    raised = [r for r in caplog.records if "raising the tool_result_limit" in r.getMessage()]
    assert len(raised) == 1


@pytest.fixture
def small_app(tmp_path: Path) -> Iterator[App]:
    """The app with a budget its 16 tools alone exceed: every prompt is too large."""
    with running_app(tmp_path, config(tmp_path, budget=3_000), tools=None) as running:
        yield running


def test_a_prompt_too_large_reaches_the_client_as_a_reply_it_can_show(small_app: App) -> None:
    agent_id, session_id = small_app.setup("dave")
    messages = small_app.chat("dave", agent_id, session_id, "hello")
    reply = messages[-1]
    assert reply["role"] == "assistant"
    text = texts(reply["content"])
    assert "does not fit its context budget" in text
    assert "3,000" in text or "3000" in text  # the reason, with the budget
    assert reply.get("error") is None
    # no chat call reached the model: the reply stood in for it
    assert not any("read_file" in texts(r.get("tools", [])) for r in small_app.server.requests)


def test_summaries_use_the_session_model_and_the_stores_close_with_the_app(
    tmp_path: Path,
) -> None:
    with running_app(tmp_path, config(tmp_path)) as app:
        factory = app.factory
        agent_id, session_id = app.setup("erin")
        app.chat("erin", agent_id, session_id, "hello")
        manager = factory.manager_for("erin", agent_id, session_id)
        assert manager.model is not None
        assert manager.model.model == "gpt-4o-mini"
        assert manager.compactor._model is manager.model
        assert factory._backend is not None
    assert factory._backend is None and not factory._managers  # closed with the app


@pytest.mark.slow
def test_a_slow_tools_result_delivered_later_is_cut_and_saved(tmp_path: Path) -> None:
    """The app's `ToolOffloadMiddleware` (outermost) answers a tool that runs over its 10 s
    with a placeholder and delivers the result later, as a hint through the inbox: the result
    it delivers is the one our middleware (innermost) cut, so the model never gets it whole."""

    async def slow_tools(user_id: str, agent_id: str, session_id: str) -> list[Any]:
        async def fetch_log() -> str:
            """Fetch the build log (slow)."""
            await asyncio.sleep(10.5)
            return build_log(user_id)

        return [FunctionTool(fetch_log, permission=ALLOW, is_read_only=True)]

    with running_app(tmp_path, config(tmp_path), tools=slow_tools) as app:
        agent_id, session_id = app.setup("frank")
        app.chat("frank", agent_id, session_id, "fetch the log")
        deadline = time.monotonic() + 60
        delivered: list[str] = []
        while time.monotonic() < deadline and not delivered:
            delivered = [
                text
                for request in list(app.server.requests)
                if "has completed" in (text := texts(request["messages"]))
            ]
            time.sleep(0.2)
    assert delivered, "the background result never reached the model"
    assert "line 5 of the build log of frank" in delivered[0]
    assert "line 1999 of" not in delivered[0]
    assert "read_file" in delivered[0]


async def test_an_evicted_sessions_manager_is_made_again_over_the_same_stores(
    tmp_path: Path,
) -> None:
    factory = AppMiddlewares(config(tmp_path), max_sessions=1)
    [first] = await factory("ann", "agent-1", "s1")
    old = factory.manager_for("ann", "agent-1", "s1")
    assert first is old.middleware()
    await factory("ann", "agent-1", "s2")  # s1 leaves the cache: its manager closes
    newer = factory.manager_for("ann", "agent-1", "s2")
    await asyncio.gather(*factory._closing)
    assert factory.manager_for("ann", "agent-1", "s1") is not old  # made again
    store = factory.manager_for("ann", "agent-1", "s1").backend.outputs("ann/a", "s1")
    ref = store.save("a saved output\n" * 10)
    chunks = store.read_saved(str(ref))
    assert chunks is not None and b"a saved output" in b"".join(chunks)
    assert newer.backend is factory.backend
    await factory.close()


def test_max_sessions_below_one_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ContextUsageError, match="max_sessions"):
        AppMiddlewares(config(tmp_path), max_sessions=0)
