"""The README's 2.x example (section "On AgentScope 2.x") runs as pasted, against a local
OpenAI-compatible server driving AgentScope 2.x's real `OpenAIChatModel`."""

from __future__ import annotations

import re
import runpy
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.openai_server import Reply, Server, base_url, serving

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture
def server() -> Iterator[Server]:
    with serving() as srv:
        yield srv


def _snippet() -> str:
    section = README.read_text(encoding="utf-8").split("## On AgentScope 2.x", 1)[1]
    section = section.split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the 2.x section has one Python block"
    return blocks[0]


def test_i14_2_readme_2x_snippet_runs_as_pasted(
    server: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    snippet = _snippet()
    assert "middlewares=[manager.middleware()]" in snippet and "await manager.close()" in snippet
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    monkeypatch.setenv("OPENAI_BASE_URL", base_url(server))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("ship it\nTODO: rotate the keys\n", encoding="utf-8")
    server.script += [
        Reply(tool="run_shell", arguments={"command": "grep -rn TODO ."}),
        Reply(text="notes.txt line 2 has a TODO: rotate the keys."),
    ]
    (tmp_path / "main.py").write_text(snippet, encoding="utf-8")
    runpy.run_path(str(tmp_path / "main.py"), run_name="__main__")

    out = capsys.readouterr().out
    assert re.search(r"context: [\d,]+ tokens, \d+% of the budget", out), out
    assert server.requests[0]["model"] == "gpt-4o-mini"
    tools = [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert {"run_shell", "read_file", "remember", "log_today", "search_history"} <= set(tools)
    tool_results = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "notes.txt:2:TODO: rotate the keys" in str(tool_results[0]["content"])
    assert (tmp_path / "home" / ".agentscope_ctx" / "usage").is_dir()
