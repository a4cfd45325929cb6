"""The helpers' requests read what was cached before them (issue 22 item 5, issue 45), on the
installed AgentScope line: a session through AgentScope's real model classes against the
providers' simulators, compacting inside its tool loops, the compactor and the Summarizer on
the same provider (``compactor.request: prefix``).

The request starts with the agent's last prompt as it was sent, so that the provider serves
it from the cache; that needs what the agent's call carried for the cache: on Anthropic a
`cache_control` mark (a request without one reads nothing), on OpenAI the session's
`prompt_cache_key` (without it the request goes to another machine's cache). Before stop 57
the request carried neither: the simulators read 0 tokens of every compaction request on
Anthropic, and on OpenAI each missed what the agent's keyed requests had cached. The
Summarizer, a run of several calls on one growing prompt, had no marks either: on Anthropic
none of its calls read the one before it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx._line import IS_1X
from tests.support import anthropic_sim, chat_sim
from tests.support.guard_session import LAZY
from tests.support.thinking_session import run_1x, run_2x

MARK = "[agentscope_ctx: context compaction."
STEPS, LINES, BUDGET = 8, 200, 6_000
SUMMARY = LAZY.replace("- complete the task", "- report the failures of the log parts")


def _compacting(messages: list[dict[str, Any]]) -> bool:
    return bool(messages) and MARK in json.dumps(messages[-1], ensure_ascii=False)


def _next_step(messages: list[dict[str, Any]], issued: dict[int, int]) -> tuple[int, int]:
    """The newest task's number and how many calls the model made for it."""
    texts = [json.dumps(m.get("content"), ensure_ascii=False) for m in messages]
    at = max(i for i, t in enumerate(texts) if "Task " in t and "read log parts" in t)
    turn = int(texts[at].split("Task ", 1)[1].split(":", 1)[0])
    return turn, issued.get(turn, 0)


def _summarizing(body: dict[str, Any]) -> bool:
    return any(str(t.get("name", "")).endswith("memory_file") for t in body.get("tools") or [])


def _opening(body: dict[str, Any]) -> str:
    """The text of a request's first message (its marks aside)."""
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def _summarizer_step(body: dict[str, Any], turn: Callable[..., Any]) -> Any:
    """The Summarizer's run: read today's notes, append one lesson, answer (`turn` makes the
    simulator's `Turn`)."""
    text = json.dumps(body, ensure_ascii=False)
    day = re.findall(r"(\d{4}-\d{2}-\d{2})\.md", text)[0]
    done = text.count('"tool_result"') + text.count('"role": "tool"')
    if done == 0:
        return turn(tool_calls=[("read_memory_file", {"file_path": f"{day}.md"})])
    if done == 1:
        lesson = {"file_path": f"{day}.md", "content": "- Lesson: timeouts come in bursts."}
        return turn(tool_calls=[("write_memory_file", lesson)])
    return turn(text="Recorded one lesson.")


def _responder(turn: Callable[..., Any]) -> Any:
    """The model of every request (`turn`: `anthropic_sim.Turn` or `chat_sim.Turn`): the
    compactor's gets `SUMMARY`, the Summarizer's its run, the agent's `STEPS` calls of
    `read_log` per task, then the answer."""
    issued: dict[int, int] = {}

    def answer(body: dict[str, Any]) -> Any:
        if _compacting(body["messages"]):
            return turn(text=SUMMARY)
        if _summarizing(body):
            return _summarizer_step(body, turn)
        task, done = _next_step(body["messages"], issued)
        if done >= STEPS:
            return turn(text=f"Task {task}: timeouts in the queue.")
        issued[task] = done + 1
        return turn(tool_calls=[("read_log", {"part": task * 100 + done})])

    return answer


def _anthropic_model(url: str) -> Any:
    from agentscope.model import AnthropicChatModel

    if IS_1X:
        return AnthropicChatModel(
            "claude-sonnet-4-5",
            api_key="sk-test",
            max_tokens=2048,
            stream=True,
            client_kwargs={"base_url": url, "max_retries": 0},
        )
    from agentscope.credential import AnthropicCredential

    return AnthropicChatModel(
        credential=AnthropicCredential(api_key="sk-test", base_url=url),
        model="claude-sonnet-4-5",
        parameters=AnthropicChatModel.Parameters(max_tokens=2048),
        stream=True,
        max_retries=0,
        client_kwargs={"max_retries": 0},
    )


def _openai_model(url: str) -> Any:
    """On OpenAI's URL (the package sends it a `prompt_cache_key`), routed to `url`."""
    from agentscope.model import OpenAIChatModel

    if IS_1X:
        return OpenAIChatModel(
            "gpt-5",
            api_key="sk-test",
            stream=True,
            client_kwargs={
                "base_url": chat_sim.OPENAI_URL,
                "max_retries": 0,
                **chat_sim.openai_routed(url),
            },
        )
    from agentscope.credential import OpenAICredential

    return OpenAIChatModel(
        credential=OpenAICredential(api_key="sk-test", base_url=chat_sim.OPENAI_URL),
        model="gpt-5",
        stream=True,
        max_retries=0,
        client_kwargs={"max_retries": 0, **chat_sim.openai_routed(url)},
    )


async def _session(
    work: Path, model: Any, compactor_model: Any, formatter: Any = None, summarizer: bool = False
) -> None:
    config = ContextConfig(
        working_dir=work,
        max_input_tokens=BUDGET,
        token_counter="cl100k_base",
        compactor={"request": "prefix"},
        summarizer={"enabled": summarizer},
    )
    manager = ContextManager(config, model=compactor_model, formatter=formatter)
    try:
        if IS_1X:
            await run_1x(manager, model, 3, STEPS, LINES, formatter=formatter)
        else:
            await run_2x(manager, model, 3, STEPS, LINES)
    finally:
        await manager.close()


async def _on_anthropic(work: Path, *, summarizer: bool = False) -> anthropic_sim.AnthropicSim:
    """The session on the Anthropic simulator (agent and helpers on `AnthropicChatModel`)."""
    sim = anthropic_sim.AnthropicSim(_responder(anthropic_sim.Turn), model_window=BUDGET * 4)
    with anthropic_sim.serve(sim) as url:
        formatter = None
        if IS_1X:
            from agentscope.formatter import AnthropicChatFormatter

            formatter = AnthropicChatFormatter()
        await _session(
            work, _anthropic_model(url), _anthropic_model(url), formatter, summarizer=summarizer
        )
    assert all(c.status == 200 for c in sim.calls), [c.error for c in sim.calls]
    return sim


async def _on_openai(work: Path) -> chat_sim.ChatSim:
    """The session on the simulator's OpenAI profile (`OpenAIChatModel` on OpenAI's URL)."""
    sim = chat_sim.ChatSim(_responder(chat_sim.Turn), profile="openai")
    with chat_sim.serve(sim) as url:
        formatter = None
        if IS_1X:
            from agentscope.formatter import OpenAIChatFormatter

            formatter = OpenAIChatFormatter()
        await _session(work, _openai_model(url), _openai_model(url), formatter)
    assert all(c.status == 200 for c in sim.calls), [c.error for c in sim.calls]
    return sim


async def test_on_anthropic_the_compaction_request_reads_the_agents_cached_prompt(
    tmp_path: Path,
) -> None:
    """Each compaction request carries the agent's marks (at most 4, the newest on the
    request's last message) and reads most of its prompt from the cache."""
    sim = await _on_anthropic(tmp_path)
    asked = [i for i, body in enumerate(sim.requests) if _compacting(body["messages"])]
    assert asked, "the session never compacted"
    for i in asked:
        call = sim.calls[i]
        assert 1 <= call.breakpoints <= 4
        assert call.cache_read_input_tokens >= 0.8 * call.prompt_tokens, (i, call)


async def test_on_openai_the_compaction_request_goes_with_the_sessions_key(
    tmp_path: Path,
) -> None:
    """Each compaction request carries the agent's `prompt_cache_key`, reaches the machine
    that cached the agent's prompt, and reads most of it."""
    sim = await _on_openai(tmp_path)
    asked = [i for i, body in enumerate(sim.requests) if _compacting(body["messages"])]
    assert asked, "the session never compacted"
    keys = {body.get("prompt_cache_key") for body in sim.requests}
    assert len(keys) == 1 and None not in keys  # the agent's and the compactor's alike
    for i in asked:
        call = sim.calls[i]
        assert call.cached_tokens >= 0.8 * call.prompt_tokens, (i, call)


async def test_on_anthropic_each_summarizer_call_reads_the_one_before_it(tmp_path: Path) -> None:
    """The Summarizer's run after a compaction (read the notes, write one, answer): its
    calls carry marks (the system prompt, the newest message), and each call after the
    first reads all of the one before it from the cache."""
    sim = await _on_anthropic(tmp_path, summarizer=True)
    runs = [i for i, body in enumerate(sim.requests) if _summarizing(body)]
    assert len(runs) >= 3, "no Summarizer run of three calls"
    followed = 0
    for before, after in pairwise(runs):
        if _opening(sim.requests[after]) != _opening(sim.requests[before]):
            continue  # another run
        followed += 1
        assert 1 <= sim.calls[after].breakpoints <= 4
        assert sim.calls[after].cache_read_input_tokens >= sim.calls[before].prompt_tokens
    assert followed >= 2
