"""The package's prompt-cache breakpoints through AgentScope 2.x's real model classes against
the providers' simulators (issue 45): Model Studio (DashScope) and Anthropic read back what
the marks wrote, OpenAI's calls carry the tenant's `prompt_cache_key`, and a model call of
another agent on the same model goes out unmarked."""

from __future__ import annotations

import json
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

LOG = log_text(400)


async def _session(model: Any, work: Path, turns: int = 2, **config: Any) -> Any:
    from agentscope.message import UserMsg

    from agentscope_ctx import ContextConfig, ContextManager

    manager = ContextManager(
        ContextConfig(
            working_dir=work, max_input_tokens=60_000, token_counter="cl100k_base", **config
        )
    )
    agent = log_agent(model, manager, LOG)
    for turn in range(turns):
        await agent.reply(UserMsg(name="user", content=f"Task {turn}: read the log parts."))
    await manager.close()
    return agent


def _markers(body: dict[str, Any]) -> int:
    return json.dumps(body).count('"cache_control"')


async def test_model_studio_reads_back_what_the_marks_wrote(tmp_path: Path) -> None:
    from agentscope.credential import DashScopeCredential
    from agentscope.model import DashScopeChatModel

    sim = chat_sim.ChatSim(
        responder(3), profile="dashscope", clock=chat_sim.ManualClock(), too_many_markers="reject"
    )
    with chat_sim.serve(sim) as url:
        model = DashScopeChatModel(
            credential=DashScopeCredential(api_key="sk-test", base_url=url),
            model="qwen-plus",
            stream=True,
            max_retries=0,
        )
        await _session(model, tmp_path)
    assert [c.status for c in sim.calls] == [200] * len(sim.calls) and len(sim.calls) == 8
    assert all(1 <= _markers(body) <= 4 for body in sim.requests)
    # the first prompt is under Model Studio's 1,024-token minimum: nothing written; from the
    # second on, each call reads the previous one's prefix from the explicit cache
    assert sim.calls[0].prompt_tokens < 1_024 and sim.calls[1].cache_creation_tokens > 0
    assert all(c.cached_tokens >= p.prompt_tokens for p, c in pairwise(sim.calls[1:]))
    assert sum(c.cache_creation_tokens for c in sim.calls) > 0
    totals = sim.summary()
    assert totals["read_ratio"] > 0.6, totals


async def test_off_sends_no_marks_and_another_call_on_the_model_none(tmp_path: Path) -> None:
    """`cache.mode: off` leaves the requests as AgentScope makes them; a direct call of the
    same model object (the formatter stays wrapped) carries no mark either."""
    from agentscope.credential import DashScopeCredential
    from agentscope.message import SystemMsg, UserMsg
    from agentscope.model import DashScopeChatModel

    sim = chat_sim.ChatSim(responder(1), profile="dashscope", clock=chat_sim.ManualClock())
    with chat_sim.serve(sim) as url:
        model = DashScopeChatModel(
            credential=DashScopeCredential(api_key="sk-test", base_url=url),
            model="qwen-plus",
            stream=False,
            max_retries=0,
        )
        await _session(model, tmp_path / "auto", turns=1)
        marked = len(sim.requests)
        assert all(_markers(body) for body in sim.requests)
        await model([SystemMsg("system", "s"), UserMsg("user", "Task 9: hi")])
        assert _markers(sim.requests[marked]) == 0
        await _session(model, tmp_path / "off", turns=1, cache={"mode": "off"})
    assert len(sim.requests) > marked + 1
    assert all(_markers(body) == 0 for body in sim.requests[marked:])


async def test_a_keyed_call_puts_the_tenants_prompt_cache_key_on_the_wire() -> None:
    """On OpenAI's API the 2.x adapter calls the model through `KeyedModel` (`call_cache`
    gives the key for `provider_of(model) == "openai"`, tests/models/test_cache.py): the key
    reaches the request body through AgentScope's real `OpenAIChatModel`, and the simulator
    routes the session's requests to one cache by it."""
    from agentscope.credential import OpenAICredential
    from agentscope.message import SystemMsg, UserMsg
    from agentscope.model import OpenAIChatModel

    from agentscope_ctx.core._tenant import Tenant
    from agentscope_ctx.models._cache import KeyedModel, cache_key

    tenant = Tenant.of("analyst", "s1", user="alice")
    key = cache_key(tenant.agent, tenant.session)
    sim = chat_sim.ChatSim(responder(0), profile="openai", clock=chat_sim.ManualClock())
    with chat_sim.serve(sim) as url:
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key="sk-test", base_url=url),
            model="gpt-5",
            stream=False,
            max_retries=0,
        )
        keyed = KeyedModel(model, key)
        history = [SystemMsg("system", "You read logs. " * 400), UserMsg("user", "Task 0: go")]
        await keyed(messages=history, tools=None, tool_choice=None)
        await keyed(messages=[*history, UserMsg("user", "and again")], tools=None)
    assert [body.get("prompt_cache_key") for body in sim.requests] == [key, key]
    assert sim.calls[1].cached_tokens >= 1_024
