"""The compactor's prefix request on a real 2.x `Agent` (issue 22, item 5): the 2.x twin of
`tests/core/test_prefix.py`. The request is the agent's last model call's messages (which the
model's formatter turns into the same bytes) and tools, then one user message; the plain
request when it would not fit, for another model, or when the last prompt is stale."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import Msg, UserMsg
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import FunctionTool, Toolkit

from agentscope_ctx import ContextConfig, ContextManager
from tests.support.fakes import ALLOW, FakeChatModel, tool_call
from tests.support.guard_session import FAILING, LAZY

MARK = "[agentscope_ctx: context compaction."
GOOD = LAZY.replace("- complete the task", "- fix src/app.py (prefix summary)")


def _is_compaction(formatted: list[dict[str, Any]]) -> bool:
    return bool(formatted) and MARK in json.dumps(formatted[-1], ensure_ascii=False)


class SharedModel(FakeChatModel):
    """One model for the agent and the compactor: compaction requests (either form) get
    `answer` (with a preamble and a fence), other calls the queue."""

    def __init__(self, answer: str = GOOD, stream: bool = False) -> None:
        super().__init__(default="ok", stream=stream)
        self.answer = answer
        self.cached: int | None = None
        """Cache reads to report on the agent's calls (`None`: no usage)."""

    async def _call_api(self, model_name: str, messages: list[Msg], *a: Any, **kw: Any) -> Any:
        formatted = await self.formatter.format(messages)
        compaction = _is_compaction(formatted)
        if compaction or "You are the context compactor" in json.dumps(formatted[:1]):
            self.queue.insert(0, f"Here it is:\n```markdown\n{self.answer}\n```")
        response = await super()._call_api(model_name, messages, *a, **kw)
        if self.cached is not None and not compaction and isinstance(response, ChatResponse):
            response.usage = ChatUsage(
                input_tokens=2_000, output_tokens=10, time=0.0, cache_input_tokens=self.cached
            )
        return response


def _toolkit() -> Toolkit:
    def run_shell(command: str) -> str:
        """Run a shell command.

        Args:
            command (str): the command line.
        """
        return FAILING if command.startswith("pytest") else f"{command}: ok\n" * 200

    return Toolkit(tools=[FunctionTool(run_shell, permission=ALLOW, is_read_only=False)])


def _setup(
    tmp_path: Path, model: SharedModel, helper: SharedModel | None = None, **compactor: Any
) -> tuple[Agent, ContextManager]:
    config = ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "ctx"),
            "max_input_tokens": 8_000,
            "keep_recent_ratio": 0.05,
            "summarizer": {"enabled": False},
            "compactor": {"request": "prefix", **compactor},
        }
    )
    manager = ContextManager(config, model=helper or model)
    agent = Agent(
        name="coder",
        system_prompt="You fix code.",
        model=model,
        toolkit=_toolkit(),
        middlewares=[manager.middleware()],
    )
    return agent, manager


async def _turns(agent: Agent, model: SharedModel, n: int) -> None:
    for turn in range(n):
        model.enqueue(
            tool_call("run_shell", f"c{turn}a", command=f"pytest -x  # {turn}"),
            tool_call("run_shell", f"c{turn}b", command=f"ls src  # {turn}"),
            f"Turn {turn} done.",
        )
        words = f"Fix the failing test, part {turn}."
        async for _ in agent.reply_stream(UserMsg(name="user", content=words)):
            pass


@pytest.mark.parametrize("stream", [False, True])
async def test_the_request_starts_with_the_agents_last_prompt(tmp_path: Path, stream: bool) -> None:
    model = SharedModel(stream=stream)
    agent, manager = _setup(tmp_path, model)
    await _turns(agent, model, 2)
    before = len(model.calls)
    report = await manager.compact(agent)
    assert report is not None and report.compacted and report.summary_source == "model"
    request, last = model.calls[before], model.calls[before - 1]
    assert _is_compaction(request["formatted"])
    sent = json.dumps(request["formatted"][:-1], sort_keys=True, ensure_ascii=False)
    assert sent == json.dumps(last["formatted"], sort_keys=True, ensure_ascii=False)
    assert request["tools"] == last["tools"] and request["tools"]
    choice = request["tool_choice"]
    assert choice is None or choice.mode in ("auto", "none")
    instruction = json.dumps(request["formatted"][-1], ensure_ascii=False)
    for heading in ("## Goal", "## Constraints", "## Key Decisions", "## Next Steps"):
        assert heading in instruction
    summary = str(agent.state.summary)
    assert GOOD.strip() in summary  # cleaned of the preamble and the fence
    assert "Fix the failing test, part 0." in summary  # carried by code
    assert report.tokens_after <= report.tokens_before
    await manager.close()


async def test_plain_request_when_the_prefix_would_not_fit(tmp_path: Path) -> None:
    model = SharedModel()
    agent, manager = _setup(tmp_path, model, max_input_tokens=1_000)
    await _turns(agent, model, 2)
    before = len(model.calls)
    report = await manager.compact(agent)
    assert report is not None and report.compacted and report.summary_source == "model"
    requests = model.calls[before:]
    assert requests and not any(_is_compaction(r["formatted"]) for r in requests)
    assert "You are the context compactor" in json.dumps(requests[0]["formatted"][0])
    await manager.close()


@pytest.mark.parametrize("case", ["plain", "other_model", "stale"])
async def test_plain_request_when_the_prefix_does_not_apply(tmp_path: Path, case: str) -> None:
    model = SharedModel()
    helper = SharedModel() if case == "other_model" else None
    if helper is not None:
        helper.model = "another-model"
    agent, manager = _setup(
        tmp_path, model, helper, **({"request": "plain"} if case == "plain" else {})
    )
    await _turns(agent, model, 3)
    calls = helper.calls if helper is not None else model.calls
    if case == "stale":
        first = await manager.run(manager.bind(agent), force=True, keep_ratio=0.2)
        assert first is not None and first.compacted and _is_compaction(calls[-1]["formatted"])
    before = len(calls)
    report = await manager.compact(agent)
    assert report is not None and report.compacted
    new = calls[before:]
    assert new and not any(_is_compaction(r["formatted"]) for r in new)
    await manager.close()


async def test_a_rejected_prefix_answer_is_retried_then_falls_back(tmp_path: Path) -> None:
    model = SharedModel(answer="I summarised it.")
    agent, manager = _setup(tmp_path, model)
    await _turns(agent, model, 2)
    before = len(model.calls)
    report = await manager.compact(agent)
    requests = [r for r in model.calls[before:] if _is_compaction(r["formatted"])]
    assert len(requests) == 2
    assert requests[0]["formatted"][:-1] == requests[1]["formatted"][:-1]
    assert "was rejected" in json.dumps(requests[1]["formatted"][-1])
    assert report is not None and report.summary_source == "extractive"
    assert report.tokens_after <= report.tokens_before
    await manager.close()


async def test_auto_makes_prefix_requests_once_the_provider_reports_cache_reads(
    tmp_path: Path,
) -> None:
    model = SharedModel()
    agent, manager = _setup(tmp_path, model, request="auto")
    await _turns(agent, model, 2)
    before = len(model.calls)
    await manager.run(manager.bind(agent), force=True, keep_ratio=0.3)
    assert model.calls[before:] and not _is_compaction(model.calls[-1]["formatted"])
    model.cached = 1_500
    await _turns(agent, model, 2)
    before = len(model.calls)
    report = await manager.compact(agent)
    assert report is not None and report.compacted
    assert _is_compaction(model.calls[before]["formatted"])
    await manager.close()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_over_http_the_body_starts_with_the_agents_last_request(
    tmp_path: Path, stream: bool
) -> None:
    """AgentScope 2.x's real `OpenAIChatModel` against the local OpenAI-compatible server,
    the server reporting cache reads (so `auto` sends the prefix request): the compaction
    request's body holds the last request's messages and tools, then one message."""
    from agentscope_ctx import build_model
    from tests.support.openai_server import SUMMARY, Reply, base_url, serving

    with serving() as srv:
        srv.usage = lambda body: {  # type: ignore[method-assign]
            "prompt_tokens": 3_000,
            "completion_tokens": 7,
            "total_tokens": 3_007,
            "prompt_tokens_details": {"cached_tokens": 2_000},
        }
        scripted = srv.next_reply
        srv.next_reply = lambda body: (  # type: ignore[method-assign]
            Reply(text=SUMMARY) if MARK in json.dumps(body["messages"][-1]) else scripted(body)
        )
        model, _ = build_model(
            {
                "provider": "openai",
                "model_name": "local-test-model",
                "base_url": base_url(srv),
                "api_key_env": None,
                "stream": stream,
                "client_kwargs": {"max_retries": 0, "timeout": 20},
            }
        )
        config = ContextConfig.model_validate(
            {
                "working_dir": str(tmp_path / "ctx"),
                "max_input_tokens": 8_000,
                "keep_recent_ratio": 0.05,
                "summarizer": {"enabled": False},
            }
        )
        manager = ContextManager(config, model=model)
        agent = Agent(
            name="coder",
            system_prompt="You fix code.",
            model=model,
            toolkit=_toolkit(),
            middlewares=[manager.middleware()],
        )
        for turn in range(2):
            srv.script += [
                Reply(tool="run_shell", arguments={"command": f"pytest -x  # {turn}"}),
                Reply(text=f"Turn {turn} done."),
            ]
            words = f"Fix the failing test, part {turn}."
            async for _ in agent.reply_stream(UserMsg(name="user", content=words)):
                pass
        before = len(srv.requests)
        report = await manager.compact(agent)
        body, last = srv.requests[before], srv.requests[before - 1]
        assert report is not None and report.compacted and report.summary_source == "model"
        assert MARK in json.dumps(body["messages"][-1])
        assert body["messages"][:-1] == last["messages"]
        assert body["tools"] == last["tools"]
        assert body.get("tool_choice") == last.get("tool_choice")
        assert "- find the TODOs" in str(agent.state.summary)
        await manager.close()
