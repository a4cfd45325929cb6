"""The offline demos on AgentScope 2.x: the same plans, tools, files and report as on 1.x, on
a real 2.x `Agent` (only the model is scripted), with the context middleware: outputs are
cut and saved, and the scripted model reads on with `read_file`.

Not yet here (phase 1 of the 2.x adapter has no pipeline): compaction, masking, dialog/ and
the prompt staying within the budget, which `tests/edge/test_demo.py` checks on 1.x."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterator
from pathlib import Path

import pytest
from agentscope.agent import Agent
from agentscope.event import CustomEvent
from agentscope.message import ToolCallBlock, UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.tool import Toolkit

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx._providers import Models, build_model
from agentscope_ctx.agentscope2._tools import function_tool
from agentscope_ctx.core.tokens._tokens import TokenCounter
from agentscope_ctx.demo import run_demo
from agentscope_ctx.demo._line2 import NOTICE_EVENT, ScriptedChatModel, _Session
from agentscope_ctx.demo._runner import Notices
from agentscope_ctx.demo._scripted import PromptStats, Script, Step, answer, call
from tests.support.demo_rungs import DemoRun
from tests.support.openai_server import Reply, Server, model_fields, serving


@pytest.fixture
def server() -> Iterator[Server]:
    with serving() as srv:
        yield srv


def test_i14_3_logs_demo_finds_the_buried_error_on_2x(logs_demo: DemoRun) -> None:
    report, root = logs_demo.report, logs_demo.path
    worker = (root / "logs" / "app" / "worker-03.log").read_text().splitlines()
    buried = next(i for i, line in enumerate(worker, 1) if "ledger-sync failed" in line)
    quota = sum("Disk quota exceeded" in line for line in worker)
    # the answer quotes what the real tools found: the line read in place, grep's count
    assert f"worker-03 line {buried}" in report.answers[1]
    assert f"`Disk quota exceeded` {quota} times" in report.answers[1]
    assert sum(p.stat().st_size for p in (root / "logs").rglob("*.log")) > 2_000_000
    # the grep output saved whole is what `grep -rn ERROR logs` prints
    saved = [p.read_text(encoding="utf-8") for p in (root / "tool_result").iterdir()]
    assert any("worker-03.log:5221:" in text and "ERROR" in text for text in saved)


async def test_i14_3_scripted_model_reports_usage_like_a_provider(tmp_path: Path) -> None:
    """Each answer's `input_tokens` is our count of the prompt the model received, formatted
    by its own `OpenAIChatFormatter`, tools included: what calibration compares with."""
    counter = TokenCounter()
    stats = PromptStats(counter)
    plan: list[list[Step]] = [[lambda obs: call("echo", word="hi"), lambda obs: answer("said hi")]]
    script = Script(plan, stats=stats)
    model = ScriptedChatModel(script)

    def echo(word: str) -> str:
        """Say a word back.

        Args:
            word (str): the word.
        """
        return word

    toolkit = Toolkit(tools=[function_tool(echo, read_only=True)])
    prompt = [UserMsg("user", "Say hi.")]
    tools = await toolkit.get_tool_schemas()
    first = await model(prompt, tools=tools)
    assert not isinstance(first, AsyncGenerator) and first.usage is not None
    expected = await counter.count(await model.formatter.format(prompt), tools=tools)
    assert first.usage.input_tokens == expected == stats.prompt_tokens[0]
    assert first.usage.output_tokens == await counter.count_text('{"word": "hi"}')
    (block,) = first.content
    assert isinstance(block, ToolCallBlock) and block.name == "echo" and block.id == "call_001"

    agent = Agent(name="a", system_prompt="Be brief.", model=model, toolkit=toolkit)
    model.script = script = Script(plan, stats=PromptStats(counter))
    reply = await agent.reply(UserMsg("user", "Say hi."))
    assert reply.get_text_content() == "said hi"
    assert reply.usage is not None and len(script.stats.prompt_tokens) == 2
    assert reply.usage.input_tokens == sum(script.stats.prompt_tokens)  # both calls of the reply


class _Announcer(MiddlewareBase):
    """Gives one notice per reply, the way the 2.x context manager does."""

    def __init__(self, text: str) -> None:
        self.text = text

    async def on_reply(
        self,
        agent: Agent,
        input_kwargs: dict[str, object],
        next_handler: Callable[..., AsyncGenerator[object, None]],
    ) -> AsyncGenerator[object, None]:
        async for item in next_handler(**input_kwargs):
            yield item
        yield CustomEvent(name=NOTICE_EVENT, value={"text": self.text})
        yield CustomEvent(name="someone_else", value={"text": "[agentscope_ctx] compacted 1"})


async def test_i14_3_notices_come_from_the_agents_events(tmp_path: Path) -> None:
    stats = PromptStats(TokenCounter())
    script = Script([[lambda obs: answer("ok")]], stats=stats)
    shown: list[str] = []
    notices = Notices(stats, shown.append)
    text = "[agentscope_ctx] compacted 12 messages: 9,000 -> 3,000 tokens"
    agent = Agent(
        name="a",
        system_prompt="Be brief.",
        model=ScriptedChatModel(script),
        toolkit=Toolkit(),
        middlewares=[_Announcer(text)],
    )
    manager = ContextManager(ContextConfig(working_dir=tmp_path))
    session = _Session(agent, manager, script, notices)

    assert await session.ask("hi") == "ok"
    assert notices.steps == [1] and notices.reliefs == [] and shown == [f"  {text}"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_i14_4_demo_on_a_real_2x_openai_model(
    server: Server, tmp_path: Path, stream: bool
) -> None:
    """`agentscope-ctx demo --model-config` on 2.x: the real `OpenAIChatModel` answers
    through the recording wrapper; the steps are numbered, the provider's counts reported."""
    server.reported = None  # about a token per 4 characters sent
    server.script += [
        Reply(tool="run_shell", arguments={"command": "grep -rn ERROR logs"}),
        Reply(tool="run_shell", arguments={"command": "grep -c quota logs/app/worker-03.log"}),
        Reply(text="The disk of the ledger volume is full."),
    ]
    model, _ = build_model(model_fields(server, stream))
    lines: list[str] = []
    report = await run_demo(
        "logs",
        tmp_path,
        models=Models(model, model.formatter, model, model.formatter),
        out=lines.append,
    )
    assert lines[0].startswith("NOTE: the model in this demo is REAL: OpenAIChatModel")
    steps = [line for line in lines if line.startswith("  step ")]
    # the server's three answers in the first turn, then its "Done." to each of the others
    turns = len(report.answers)
    assert [int(line.split()[1]) for line in steps] == list(range(1, report.steps + 1))
    assert report.steps == 3 + turns - 1 and turns == 6
    assert "(provider " in steps[0] and "run_shell(command='grep -rn ERROR logs')" in steps[0]
    sent = [server.usage(r)["prompt_tokens"] for r in server.requests]
    assert report.provider_tokens == sent and report.provider_peak == max(sent)
    assert report.first_truncations >= 1  # the grep output came back cut, with a notice
    assert report.answer == "Done."  # the server's answer once its script ran out
    assert all(r.get("stream", False) is stream for r in server.requests)
    assert "provider counted" in report.render()


async def test_i14_4_demo_compacts_within_budget_on_2x(tmp_path: Path) -> None:
    """With the ladder's cheap rungs off (`mask_after: null`), the logs demo on a 2.x `Agent`
    relieves its prompt by compaction: the summary on `AgentState`, the older messages in
    dialog/, every prompt within the budget, the buried error still found."""
    config = ContextConfig(
        working_dir=tmp_path / "ignored",
        max_input_tokens=16_000,
        tool_result={"mask_after": None, "recent_max_share": None},
        summarizer={"enabled": False},
    )
    report = await run_demo("logs", tmp_path / "demo", config=config, out=lambda _: None)
    assert report.compactions >= 1 and report.dialog_messages > 0
    assert report.peak <= report.budget == 16_000
    assert "Disk quota" in report.answers[0]
