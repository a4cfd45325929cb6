"""Issue 23 end to end on 2.x: a real `Agent` whose manager is configured with
``store: {kind: postgres}`` (a private PostgreSQL server, see `tests/fleet`) works through a
session whose big outputs are cut and whose older messages are compacted; then a SECOND
manager and agent, on another working dir (another "worker": it shares nothing with the
first but the database), reads every notice of the first agent's context back byte for
byte, finds the first agent's outputs and messages with `search_history`, and reads the
day the summary's guide points to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentscope.agent import Agent
from agentscope.message import TextBlock, ToolCallBlock, ToolResultBlock, UserMsg
from agentscope.model import ChatResponse
from agentscope.tool import FunctionTool, Toolkit

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.core._truncation import parse_notice
from tests.fleet.conftest import pg_password, pg_schema, pg_server  # noqa: F401 (fixtures)
from tests.fleet.postgres_server import PostgresServer
from tests.support.chain import follow_chain
from tests.support.fakes import ALLOW, FakeChatModel, tool_call

FILES = 10


def _logs(folder: Path) -> dict[str, str]:
    folder.mkdir()
    out = {}
    for n in range(FILES):
        lines = [
            f"2026-12-03 10:{i % 60:02d} worker-{n} job={i} status=ok 用户 {i}\n"
            for i in range(300)
        ]
        lines[250] = f"2026-12-03 11:00 worker-{n} ERROR fluxgate{n} overheated at 97C\n"
        (folder / f"log{n}.txt").write_text("".join(lines), encoding="utf-8")
        out[f"log{n}.txt"] = "".join(lines)
    return out


def _config(
    work: Path, roots: list[Path], server: PostgresServer, schema: str, budget: int
) -> ContextConfig:
    return ContextConfig.model_validate(
        {
            "working_dir": str(work),
            "max_input_tokens": budget,
            "read_roots": [str(r) for r in roots],
            # no masking, no share cap: the older steps must be compacted away
            "tool_result": {
                "recent_max_bytes": 5_000,
                "old_max_bytes": 1_200,
                "mask_after": None,
                "recent_max_share": None,
            },
            "summarizer": {"enabled": False},
            "store": {
                "kind": "postgres",
                "dsn": server.dsn,
                "password_env": "AGENTSCOPE_CTX_TEST_PGPASSWORD",
                "schema_name": schema,
            },
        }
    )


def _tool_texts(agent: Agent) -> dict[str, str]:
    """Each tool result of the agent's context, by call id."""
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


def _step(n: int) -> ChatResponse:
    """Say why (text that only the dialog holds once compacted), then read log n."""
    call = tool_call("cat", f"c{n}", path=f"log{n}.txt").content[0]
    assert isinstance(call, ToolCallBlock)
    return ChatResponse(
        content=[TextBlock(text=f"Reading log {n} for the periwinkle{n} audit."), call],
        is_last=True,
    )


async def test_a_second_worker_reads_and_finds_what_the_first_saved_in_postgres(
    tmp_path: Path,
    pg_server: PostgresServer,  # noqa: F811 (the fixture imported above)
    pg_password: str,  # noqa: F811
    pg_schema: str,  # noqa: F811
) -> None:
    logs = _logs(tmp_path / "logs")

    def cat(path: str) -> str:
        """Print a log file.

        Args:
            path (str): the file name.
        """
        return logs[path]

    # -- worker A: reads every log in a 5k budget: outputs cut, older messages compacted
    config_a = _config(tmp_path / "a", [tmp_path / "logs"], pg_server, pg_schema, 5_000)
    model_a = FakeChatModel([_step(n) for n in range(FILES)], default="All logs read.")
    manager_a = ContextManager(config_a, model=FakeChatModel(default="## Goal\n- read logs"))
    agent_a = Agent(
        name="analyst",
        system_prompt="You read logs.",
        model=model_a,
        toolkit=Toolkit(tools=[FunctionTool(cat, permission=ALLOW, is_read_only=True)]),
        middlewares=[manager_a.middleware()],
    )
    await agent_a.reply(UserMsg(name="user", content="Read every log."))
    await manager_a.close()

    notices = {k: v for k, v in _tool_texts(agent_a).items() if parse_notice(v) is not None}
    assert notices, "the big outputs were cut"
    refs = {parse_notice(v)[1].file_path for v in notices.values()}  # type: ignore[index]
    assert all(ref.startswith("pg-output:") for ref in refs), refs
    assert not (tmp_path / "a" / "tool_result").exists()  # nothing went to A's disk
    assert not (tmp_path / "a" / "dialog").exists()
    assert manager_a.dialog.ids(), "compaction moved the older messages to the database"
    last_prompt = str(model_a.calls[-1]["messages"])
    assert "pg-dialog:YYYY-MM-DD" in last_prompt, "the summary's guide names the database's days"

    # -- worker B: another manager and agent, another working dir, the same database
    work_b = tmp_path / "b"
    manager_b = ContextManager(_config(work_b, [work_b], pg_server, pg_schema, 60_000))

    async def read(path: str, line: int, offset: int) -> str:
        response = await manager_b.reader.read_file(path, line, offset)
        return "".join(b.text for b in response.content if isinstance(b, TextBlock))

    for output in notices.values():  # every notice in A's context, byte for byte, from B
        assert await follow_chain(output, read) in logs.values()

    day = manager_b.dialog.days()[-1]
    ref = next(iter(sorted(refs)))
    model_b = FakeChatModel(
        [
            tool_call("read_file", "r1", file_path=ref, start_line=1),
            tool_call("search_history", "s1", query="fluxgate3 overheated"),
            tool_call("search_history", "s2", query="periwinkle0"),
            tool_call("read_file", "r2", file_path=f"pg-dialog:{day}", start_line=1),
        ],
        default="Found it.",
    )
    agent_b = Agent(
        name="analyst",
        system_prompt="You answer questions about the logs.",
        model=model_b,
        toolkit=Toolkit(),
        middlewares=[manager_b.middleware()],
    )
    await agent_b.reply(UserMsg(name="user", content="Which fluxgate overheated in log 3?"))
    answers = _tool_texts(agent_b)
    first = answers["r1"]
    assert any(log.startswith(first.split("\n<<<TRUNCATED>>>")[0]) for log in logs.values())

    found = answers["s1"]
    assert "fluxgate3 overheated" in found and "read_file file_path=pg-output:" in found, found
    pointer = _pointer(found, "pg-output:")
    shown = await read(*pointer)  # from the first line the hit shows (one before the match)
    assert "worker-3 ERROR fluxgate3 overheated" in "".join(shown.splitlines(True)[:3]), shown

    said = answers["s2"]  # the assistant's words: only the dialog holds them
    assert "periwinkle0" in said and "read_file file_path=pg-dialog:" in said, said
    shown = await read(*_pointer(said, "pg-dialog:"))
    assert shown.startswith("Reading log 0 for the periwinkle0 audit."), shown

    assert answers["r2"].startswith('{"v":'), answers["r2"][:200]  # the guide's day: records
    await manager_b.close()


def _pointer(answer: str, prefix: str) -> tuple[str, int, int]:
    """The first ``read on:`` pointer of a search answer naming a ref with `prefix`."""
    for line in answer.splitlines():
        line = line.strip()
        if line.startswith("read on: read_file file_path=" + prefix):
            fields: dict[str, Any] = dict(
                item.split("=", 1) for item in line.removeprefix("read on: read_file ").split()
            )
            return fields["file_path"], int(fields["start_line"]), int(fields.get("line_offset", 0))
    raise AssertionError(f"no {prefix} pointer in {answer!r}")
