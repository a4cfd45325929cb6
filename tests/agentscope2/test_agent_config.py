"""`build_agent` and the ready-made tools on AgentScope 2.x: a 2.x `Agent` from the same YAML
as on 1.x, its shell and fetch_url as 2.x tools that run without asking, driven by the real
2.x `OpenAIChatModel` against the local OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import TextBlock, ToolResultBlock, UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.permission import PermissionBehavior
from agentscope.tool import ToolChunk

from agentscope_ctx import ConfigError
from agentscope_ctx._agent_config import build_agent
from agentscope_ctx.agentscope2 import ContextManager
from agentscope_ctx.core.truncation._truncation import parse_notice
from agentscope_ctx.tools import ShellTool, fetch_url
from tests.support.openai_server import Reply, Server, model_fields, serving

AGENT_YAML = Path(__file__).resolve().parents[2] / "configs" / "agent.yaml"


@pytest.fixture
def server() -> Iterator[Server]:
    with serving() as srv:
        yield srv


def _text(block: ToolResultBlock) -> str:
    if isinstance(block.output, str):
        return block.output
    return "".join(b.text for b in block.output if isinstance(b, TextBlock))


async def test_i14_2_tools_answer_2x_chunks(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("one\ntwo ERROR\n")
    shell = ShellTool(tmp_path)
    out = await shell.run_shell("grep -n ERROR a.log")
    assert isinstance(out, ToolChunk) and out.content[0].text == "2:two ERROR\n"
    for bad in ("cat /etc/passwd", "rm a.log", "ls; ls", "cat $(ls)"):
        refused = await shell.run_shell(bad)
        assert refused.content[0].text.startswith("Error: command refused"), bad
    wrong = await fetch_url("file:///etc/passwd")
    assert isinstance(wrong, ToolChunk) and wrong.content[0].text.startswith("Error: expected")


async def test_i14_2_build_agent_from_the_example_on_2x(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key")
    agent, manager = build_agent(AGENT_YAML)
    assert isinstance(agent, Agent) and isinstance(manager, ContextManager)
    assert manager.middleware() in agent._reasoning_middlewares
    assert agent.name == "assistant" and isinstance(agent.model, OpenAIChatModel)
    assert agent.react_config.max_iters == 30
    assert manager.config.max_input_tokens == 100_000
    for name in ("run_shell", "fetch_url"):
        tool = await agent.toolkit.get_tool(name)
        assert tool is not None and tool.is_read_only
        decision = await tool.check_permissions({}, None)  # type: ignore[arg-type]
        assert decision.behavior == PermissionBehavior.ALLOW  # never asks the user


def test_i14_2_build_agent_missing_key_on_2x(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        build_agent(AGENT_YAML)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_i14_2_built_agent_runs_its_shell_and_reads_on(
    server: Server, tmp_path: Path, stream: bool
) -> None:
    """The whole chain on 2.x, from one config: the real model asks for a shell command, the
    shell runs in tool_root without asking the user, the output is cut and saved, and the
    model's read_file follows the notice."""
    logs = tmp_path / "logs"
    logs.mkdir()
    text = "".join(f"{i:05d} INFO request ok\n" for i in range(3_000))
    (logs / "app.log").write_text(text, encoding="utf-8")
    agent, manager = build_agent(
        {
            "agent": {"name": "sre", "tools": ["shell"], "tool_root": str(logs), "max_iters": 5},
            "model": model_fields(server, stream),
            "context": {
                "working_dir": str(tmp_path / "ctx"),
                "read_roots": [str(tmp_path)],
                "tool_result": {"recent_max_bytes": 4_096},
            },
        }
    )

    def follow(body: dict[str, Any]) -> Reply:
        """The model reads on where the notice of the newest tool result says."""
        parsed = parse_notice(str(body["messages"][-1]["content"]))
        assert parsed is not None
        notice = parsed[1]
        return Reply(
            tool="read_file",
            arguments={"file_path": notice.file_path, "start_line": notice.next.line},
        )

    server.script += [
        Reply(tool="run_shell", arguments={"command": "cat app.log"}),
        follow,
        Reply(text="done"),
    ]
    reply = await agent.reply(UserMsg("user", "What is in app.log?"))

    assert reply.get_text_content() == "done"
    cut, read = (
        b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock)
    )
    assert cut.name == "run_shell" and read.name == "read_file"
    excerpt, notice = parse_notice(_text(cut))  # type: ignore[misc]
    assert Path(notice.file_path).read_text(encoding="utf-8") == text  # saved whole
    assert Path(notice.file_path).parent == manager.store.dir
    assert _text(read).startswith(f"{notice.next.line - 1:05d} INFO")  # read on where it hinted
    assert len(server.requests) == 3
