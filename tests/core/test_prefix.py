"""The compactor's prefix request on a real 1.x `ReActAgent` (issue 22, item 5): the request is
the agent's last prompt exactly as its model received it (messages, tools), then one user
message asking for the summary; it falls back to the plain request when it would not fit the
compactor's input budget, when the compactor's model is another, or when the last prompt no
longer matches the memory. The 2.x twin is `tests/agentscope2/test_prefix.py`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("drives a ReActAgent through ContextManager's hooks"), allow_module_level=True
    )

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock
from agentscope.model._model_usage import ChatUsage
from agentscope.tool import Toolkit, ToolResponse

from agentscope_ctx import ContextConfig, ContextManager
from tests.support.fakes import FakeChatModel, tool_call
from tests.support.guard_session import FAILING, LAZY

MARK = "[agentscope_ctx: context compaction."
GOOD = LAZY.replace("- complete the task", "- fix src/app.py (prefix summary)")


def _toolkit() -> Toolkit:
    def run_shell(command: str) -> ToolResponse:
        """Run a shell command.

        Args:
            command (str): the command line.
        """
        text = FAILING if command.startswith("pytest") else f"{command}: ok\n" * 200
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    toolkit = Toolkit()
    toolkit.register_tool_function(run_shell)
    return toolkit


def _is_compaction(messages: list[dict[str, Any]]) -> bool:
    return MARK in json.dumps(messages[-1], ensure_ascii=False) if messages else False


class SharedModel(FakeChatModel):
    """One model for the agent and the compactor: compaction requests (either form) get
    `answer` (with a preamble and a fence, which the compactor cleans off), other calls the
    queue."""

    def __init__(self, answer: str = GOOD) -> None:
        super().__init__(default="ok")
        self.answer = answer
        self.cached: int | None = None
        """Cache reads to report on the agent's calls, as OpenAI does (`None`: no usage)."""

    async def __call__(self, messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        compaction = _is_compaction(messages)
        if compaction or "You are the context compactor" in json.dumps(messages[:1]):
            self.queue.insert(0, f"Here it is:\n```markdown\n{self.answer}\n```")
        response = await super().__call__(messages, *args, **kwargs)
        if self.cached is not None and not compaction:
            details = {"prompt_tokens": 2_000, "prompt_tokens_details": {"cached_tokens": 1_500}}
            response.usage = ChatUsage(
                input_tokens=2_000, output_tokens=10, time=0.0, metadata=details
            )
        return response


def _setup(
    tmp_path: Path, model: SharedModel, helper: SharedModel | None = None, **compactor: Any
) -> tuple[ReActAgent, ContextManager]:
    config = ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "ctx"),
            "max_input_tokens": 8_000,
            "keep_recent_ratio": 0.05,
            "summarizer": {"enabled": False},
            "compactor": {"request": "prefix", **compactor},
        }
    )
    agent = ReActAgent(
        name="coder",
        sys_prompt="You fix code.",
        model=model,
        formatter=OpenAIChatFormatter(),
        toolkit=_toolkit(),
    )
    agent.set_console_output_enabled(False)
    manager = ContextManager(config, model=helper or model, formatter=OpenAIChatFormatter())
    manager.attach(agent)
    return agent, manager


async def _turns(agent: ReActAgent, model: SharedModel, n: int) -> None:
    for turn in range(n):
        model.enqueue(
            tool_call("run_shell", f"c{turn}a", command=f"pytest -x  # {turn}"),
            tool_call("run_shell", f"c{turn}b", command=f"ls src  # {turn}"),
            f"Turn {turn} done.",
        )
        await agent(Msg("user", f"Fix the failing test, part {turn}.", "user"))


async def test_the_request_starts_with_the_agents_last_prompt(tmp_path: Path) -> None:
    model = SharedModel()
    agent, manager = _setup(tmp_path, model)
    await _turns(agent, model, 2)
    before = len(model.calls)
    report = await manager.compact(agent)
    assert report.compacted and report.summary_source == "model"
    request = model.calls[before]
    last = model.calls[before - 1]  # the agent's last reasoning call
    assert _is_compaction(request["messages"])
    sent = json.dumps(request["messages"][:-1], sort_keys=True)
    assert sent == json.dumps(last["messages"], sort_keys=True)  # the same bytes, in order
    assert request["tools"] == last["tools"] and request["tools"]  # the tools come first
    assert request.get("tool_choice") in (None, "auto", "none")
    instruction = json.dumps(request["messages"][-1], ensure_ascii=False)
    for heading in ("## Goal", "## Constraints", "## Key Decisions", "## Next Steps"):
        assert heading in instruction
    # parsed as in the plain form: preamble and fence gone, then the carried block
    summary = agent.memory.compact_summary  # type: ignore[attr-defined]
    assert summary.startswith(GOOD.strip())
    assert "Fix the failing test, part 0." in summary  # carried by code
    assert report.tokens_after <= report.tokens_before
    await manager.close()


async def test_plain_request_when_the_prefix_would_not_fit(tmp_path: Path) -> None:
    model = SharedModel()
    agent, manager = _setup(tmp_path, model, max_input_tokens=1_000)
    await _turns(agent, model, 2)
    before = len(model.calls)
    report = await manager.compact(agent)
    assert report.compacted and report.summary_source == "model"
    requests = model.calls[before:]
    assert requests and not any(_is_compaction(r["messages"]) for r in requests)
    assert "You are the context compactor" in json.dumps(requests[0]["messages"][0])
    assert requests[0]["tools"] in (None, [])
    await manager.close()


@pytest.mark.parametrize("case", ["plain", "other_model", "stale"])
async def test_plain_request_when_the_prefix_does_not_apply(tmp_path: Path, case: str) -> None:
    """`request: plain`; a compactor model that is not the agent's (no shared cache); a
    second compaction before the agent's next call (the last prompt shows what left)."""
    model = SharedModel()
    helper = SharedModel() if case == "other_model" else None
    if helper is not None:
        helper.model_name = "another-model"
    agent, manager = _setup(
        tmp_path, model, helper, **({"request": "plain"} if case == "plain" else {})
    )
    await _turns(agent, model, 3)
    calls = helper.calls if helper is not None else model.calls
    if case == "stale":
        first = await manager._binding(agent).pipeline.run(force=True, keep_ratio=0.2)
        assert first.compacted and _is_compaction(calls[-1]["messages"])
    before = len(calls)
    report = await manager.compact(agent)
    assert report.compacted
    assert calls[before:] and not any(_is_compaction(r["messages"]) for r in calls[before:])
    await manager.close()


async def test_a_rejected_prefix_answer_is_retried_then_falls_back(tmp_path: Path) -> None:
    """An answer without the headings is retried once in the same form (the error in the new
    instruction, the same prefix), then the extractive summary stands in: nothing grows."""
    model = SharedModel(answer="I summarised it.")
    agent, manager = _setup(tmp_path, model)
    await _turns(agent, model, 2)
    before = len(model.calls)
    report = await manager.compact(agent)
    requests = [r for r in model.calls[before:] if _is_compaction(r["messages"])]
    assert len(requests) == 2
    assert requests[0]["messages"][:-1] == requests[1]["messages"][:-1]
    assert "was rejected" in json.dumps(requests[1]["messages"][-1])
    assert report.summary_source == "extractive"
    assert report.tokens_after <= report.tokens_before
    await manager.close()


async def test_auto_makes_prefix_requests_once_the_provider_reports_cache_reads(
    tmp_path: Path,
) -> None:
    """`request: auto` (the default): plain while the provider has reported no cache reads
    (one that caches nothing would bill the whole prefix request at full price), prefix
    after it has."""
    model = SharedModel()
    agent, manager = _setup(tmp_path, model, request="auto")
    await _turns(agent, model, 2)
    before = len(model.calls)
    await manager._binding(agent).pipeline.run(force=True, keep_ratio=0.3)
    assert model.calls[before:] and not _is_compaction(model.calls[-1]["messages"])
    model.cached = 1_500
    await _turns(agent, model, 2)
    before = len(model.calls)
    report = await manager.compact(agent)
    assert report.compacted and _is_compaction(model.calls[before]["messages"])
    await manager.close()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_over_http_the_body_starts_with_the_agents_last_request(
    tmp_path: Path, stream: bool
) -> None:
    """AgentScope's real `OpenAIChatModel` against the local OpenAI-compatible server, the
    server reporting cache reads (so `auto` sends the prefix request): the compaction
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
        model, formatter = build_model(
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
        agent = ReActAgent(
            name="coder",
            sys_prompt="You fix code.",
            model=model,
            formatter=formatter,
            toolkit=_toolkit(),
        )
        agent.set_console_output_enabled(False)
        manager = ContextManager(config, model=model, formatter=formatter)
        manager.attach(agent)
        for turn in range(2):
            srv.script += [
                Reply(tool="run_shell", arguments={"command": f"pytest -x  # {turn}"}),
                Reply(text=f"Turn {turn} done."),
            ]
            await agent(Msg("user", f"Fix the failing test, part {turn}.", "user"))
        before = len(srv.requests)
        report = await manager.compact(agent)
        body, last = srv.requests[before], srv.requests[before - 1]
        assert report.compacted and report.summary_source == "model"
        assert MARK in json.dumps(body["messages"][-1])
        assert body["messages"][:-1] == last["messages"]
        assert body["tools"] == last["tools"] and body.get("tool_choice") == last.get("tool_choice")
        assert "- find the TODOs" in agent.memory.compact_summary  # type: ignore[attr-defined]
        await manager.close()


class TooLong(SharedModel):
    """Rejects the prefix request with OpenAI's context-length error."""

    async def __call__(self, messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        if _is_compaction(messages):
            self.calls.append({"messages": messages, "rejected": True})
            raise ValueError("Error code: 400 - This model's maximum context length is 8192")
        return await super().__call__(messages, *args, **kwargs)


async def test_a_prefix_request_the_provider_finds_too_long_goes_plain(tmp_path: Path) -> None:
    """The provider's context-length error on the prefix request (our count was low): the
    plain request, smaller, is made next; the summary is the model's."""
    model = TooLong()
    agent, manager = _setup(tmp_path, model)
    await _turns(agent, model, 2)
    before = len(model.calls)
    report = await manager.compact(agent)
    calls = model.calls[before:]
    assert calls[0].get("rejected")
    assert "You are the context compactor" in json.dumps(calls[1]["messages"][0])
    assert report.compacted and report.summary_source == "model"
    await manager.close()
