"""A task that opens on an expired prompt cache gets the cuts due applied at once (issue 45
item 3, `ContextPipeline.cold`), through AgentScope 2.x's `Agent` and `DashScopeChatModel`
against the Model Studio simulator, the package and the simulator on one manual clock.

Within a task (a call every few seconds) the outputs that slid out of the newest one wait
under the trigger, and every call reads the previous prompt from the cache. After six idle
minutes (past the 5-minute TTL) the next call writes the whole prompt anyway: the waiting
cuts go into that call, and the calls after it read again. The same when the second task
runs on another worker, from the first's saved state.

On OpenAI's own API (`OpenAIChatModel`, its requests routed to the simulator's OpenAI
profile) the cache lives 10 minutes, or 24 hours where the model asks for
``prompt_cache_retention: 24h``: then nothing is cut after 11 idle minutes, and the call
reads the whole previous prompt; `cache.cut_when_expired: false` keeps the cuts waiting."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from agentscope_ctx._line import AGENTSCOPE_VERSION, IS_1X
from tests.support import chat_sim
from tests.support.log_agent import log_agent, log_text, responder

pytestmark = pytest.mark.skipif(
    IS_1X,
    reason=f"AgentScope 2.x only: drives a 2.x Agent; AgentScope {AGENTSCOPE_VERSION} is installed",
)

LOG = log_text(300)
STEPS = 4


async def _two_tasks(
    work: Path,
    idle: float,
    *,
    workers: int = 1,
    openai: dict[str, Any] | None = None,
    cache: dict[str, Any] | None = None,
) -> chat_sim.ChatSim:
    """Two tasks, `idle` seconds between them; the simulator with its calls. With two
    `workers`, each task runs on its own manager and agent, the second made from the first's
    state (as an app's storage hands it over: JSON). With `openai` (the model's `extra_body`)
    the model is OpenAI's (`_openai_model`), else Model Studio's; `cache`: the config's."""
    from agentscope.credential import DashScopeCredential
    from agentscope.message import UserMsg
    from agentscope.model import DashScopeChatModel
    from agentscope.state import AgentState

    clock = chat_sim.ManualClock()
    profile = "dashscope" if openai is None else "openai"
    sim = chat_sim.ChatSim(responder(STEPS), profile=profile, clock=clock)
    with chat_sim.serve(sim) as url:
        model = (
            DashScopeChatModel(
                credential=DashScopeCredential(api_key="sk-test", base_url=url),
                model="qwen-plus",
                stream=True,
                max_retries=0,
            )
            if openai is None
            else _openai_model(url, openai)
        )
        saved = None
        for task in range(2):
            if task:
                clock.advance(idle)
            if task == 0 or workers == 2:
                state = None if saved is None else AgentState.model_validate_json(saved)
                manager, agent = _worker(work, model, state, clock, cache)
            await agent.reply(UserMsg(name="user", content=f"Task {task}: read the log parts."))
            clock.advance(5)
            if workers == 2:
                saved = agent.state.model_dump_json()
                await manager.close()
        if workers == 1:
            await manager.close()
    return sim


def _openai_model(url: str, extra_body: dict[str, Any]) -> Any:
    """AgentScope's `OpenAIChatModel` on OpenAI's own URL (so the package takes it for
    OpenAI's API), its requests sent to the simulator at `url` instead."""
    from agentscope.credential import OpenAICredential
    from agentscope.model import OpenAIChatModel

    return OpenAIChatModel(
        credential=OpenAICredential(api_key="sk-test", base_url=chat_sim.OPENAI_URL),
        model="gpt-5",
        stream=True,
        max_retries=0,
        client_kwargs=chat_sim.openai_routed(url),
        extra_body=extra_body or None,
    )


def _worker(
    work: Path,
    model: Any,
    state: Any,
    clock: chat_sim.ManualClock,
    cache: dict[str, Any] | None = None,
) -> tuple[Any, Any]:
    """A manager and its agent (from `state`, if given), the package on `clock`."""
    from agentscope_ctx import ContextConfig, ContextManager

    manager = ContextManager(
        ContextConfig(
            working_dir=work,
            max_input_tokens=60_000,
            token_counter="cl100k_base",
            tool_result={"recent_n": 1, "old_max_bytes": 2_048},
            **({} if cache is None else {"cache": cache}),
        )
    )
    agent = log_agent(model, manager, LOG, state)
    manager._binding(agent).pipeline.clock = clock  # the session's time
    return manager, agent


def _tool_sizes(body: dict[str, Any]) -> list[int]:
    """The size of each tool output's text (a `cache_control` mark makes a content a list)."""
    return [len(_text(m["content"])) for m in body["messages"] if m["role"] == "tool"]


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


@pytest.mark.parametrize("workers", [1, 2])
async def test_the_cuts_due_go_into_the_call_after_the_cache_expired(
    tmp_path: Path, workers: int
) -> None:
    """With two workers, the second knows from the state when the first's last call was."""
    sim = await _two_tasks(tmp_path / "cold", idle=360, workers=workers)
    calls, bodies = sim.calls, sim.requests
    assert [c.status for c in calls] == [200] * 2 * (STEPS + 1)
    first = STEPS + 1  # the second task's first call
    # task 1: no output rewritten, each call reading the one before it
    for before, after in pairwise(bodies[:first]):
        assert _tool_sizes(after)[: len(_tool_sizes(before))] == _tool_sizes(before)
    assert all(c.cached_tokens > 0 for c in calls[2:first])
    # task 2's first call: the cache expired (nothing read), and the outputs of task 1 out
    # of the newest one are cut to the old limits in it, all at once
    assert calls[first].cached_tokens == 0
    whole, cut = _tool_sizes(bodies[first - 1]), _tool_sizes(bodies[first])
    assert len(cut) == len(whole) == STEPS
    assert all(c < w for c, w in zip(cut[:-1], whole[:-1], strict=True))
    assert cut[-1] == whole[-1]
    # then, warm again: read back, and the new outputs wait again
    assert all(c.cached_tokens > 0 for c in calls[first + 1 :])
    assert _tool_sizes(bodies[-1])[:STEPS] == cut

    warm = await _two_tasks(tmp_path / "warm", idle=60, workers=workers)
    assert warm.calls[first].cached_tokens > 0  # within the TTL: read, and nothing cut
    assert _tool_sizes(warm.requests[first]) == _tool_sizes(warm.requests[first - 1])


@pytest.mark.parametrize(
    ("extra_body", "cache", "cut"),
    [
        ({}, None, True),  # OpenAI's 10 minutes: expired after 11
        ({"prompt_cache_retention": "24h"}, None, False),
        ({}, {"cut_when_expired": False}, False),
    ],
)
async def test_openais_cache_expires_by_its_retention_and_the_cuts_can_be_switched_off(
    tmp_path: Path, extra_body: dict[str, Any], cache: dict[str, Any] | None, cut: bool
) -> None:
    """After 11 idle minutes on OpenAI's API: the waiting cuts go into the next call where
    the cache is gone (10 minutes), not where the model keeps it 24 hours (the call reads
    the whole previous prompt: the simulator keeps a 24h entry that long), nor with
    `cut_when_expired: false`."""
    sim = await _two_tasks(tmp_path, idle=660, openai=extra_body, cache=cache)
    calls, bodies = sim.calls, sim.requests
    assert [c.status for c in calls] == [200] * 2 * (STEPS + 1)
    first = STEPS + 1
    whole, sent = _tool_sizes(bodies[first - 1]), _tool_sizes(bodies[first])
    assert (sent != whole) is cut
    if extra_body:
        assert all(b.get("prompt_cache_retention") == "24h" for b in bodies)
        assert calls[first].cached_tokens >= calls[first - 1].prompt_tokens - 128
