"""`agentscope_ctx.testing` (issue 48): the public scripted chat model of the installed line
drives a real agent with the context manager, from a queue of texts and tool calls, streamed or
not, records each prompt, and answers the manager's compaction with a summary the compactor
takes (a model compaction, no fallback); its import stays cheap and out of
`import agentscope_ctx`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentscope.model import ChatResponse

import agentscope_ctx.testing as testing
from agentscope_ctx import ContextConfig
from agentscope_ctx.core.compaction._compactor_prompts import SYSTEM, Ask, plain_prompt
from agentscope_ctx.core.summary._extractive import validate_summary
from agentscope_ctx.testing import NOT_A_SUMMARY, ScriptedChatModel, ToolCall, write_summary
from tests.support.agent_line import Line
from tests.support.forked import Forker
from tests.support.lines import IS_1X


def test_its_all_is_sorted_and_every_name_imports() -> None:
    assert testing.__all__ == sorted(testing.__all__, key=lambda name: (not name.isupper(), name))
    for name in testing.__all__:
        assert getattr(testing, name) is not None, name
    assert set(testing.__all__) <= set(dir(testing))
    with pytest.raises(AttributeError, match="no attribute 'Scripted'"):
        testing.Scripted  # noqa: B018


def grep_tool(pattern: str) -> str:
    """Search the notes for `pattern`.

    Args:
        pattern: what to look for.
    """
    return f"notes.txt:2:TODO: {pattern}"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_real_agent_plays_the_queue_and_its_prompts_are_recorded(
    line: Line, tmp_path: Path, stream: bool
) -> None:
    model = ScriptedChatModel(
        [ToolCall("grep_tool", {"pattern": "rotate"}, text="Let me look."), "One TODO: rotate."],
        stream=stream,
    )
    session = line.session(ContextConfig(working_dir=tmp_path), None, [grep_tool], model=model)
    try:
        reply = await session.turn("Which notes mention TODO?")
        assert (reply or "").endswith("One TODO: rotate."), reply  # (2.x: one message a reply)
    finally:
        await session.close()
    assert len(model.prompts) == len(model.calls) == 2
    first, second = model.prompts
    assert any("Which notes mention TODO?" in json.dumps(m) for m in first)
    assert {t["function"]["name"] for t in model.calls[0].tools or []} >= {"grep_tool"}
    called = next(m for m in second if m["role"] == "assistant")["tool_calls"][0]
    assert called["id"] == "call_001" and called["function"]["name"] == "grep_tool"
    assert json.loads(called["function"]["arguments"]) == {"pattern": "rotate"}
    result = next(m for m in second if m["role"] == "tool")
    assert "notes.txt:2:TODO: rotate" in json.dumps(result)
    assert not any(call.summary for call in model.calls)
    assert model.queue.answers == []


async def test_the_same_model_writes_the_managers_compaction(line: Line, tmp_path: Path) -> None:
    """The agent's model is the compactor's too: the compaction is the model's, the queue
    untouched by it."""
    log = "its rotation log says: rotated on schedule. " * 40
    model = ScriptedChatModel([f"The deploy key lives in vault/deploy; {log}", log], default="ok")
    config = ContextConfig(working_dir=tmp_path, max_input_tokens=4000, keep_recent_ratio=0.1)
    session = line.session(config, model, [grep_tool], model=model)
    try:
        await session.turn("Remember: never print the deploy key. Where does it live?")
        await session.turn("And the staging key?")
        await session.turn("Thanks.")
        report = await session.manager.compact(session.agent)
    finally:
        await session.close()
    assert report.compacted > 0
    assert report.summary_source == "model", report
    (request,) = [call for call in model.calls if call.summary]
    assert "<messages>" in json.dumps(request.messages)
    summary = session.summary()
    assert validate_summary(summary) is None
    assert "never print the deploy key" in summary  # a constraint, as the user said it
    # the agent's three answers, then the compaction (then the Summarizer's notes, if any)
    assert [c.summary for c in model.calls][:4] == [False, False, False, True]


async def test_the_queue_answers_in_order_then_the_default(tmp_path: Path) -> None:
    seen: list[int] = []

    def count(prompt: list[dict[str, Any]]) -> str:
        seen.append(len(prompt))
        return "counted"

    async def later(prompt: list[dict[str, Any]]) -> str:
        return "awaited"

    model = ScriptedChatModel(["one"], default=None)
    model.enqueue(count, later, RuntimeError("503 from the provider"))
    assert [await ask(model) for _ in range(3)] == ["one", "counted", "awaited"]
    assert seen == [1]
    with pytest.raises(RuntimeError, match="503"):
        await ask(model)
    with pytest.raises(AssertionError, match="no answer left"):
        await ask(model)
    assert len(model.calls) == 5
    assert await ask(ScriptedChatModel()) == "Done."


async def ask(model: Any, text: str = "hi") -> str:
    """One call of `model` as its line's agent makes it; the answer's text (a stream read to
    its end)."""
    if IS_1X:
        response = await model([{"role": "user", "content": text}])
    else:
        from agentscope.message import UserMsg

        response = await model([UserMsg("user", text)])
    if not isinstance(response, ChatResponse):  # a stream: its last chunk is the whole answer
        chunks = [chunk async for chunk in response]
        response = chunks[-1]
    return "".join(
        str(block.get("text", "")) if IS_1X else getattr(block, "text", "")
        for block in response.content
    )


def test_the_summary_passes_the_compactors_check_for_both_request_forms() -> None:
    transcript = (
        "[user 2026-12-06]\nKeep it short. Never touch prod.\n"
        '[assistant 2026-12-06]\n-> call run_shell {"command": "df -h"}\n'
        "<- result of run_shell:\nERROR disk quota exceeded on node-3\n"
    )
    plain = plain_prompt(Ask("", transcript, None, None, False, 1000), None, "en")
    summary = write_summary(plain)
    assert validate_summary(summary) is None
    assert "Never touch prod." in summary and "ran `df -h`" in summary
    assert "ERROR disk quota exceeded on node-3" in summary
    # a prefix request: the rules (with the headings) in its last user message, no transcript
    prefixed = write_summary(SYSTEM["en"] + "\n\nWrite the summary now.")
    assert validate_summary(prefixed) is None
    assert "Update the previous summary" not in prefixed  # the rules are not taken as items
    assert write_summary("What is the capital of France?") == NOT_A_SUMMARY


# -- the import ------------------------------------------------------------------------------

_PROBE = """
import json, sys
import agentscope
before = set(sys.modules)
{body}
with open(sys.argv[1], "w") as out:
    json.dump(sorted(set(sys.modules) - before), out)
"""

NEVER = (
    "agentscope_ctx.demo",
    "agentscope_ctx.agentscope1",
    "agentscope_ctx.agentscope2",
    "agentscope_ctx._providers",
    "agentscope_ctx.services",
    "agentscope_ctx.core.config",
    "agentscope_ctx.core.compaction._compactor",
    "agentscope_ctx.stores",
    "openai",
)
"""What `import agentscope_ctx.testing` does not load, nor its model (but the last: AgentScope
2.x's model package loads openai)."""


def _added(forker: Forker, tmp_path: Path, body: str) -> list[str]:
    report = tmp_path / "modules.json"
    done = forker.run(
        ["-c", _PROBE.format(body=body), str(report)],
        cwd=tmp_path,
        env={"HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr
    added: list[str] = json.loads(report.read_text(encoding="utf-8"))
    return added


def _loaded(added: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in added if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_the_import_is_cheap_and_not_the_packages(forker: Forker, tmp_path: Path) -> None:
    package = _added(forker, tmp_path, "import agentscope_ctx")
    assert _loaded(package, ("agentscope_ctx.testing",)) == []
    module = _added(forker, tmp_path, "import agentscope_ctx.testing")
    assert _loaded(module, (*NEVER, "agentscope.model", "agentscope_ctx.testing._model")) == []
    model = _added(forker, tmp_path, "from agentscope_ctx.testing import ScriptedChatModel")
    assert "agentscope_ctx.testing._model" in model
    assert _loaded(model, NEVER[:-1]) == []


# -- the README's offline snippet ------------------------------------------------------------

OFFLINE = "    # offline, in its place: "


def offline_snippet() -> str:
    """The README's 2.x snippet as a new user makes it offline: its ``# offline`` line,
    uncommented, in place of the `build_model` line above it."""
    from tests.edge.test_readme import readme_snippets

    (code,) = [s.code for s in readme_snippets() if s.lines == {"2"}]
    lines = code.splitlines()
    (at,) = [k for k, line in enumerate(lines) if line.startswith(OFFLINE)]
    assert lines[at - 1].lstrip().startswith("model, _ = build_model("), lines[at - 1]
    lines[at - 1 : at + 1] = ["    " + lines[at].removeprefix(OFFLINE)]
    return "\n".join(lines) + "\n"


@pytest.mark.skipif(IS_1X, reason="the README's offline variant is its 2.x snippet's")
def test_the_readmes_offline_snippet_prints_an_answer_and_the_usage(
    forker: Forker, tmp_path: Path
) -> None:
    from tests.edge.test_readme import assert_usage_figures_agree

    (tmp_path / "main.py").write_text(offline_snippet(), encoding="utf-8")
    nowhere = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}  # no provider
    done = forker.run(["main.py"], cwd=tmp_path, env={"HOME": str(tmp_path / "home"), **nowhere})
    assert done.returncode == 0, done.stderr
    assert "assistant: Done." in done.stdout, done.stdout
    assert_usage_figures_agree(done.stdout)
    assert (tmp_path / "home" / ".agentscope_ctx" / "usage").is_dir()


def test_the_offline_line_is_one_line_of_the_snippet_the_docs_show_too() -> None:
    code = offline_snippet()
    assert "build_model({" not in code.split("async def main", 1)[1]
    assert "model = ScriptedChatModel()" in code


async def test_asked_again_for_a_shorter_summary_it_writes_one() -> None:
    """On a small budget the first summary is over the compactor's size limit; the retry says
    so, and the second answer fits: a model summary, not the extractive fallback."""
    from agentscope_ctx import Compactor, CompactorConfig, TokenCounter
    from tests.support.lines import Msg

    msgs: list[Msg] = []
    for t in range(1, 13):
        call = {
            "type": "tool_use", "id": f"c{t}", "name": "run_shell",
            "input": {"command": f"grep -rn 'quota exceeded on volume {t}' /var/log/cluster-{t}/"},
        }  # fmt: skip
        msgs += [
            Msg(
                "user",
                f"Step {t}: check volume {t}. Never restart node-{t} without asking.",
                "user",
            ),
            Msg("assistant", [call], "assistant"),
            Msg(
                "assistant",
                f"- Root cause on volume {t}: the nightly backup of tenant {t}.",
                "assistant",
            ),
        ]
    model = ScriptedChatModel()
    formatter = None
    if IS_1X:
        from agentscope.formatter import OpenAIChatFormatter

        formatter = OpenAIChatFormatter()
    counter = TokenCounter("cl100k_base")
    compactor = Compactor(
        CompactorConfig(), model=model, formatter=formatter, counter=counter, max_input_tokens=1200
    )
    result = await compactor.compact("", msgs)
    assert result.source in ("model", "model_retry"), result
    assert result.source == "model_retry" and "first answer rejected" in (result.reason or "")
    assert await counter.count_text(result.summary) <= compactor.max_summary_tokens
    assert validate_summary(result.summary) is None
    assert all(call.summary for call in model.calls)
