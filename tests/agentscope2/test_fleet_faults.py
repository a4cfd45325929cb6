"""Issue 23 item 4 on 2.x: the database goes away mid-session (its server is stopped between
two tool calls) and comes back. While it is away the agent goes on: an output that cannot be
saved stays whole in the context (nothing is cut that is not stored), the failure is logged
once, not at every step; once the server is back, the outputs left whole are saved and cut
(retried before a later model call), and every notice reads back byte for byte."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from agentscope.agent import Agent
from agentscope.message import TextBlock, ToolResultBlock, UserMsg
from agentscope.tool import FunctionTool, Toolkit

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.core.truncation._truncation import parse_notice
from tests.fleet.conftest import (  # noqa: F401 (fixtures)
    _pg_module_server,
    pg_password,
    pg_private_server,
    pg_schema,
)
from tests.fleet.pg_config import PASSWORD_ENV
from tests.fleet.postgres_server import PASSWORD, PostgresServer
from tests.support.chain import follow_chain
from tests.support.fakes import ALLOW, FakeChatModel, tool_call

STEPS = 6
DOWN, UP = 2, 4
"""The server stops before the output of step `DOWN` and starts again before `UP`'s."""


def _log(n: int) -> str:
    return "".join(f"10:{i % 60:02d} worker-{n} job={i} status=ok\n" for i in range(200))


def _outputs(agent: Agent) -> dict[str, str]:
    out = {}
    for msg in agent.state.context:
        for block in msg.content:
            if isinstance(block, ToolResultBlock):
                output = block.output
                out[block.id] = (
                    output
                    if isinstance(output, str)
                    else "".join(b.text for b in output if isinstance(b, TextBlock))
                )
    return out


def _reader(
    tmp_path: Path,
    server: PostgresServer,
    schema: str,
    down: int,
    up: int,
    max_input_tokens: int,
    tool_result: dict[str, object],
    answers: list[object],
) -> tuple[ContextManager, FakeChatModel, Agent]:
    """A log reader whose `cat` stops `server` before log `down` and starts it again before
    log `up`; its context manager on the server's store (in `schema`: the module's tests share
    the server), retrying at every step (the breaker: test_pg_breaker); its model scripted
    with `answers`."""

    def cat(n: int) -> str:
        """Print log n.

        Args:
            n (int): which log.
        """
        if n == down:
            server.halt()
        if n == up:
            server.resume()
        return _log(n)

    config = ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "w"),
            "max_input_tokens": max_input_tokens,
            "tool_result": tool_result,
            "summarizer": {"enabled": False},
            "store": {
                "kind": "postgres",
                "dsn": server.dsn,
                "schema_name": schema,
                "password_env": PASSWORD_ENV,
                "connect_timeout_seconds": 2,
                "retry_seconds": 0,
            },
        }
    )
    manager = ContextManager(config)
    model = FakeChatModel(answers, default="All read.")
    agent = Agent(
        name="reader",
        system_prompt="You read logs.",
        model=model,
        toolkit=Toolkit(tools=[FunctionTool(cat, permission=ALLOW, is_read_only=True)]),
        middlewares=[manager.middleware()],
    )
    return manager, model, agent


async def test_an_unreachable_database_keeps_outputs_whole_logs_once_and_retries(
    tmp_path: Path,
    pg_private_server: PostgresServer,  # noqa: F811
    pg_schema: str,  # noqa: F811
    pg_password: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    while_down: dict[str, str] = {}
    steps = [tool_call("cat", f"c{n}", n=n) for n in range(STEPS)]

    def look(n: int) -> Callable[[list[object]], object]:
        def answer(messages: list[object]) -> object:
            if DOWN <= n < UP:  # the outputs made while the server is down, as the model saw them
                while_down.update({k: v for k, v in _outputs(agent).items() if k != f"c{n}"})
            return steps[n]

        return answer

    manager, _, agent = _reader(
        tmp_path,
        pg_private_server,
        pg_schema,
        DOWN,
        UP,
        30_000,
        {"recent_max_bytes": 2_000, "old_max_bytes": 1_200},
        [look(n) for n in range(STEPS)],
    )
    with caplog.at_level(logging.DEBUG, logger="agentscope_ctx"):
        await agent.reply(UserMsg(name="user", content="Read logs 0 to 5."))
    await manager.close()

    # the agent went on to the end
    assert agent.state.context[-1].role == "assistant"
    # while the server was down, the outputs made then stayed whole in the context
    assert while_down.get(f"c{DOWN}") == _log(DOWN), while_down.get(f"c{DOWN}", "")[:300]
    # logged once (at ERROR), the repeats at DEBUG only, and the recovery
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len([r for r in errors if "keeping tool output whole" in r.getMessage()]) == 1, [
        r.getMessage()[:200] for r in errors
    ]
    assert any("works again" in r.getMessage() for r in caplog.records)
    # once it was back, the outputs left whole were saved and cut: every one reads back
    outputs = _outputs(agent)

    async def read(path: str, line: int, offset: int) -> str:
        response = await manager.reader.read_file(path, line, offset)
        return "".join(b.text for b in response.content if isinstance(b, TextBlock))

    for n in range(STEPS):
        output = outputs[f"c{n}"]
        parsed = parse_notice(output)
        assert parsed is not None, f"output {n} was never saved and cut: {output[:200]!r}"
        assert parsed[1].file_path.startswith("pg-output:")
        assert await follow_chain(output, read) == _log(n)


async def test_a_compaction_while_the_database_is_away_removes_nothing_until_it_is_stored(
    tmp_path: Path,
    pg_private_server: PostgresServer,  # noqa: F811
    pg_schema: str,  # noqa: F811
    pg_password: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Compactions due while the server is stopped keep the older messages (not shown, not
    removed); once it is back, a later compaction stores them, then removes them: every
    message the model was sent is in the agent's state or in the database, none lost."""
    steps = 10
    manager, model, agent = _reader(
        tmp_path,
        pg_private_server,
        pg_schema,
        1,
        7,
        5_000,
        {
            "recent_max_bytes": 2_000,
            "old_max_bytes": 1_200,
            "mask_after": None,
            "recent_max_share": None,
        },
        [tool_call("cat", f"c{n}", n=n) for n in range(steps)],
    )
    with caplog.at_level(logging.ERROR, logger="agentscope_ctx"):
        await agent.reply(UserMsg(name="user", content="Read logs 0 to 9."))
    await manager.close()

    assert agent.state.context[-1].role == "assistant"  # the agent went on
    kept_back = [r for r in caplog.records if "messages kept in memory" in r.getMessage()]
    assert len(kept_back) == 1, [r.getMessage()[:200] for r in caplog.records]
    prompts = [str(call["messages"]) for call in model.calls]  # the guide says where they go
    assert any(
        "not yet in pg-dialog:YYYY-MM-DD" in p and "the database works" in p for p in prompts
    )
    assert all(PASSWORD not in r.getMessage() for r in caplog.records)
    from agentscope_ctx.agentscope2._entries import to_entries

    seen: set[str] = set()
    for call in model.calls:
        for msg in call["messages"][1:]:
            if "compact_summary" in str(msg.content):
                continue
            seen.update(entry.id for entry, _ in to_entries(msg))
    kept = {entry.id for msg in agent.state.context for entry, _ in to_entries(msg)}
    saved = manager.dialog.ids()
    assert saved, "once the server was back, a compaction stored the older messages"
    assert seen <= kept | saved, seen - kept - saved
