"""AgentScope's real `OpenAIChatModel` against a local OpenAI-compatible HTTP server.

The server (`tests/support/openai_server.py`) speaks the chat-completions wire format: JSON for plain
calls, server-sent events for streamed ones. Only the replies are scripted; the openai SDK, AgentScope's model, formatter and `ReActAgent`, the toolkit and
the context manager are all real. This is what a fresh install talks to a provider with:
it fails when pip resolves an openai SDK whose stream deltas AgentScope cannot parse.
"""

from __future__ import annotations

import re
import runpy
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("AgentScope 1.x's OpenAIChatModel on a ReActAgent"), allow_module_level=True
    )

from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg
from agentscope.model import OpenAIChatModel

from agentscope_ctx import ContextConfig, ContextManager, build_model
from tests.edge.test_readme import assert_usage_figures_agree
from tests.support.demo_rungs import run_on_models
from tests.support.openai_server import (
    Reply,
    Server,
    base_url,
    build_report,
    check_report_reached_cut,
    model_fields,
    report_script,
    serving,
)
from tests.support.react1 import react, text_tools

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture
def server() -> Iterator[Server]:
    with serving() as srv:
        yield srv


def _model(server: Server, stream: bool) -> OpenAIChatModel:
    model, formatter = build_model(model_fields(server, stream))
    assert isinstance(model, OpenAIChatModel) and isinstance(formatter, OpenAIChatFormatter)
    return model


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_i11_15_openai_sdk_streams_through_a_real_agent(
    server: Server, tmp_path: Path, stream: bool
) -> None:
    model = _model(server, stream)
    server.script += report_script()
    agent = react(
        model,
        text_tools(build_report),
        name="ops",
        sys_prompt="You check services with build_report.",
        max_iters=4,
    )
    config = ContextConfig(
        working_dir=tmp_path / "ctx",
        max_input_tokens=20_000,
        tool_result={"recent_max_bytes": 4_096, "old_max_bytes": 1_024},
        summarizer={"enabled": False},
    )
    manager = ContextManager(config, model=None)
    manager.attach(agent)
    try:
        reply = await agent(Msg("user", "Is checkout-api healthy?", "user"))
        usage = await manager.context_usage(agent)
    finally:
        await manager.close()

    # the tool ran with the streamed (or plain) arguments, and its output reached the
    # second request cut, with a notice pointing at the saved full text
    check_report_reached_cut(server, reply.get_text_content(), stream)
    # the provider's usage (the last SSE chunk, or the JSON body) calibrated the budget
    assert usage.calibrated_total > usage.total


def _use_it_snippet() -> str:
    section = README.read_text(encoding="utf-8").split("## Use it", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(# AgentScope 1\.x.*?)```", section, re.S)
    assert len(blocks) == 1, "the Use it section has one Python block labelled 1.x"
    return blocks[0]


def test_i11_16_readme_use_it_snippet_runs_as_pasted(
    server: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The snippet, unchanged, as `main.py` in a fresh directory: its model reads
    OPENAI_API_KEY and OPENAI_BASE_URL (here the local server); the default working_dir
    (~/.agentscope_ctx) lands in a temporary HOME."""
    snippet = _use_it_snippet()
    assert "asyncio.run(main())" in snippet and "await manager.close()" in snippet
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    monkeypatch.setenv("OPENAI_BASE_URL", base_url(server))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("ship it\nTODO: rotate the keys\n", encoding="utf-8")
    server.script += [
        Reply(tool="run_shell", arguments={"command": "grep -rn TODO ."}),
        Reply(text="notes.txt line 2 has a TODO: rotate the keys."),
    ]
    main = tmp_path / "main.py"
    main.write_text(snippet, encoding="utf-8")
    runpy.run_path(str(main), run_name="__main__")

    out = capsys.readouterr().out
    assert "assistant: notes.txt line 2 has a TODO" in out, out  # a 1.x agent prints its reply
    assert_usage_figures_agree(out)
    agent_calls = [r for r in server.requests if "context compactor" not in str(r["messages"][0])]
    assert agent_calls[0]["model"] == "gpt-4o-mini"
    tool_results = [m for m in agent_calls[1]["messages"] if m["role"] == "tool"]
    assert "notes.txt:2:TODO: rotate the keys" in str(tool_results[0]["content"])
    assert (tmp_path / "home" / ".agentscope_ctx").is_dir()


async def test_i11_17_demo_on_a_streaming_openai_model_numbers_the_rejected_step(
    server: Server, tmp_path: Path
) -> None:
    """`agentscope-ctx demo --model-config` on a real, streaming OpenAIChatModel whose server
    refuses one prompt as too long: the step is shown and numbered, the retry marked, and the
    provider's counts reported."""
    model = _model(server, stream=True)
    server.reported = None
    server.script += [
        Reply(tool="run_shell", arguments={"command": "grep -rn ERROR logs"}),
        Reply(error=400),
        Reply(tool="run_shell", arguments={"command": "grep -c quota logs/app/worker-03.log"}),
        Reply(text="The disk of the ledger volume is full."),
    ]
    report, steps = await run_on_models(tmp_path, model, model)
    assert "REJECTED by the provider: prompt too long: Error code: 400" in steps[1]
    assert "retry after an emergency compaction" in steps[2]
    assert re.search(r"prompt +[\d,]+ tok \(provider [\d,]+\) \| run_shell", steps[0])
    assert report.rejected.keys() == {2} and report.retries == [3]
    sent = {server.usage(r)["prompt_tokens"] for r in server.requests if "tools" in r}
    counted = [n for n in report.provider_tokens if n is not None]
    assert report.provider_tokens[1] is None and set(counted) <= sent
    assert report.provider_peak == max(counted)
    assert report.peak <= report.budget
    assert "retried as step 3 after an emergency compaction" in report.render()
