"""The compactor's prefix request (issue 22, item 5), on the installed line (`line` fixture): the
request is the agent's last prompt exactly as its model received it (messages, tools; on 2.x
the last model call's messages, which the model's formatter turns into the same bytes), then
one user message asking for the summary; it falls back to the plain request when it would not
fit the compactor's input budget, when the compactor's model is another, or when the last prompt
no longer matches the memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx import ContextConfig
from tests.support.agent_line import Line, Session
from tests.support.fakes import usage
from tests.support.guard_session import FAILING, LAZY

MARK = "[agentscope_ctx: context compaction."
GOOD = LAZY.replace("- complete the task", "- fix src/app.py (prefix summary)")


def _is_compaction(messages: list[dict[str, Any]]) -> bool:
    return bool(messages) and MARK in json.dumps(messages[-1], ensure_ascii=False)


def _run_shell(command: str) -> str:
    return FAILING if command.startswith("pytest") else f"{command}: ok\n" * 200


def _shared(line: Line, answer: str = GOOD, stream: bool = False) -> Any:
    """One model for the agent and the compactor: compaction requests (either form) get
    `answer` (with a preamble and a fence, which the compactor cleans off), other calls the
    queue."""
    model = line.fake_model(default="ok", stream=stream)

    def route(messages: list[dict[str, Any]]) -> str | None:
        if _is_compaction(messages) or "You are the context compactor" in json.dumps(messages[:1]):
            return f"Here it is:\n```markdown\n{answer}\n```"
        return None

    model.route = route
    return model


def _setup(line: Line, tmp_path: Path, model: Any, helper: Any = None, **compactor: Any) -> Session:
    config = ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "ctx"),
            "max_input_tokens": 8_000,
            "keep_recent_ratio": 0.05,
            "summarizer": {"enabled": False},
            "compactor": {"request": "prefix", **compactor},
        }
    )
    tools = {"run_shell": _run_shell}
    return line.session(config, helper or model, tools, model=model, sys_prompt="You fix code.")


async def _turns(line: Line, session: Session, n: int) -> None:
    for turn in range(n):
        await session.turn(
            f"Fix the failing test, part {turn}.",
            line.tool_call("run_shell", f"c{turn}a", arg=f"pytest -x  # {turn}"),
            line.tool_call("run_shell", f"c{turn}b", arg=f"ls src  # {turn}"),
            f"Turn {turn} done.",
        )


@pytest.mark.parametrize("stream", [False, True])
async def test_the_request_starts_with_the_agents_last_prompt(
    line: Line, tmp_path: Path, stream: bool
) -> None:
    model = _shared(line, stream=stream)
    session = _setup(line, tmp_path, model)
    await _turns(line, session, 2)
    before = len(model.calls)
    report = await session.manager.compact(session.agent)
    assert report is not None and report.compacted and report.summary_source == "model"
    request, last = model.calls[before], model.calls[before - 1]  # the agent's last call
    assert _is_compaction(line.sent(request))
    sent = json.dumps(line.sent(request)[:-1], sort_keys=True, ensure_ascii=False)
    assert sent == json.dumps(line.sent(last), sort_keys=True, ensure_ascii=False)  # in order
    assert request["tools"] == last["tools"] and request["tools"]  # the tools come first
    choice = request.get("tool_choice")
    assert getattr(choice, "mode", choice) in (None, "auto", "none")
    instruction = json.dumps(line.sent(request)[-1], ensure_ascii=False)
    for heading in ("## Goal", "## Constraints", "## Key Decisions", "## Next Steps"):
        assert heading in instruction
    # parsed as in the plain form: preamble and fence gone, then the carried block
    summary = session.summary()
    assert GOOD.strip() in summary
    if line.is_1x:
        assert summary.startswith(GOOD.strip())
    assert "Fix the failing test, part 0." in summary  # carried by code
    assert report.tokens_after <= report.tokens_before
    await session.close()


async def test_plain_request_when_the_prefix_would_not_fit(line: Line, tmp_path: Path) -> None:
    model = _shared(line)
    session = _setup(line, tmp_path, model, max_input_tokens=1_000)
    await _turns(line, session, 2)
    before = len(model.calls)
    report = await session.manager.compact(session.agent)
    assert report is not None and report.compacted and report.summary_source == "model"
    requests = model.calls[before:]
    assert requests and not any(_is_compaction(line.sent(r)) for r in requests)
    assert "You are the context compactor" in json.dumps(line.sent(requests[0])[0])
    assert requests[0]["tools"] in (None, [])
    await session.close()


@pytest.mark.parametrize("case", ["plain", "other_model", "stale"])
async def test_plain_request_when_the_prefix_does_not_apply(
    line: Line, tmp_path: Path, case: str
) -> None:
    """`request: plain`; a compactor model that is not the agent's (no shared cache); a
    second compaction before the agent's next call (the last prompt shows what left)."""
    model = _shared(line)
    helper = _shared(line) if case == "other_model" else None
    if helper is not None:
        setattr(helper, "model_name" if line.is_1x else "model", "another-model")
    session = _setup(
        line, tmp_path, model, helper, **({"request": "plain"} if case == "plain" else {})
    )
    await _turns(line, session, 3)
    calls = helper.calls if helper is not None else model.calls
    if case == "stale":
        first = await session.run(force=True, keep_ratio=0.2)
        assert first is not None and first.compacted and _is_compaction(line.sent(calls[-1]))
    before = len(calls)
    report = await session.manager.compact(session.agent)
    assert report is not None and report.compacted
    new = calls[before:]
    assert new and not any(_is_compaction(line.sent(r)) for r in new)
    await session.close()


async def test_a_rejected_prefix_answer_is_retried_then_falls_back(
    line: Line, tmp_path: Path
) -> None:
    """An answer without the headings is retried once in the same form (the error in the new
    instruction, the same prefix), then the extractive summary stands in: nothing grows."""
    model = _shared(line, answer="I summarised it.")
    session = _setup(line, tmp_path, model)
    await _turns(line, session, 2)
    before = len(model.calls)
    report = await session.manager.compact(session.agent)
    requests = [line.sent(r) for r in model.calls[before:] if _is_compaction(line.sent(r))]
    assert len(requests) == 2
    assert requests[0][:-1] == requests[1][:-1]
    assert "was rejected" in json.dumps(requests[1][-1])
    assert report is not None and report.summary_source == "extractive"
    assert report.tokens_after <= report.tokens_before
    await session.close()


async def test_auto_makes_prefix_requests_once_the_provider_reports_cache_reads(
    line: Line, tmp_path: Path
) -> None:
    """`request: auto` (the default): plain while the provider has reported no cache reads
    (one that caches nothing would bill the whole prefix request at full price), prefix
    after it has."""
    model = _shared(line)
    session = _setup(line, tmp_path, model, request="auto")
    await _turns(line, session, 2)
    before = len(model.calls)
    await session.run(force=True, keep_ratio=0.3)
    assert model.calls[before:] and not _is_compaction(line.sent(model.calls[-1]))
    model.usage = usage(2_000, 10, cached_tokens=1_500)
    await _turns(line, session, 2)
    before = len(model.calls)
    report = await session.manager.compact(session.agent)
    assert report is not None and report.compacted
    assert _is_compaction(line.sent(model.calls[before]))
    await session.close()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_over_http_the_body_starts_with_the_agents_last_request(
    line: Line, tmp_path: Path, stream: bool
) -> None:
    """AgentScope's real `OpenAIChatModel` of the installed line against the local
    OpenAI-compatible server, the server reporting cache reads (so `auto` sends the prefix
    request): the compaction request's body holds the last request's messages and tools,
    then one message."""
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
        session = line.session(
            config,
            model,
            {"run_shell": _run_shell},
            model=model,
            formatter=formatter,
            sys_prompt="You fix code.",
        )
        for turn in range(2):
            srv.script += [
                Reply(tool="run_shell", arguments={"arg": f"pytest -x  # {turn}"}),
                Reply(text=f"Turn {turn} done."),
            ]
            await session.turn(f"Fix the failing test, part {turn}.")
        before = len(srv.requests)
        report = await session.manager.compact(session.agent)
        body, last = srv.requests[before], srv.requests[before - 1]
        assert report is not None and report.compacted and report.summary_source == "model"
        assert MARK in json.dumps(body["messages"][-1])
        assert body["messages"][:-1] == last["messages"]
        assert body["tools"] == last["tools"]
        assert body.get("tool_choice") == last.get("tool_choice")
        assert "- find the TODOs" in session.summary()
        await session.close()


async def test_a_prefix_request_the_provider_finds_too_long_goes_plain(
    line: Line, tmp_path: Path
) -> None:
    """The provider's context-length error on the prefix request (our count was low): the
    plain request, smaller, is made next; the summary is the model's."""
    model = _shared(line)
    shared = model.route

    def too_long(messages: list[dict[str, Any]]) -> Any:
        """Rejects the prefix request with OpenAI's context-length error."""
        if _is_compaction(messages):
            model.calls[-1]["rejected"] = True
            return ValueError("Error code: 400 - This model's maximum context length is 8192")
        return shared(messages)

    model.route = too_long
    session = _setup(line, tmp_path, model)
    await _turns(line, session, 2)
    before = len(model.calls)
    report = await session.manager.compact(session.agent)
    calls = model.calls[before:]
    assert calls[0].get("rejected")
    assert "You are the context compactor" in json.dumps(line.sent(calls[1])[0])
    assert report is not None and report.compacted and report.summary_source == "model"
    await session.close()
