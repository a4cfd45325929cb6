"""Issue 23 end to end on 1.x (the twin of `tests/agentscope2/test_fleet.py`): a real `ReActAgent`
whose manager is configured with ``store: {kind: postgres}`` works through a session whose
big outputs are cut and whose older messages are compacted; a SECOND manager and agent on
another working dir (another worker, sharing only the database) read every notice of the
first agent's last prompt byte for byte and find its outputs and messages with
`search_history`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(reason_1x("the fleet store under a 1.x ReActAgent"), allow_module_level=True)

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock
from agentscope.tool import Toolkit, ToolResponse

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.core._truncation import parse_notice
from tests.agentscope1.test_budget_recover import recover
from tests.fleet.postgres_server import PostgresServer
from tests.support.chain import follow_chain
from tests.support.fakes import FakeChatModel, text, tool_call

POINTER = re.compile(
    r"read on: read_file file_path=(?P<path>pg-\S+) start_line=(?P<line>\d+)"
    r"(?: line_offset=(?P<offset>\d+))?"
)


def report(n: int) -> str:
    lines = [f"10:{i % 60:02d} worker-{n} batch {i} status=200 用户 {i}\n" for i in range(300)]
    lines[250] = f"10:59 worker-{n} ERROR fluxgate{n} overheated at 97C\n"
    return "".join(lines)


def make_agent(name: str, model: FakeChatModel) -> ReActAgent:
    toolkit = Toolkit()

    def run_report(n: int) -> ToolResponse:
        """Produce report n.

        Args:
            n (int): which report.
        """
        return ToolResponse(content=[TextBlock(type="text", text=report(n))])

    toolkit.register_tool_function(run_report)
    return ReActAgent(
        name=name,
        sys_prompt="You are a careful operator.",
        model=model,
        formatter=OpenAIChatFormatter(),
        toolkit=toolkit,
        max_iters=6,
    )


def config(work: Path, server: PostgresServer, schema: str, budget: int) -> ContextConfig:
    return ContextConfig.model_validate(
        {
            "working_dir": str(work),
            "max_input_tokens": budget,
            "read_roots": [str(work)],
            "tool_result": {
                "recent_max_bytes": 4_000,
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


def tool_texts(messages: list[dict[str, Any]]) -> dict[str, str]:
    """The tool results of a formatted prompt, by call id."""
    out = {}
    for message in messages:
        if message.get("role") == "tool":
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(str(part.get("text", "")) for part in content)
            out[str(message.get("tool_call_id"))] = str(content)
    return out


async def test_a_second_1x_worker_reads_and_finds_what_the_first_saved_in_postgres(
    tmp_path: Path, pg_server: PostgresServer, pg_password: str, pg_schema: str
) -> None:
    # -- worker A: reports cut, older turns compacted into the database
    manager_a = ContextManager(config(tmp_path / "a", pg_server, pg_schema, 6_000))
    model_a = FakeChatModel()
    agent_a = make_agent("operator", model_a)
    manager_a.attach(agent_a)
    for n in range(8):
        model_a.enqueue(
            tool_call("run_report", call_id=f"r{n}", n=n), text(f"report {n} read: periwinkle{n}")
        )
        await agent_a(Msg("user", f"Run report {n}.", "user"))
    await manager_a.close()
    prompt = model_a.calls[-1]["messages"]
    notices = {k: v for k, v in tool_texts(prompt).items() if parse_notice(v) is not None}
    assert notices, "the big outputs were cut"
    refs = {parse_notice(v)[1].file_path for v in notices.values()}  # type: ignore[index]
    assert all(ref.startswith("pg-output:") for ref in refs), refs
    assert manager_a.dialog.ids(), "compaction moved the older turns to the database"
    assert "pg-dialog:YYYY-MM-DD" in json.dumps(prompt, ensure_ascii=False)  # the guide
    assert not (tmp_path / "a" / "tool_result").exists()
    assert not (tmp_path / "a" / "dialog").exists()

    # -- worker B: another manager and agent, another working dir, the same database
    manager_b = ContextManager(config(tmp_path / "b", pg_server, pg_schema, 60_000))

    async def read(path: str, line: int, offset: int) -> str:
        response = await manager_b.reader.read_file(path, line, offset)
        return "".join(block["text"] for block in response.content)  # type: ignore[typeddict-item]

    reports = {report(n) for n in range(8)}
    for output in notices.values():
        assert await follow_chain(output, read) in reports

    model_b = FakeChatModel()
    agent_b = make_agent("operator", model_b)
    manager_b.attach(agent_b)
    model_b.enqueue(
        tool_call("search_history", "s1", query="fluxgate1 overheated"),
        tool_call("search_history", "s2", query="periwinkle0"),
        text("found"),
    )
    await agent_b(Msg("user", "Which fluxgate overheated in report 1?", "user"))
    answers = tool_texts(model_b.calls[-1]["messages"])
    found = POINTER.search(answers["s1"])
    assert found is not None and found["path"].startswith("pg-output:"), answers["s1"]
    shown = await read(found["path"], int(found["line"]), int(found["offset"] or 0))
    assert "worker-1 ERROR fluxgate1 overheated" in "".join(shown.splitlines(True)[:3])
    said = POINTER.search(answers["s2"])  # the assistant's words: only the dialog holds them
    assert said is not None and said["path"].startswith("pg-dialog:"), answers["s2"]
    shown = await read(said["path"], int(said["line"]), int(said["offset"] or 0))
    assert shown.startswith("report 0 read: periwinkle0"), shown
    await manager_b.close()


async def test_a_1x_session_recovers_after_prompt_too_large_on_postgres(
    tmp_path: Path, pg_server: PostgresServer, pg_password: str, pg_schema: str
) -> None:
    """Issue 29 item 5 on the fleet store (the session: `tests/agentscope1/test_budget_recover.py`)."""
    await recover(config(tmp_path, pg_server, pg_schema, 3_000))
