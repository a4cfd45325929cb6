"""Prompt-cache breakpoints on a formatted request (`agentscope_ctx.models._cache`, issue 45):
where the marks go in each format, at most four, never on a thinking block, nothing given
changed; and which provider a real AgentScope model class is (both lines)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_ctx._line import IS_1X
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.models._cache import (
    CachePlan,
    cache_key,
    cache_life,
    call_cache,
    helper_cache,
    mark,
    provider_of,
    retention_of,
    style_of,
)

EPHEMERAL = {"type": "ephemeral"}


def _anthropic_prompt() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": [{"type": "text", "text": "You are careful."}]},
        {"role": "user", "content": [{"type": "text", "text": "<summary>...</summary>"}]},
        {"role": "user", "content": [{"type": "text", "text": "review the logs"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "plan", "signature": "s"},
                {"type": "tool_use", "id": "c1", "name": "shell", "input": {}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": []}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c2", "name": "shell", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c2", "content": []}]},
    ]


def _marked_at(messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [
        (i, k)
        for i, msg in enumerate(messages)
        if isinstance(msg.get("content"), list)
        for k, block in enumerate(msg["content"])
        if "cache_control" in block
    ]


def test_anthropic_marks_system_summary_stable_result_and_the_newest() -> None:
    prompt = _anthropic_prompt()
    before = copy.deepcopy(prompt)
    out = mark(prompt, CachePlan("anthropic", summary=True, stable_calls=("c1",)))
    assert prompt == before  # nothing given is changed
    assert _marked_at(out) == [(0, 0), (1, 0), (4, 0), (6, 0)]
    assert all(out[i] is prompt[i] for i in (2, 3, 5))  # unmarked messages are the same objects
    assert out[4]["content"][0]["cache_control"] == EPHEMERAL
    # after a batch of cuts: the previous stable call (where this call reads) and the new
    # one; five candidates, the system prompt's mark gives way (the summary's holds it)
    longer = [*prompt, {"role": "user", "content": "and now?"}]
    both = mark(longer, CachePlan("anthropic", summary=True, stable_calls=("c1", "c2")))
    assert _marked_at(both) == [(1, 0), (4, 0), (6, 0), (7, 0)]
    ttl = mark(prompt, CachePlan("anthropic", summary=False, stable_calls=(), ttl="1h"))
    assert _marked_at(ttl) == [(0, 0), (6, 0)]
    assert ttl[0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_a_thinking_block_never_carries_a_mark() -> None:
    """The newest message opening a thinking loop: its tool call carries the mark; a message
    of thinking alone gets none."""
    prompt = _anthropic_prompt()[:4]
    out = mark(prompt, CachePlan("anthropic", summary=False, stable_calls=()))
    assert _marked_at(out) == [(0, 0), (3, 1)]
    alone = [prompt[0], {"role": "assistant", "content": [prompt[3]["content"][0]]}]
    assert _marked_at(mark(alone, CachePlan("anthropic", False, ()))) == [(0, 0)]


def test_chat_format_marks_string_contents_and_tool_messages() -> None:
    prompt: list[dict[str, Any]] = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "summary"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "out 1"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c2"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "out 2"},
    ]
    out = mark(prompt, CachePlan("chat", summary=True, stable_calls=("c1",)))
    assert _marked_at(out) == [(0, 0), (1, 0), (3, 0), (5, 0)]
    assert out[3]["content"] == [{"type": "text", "text": "out 1", "cache_control": EPHEMERAL}]
    # a message that cannot carry one (tool calls, no text) is left unmarked
    tail = mark(prompt[:5], CachePlan("chat", summary=False, stable_calls=()))
    assert _marked_at(tail) == [(0, 0)]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from(["text", "thinking", "call", "result"]), min_size=1, max_size=30),
    st.booleans(),
    st.sampled_from([(), ("c0",), ("c3",), ("c1", "c9"), ("c0", "c3")]),
)
def test_at_most_four_marks_and_the_text_unchanged(
    kinds: list[str], summary: bool, stable: tuple[str, ...]
) -> None:
    prompt: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for i, kind in enumerate(kinds):
        if kind == "text":
            prompt.append({"role": "user", "content": f"t{i}"})
        elif kind == "thinking":
            prompt.append({"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]})
        elif kind == "call":
            block = {"type": "tool_use", "id": f"c{i}", "name": "f", "input": {}}
            prompt.append({"role": "assistant", "content": [block]})
        else:
            block = {"type": "tool_result", "tool_use_id": f"c{i}", "content": "r"}
            prompt.append({"role": "user", "content": [block]})
    out = mark(prompt, CachePlan("anthropic", summary, stable))
    assert len(_marked_at(out)) <= 4
    blocks = [b for m in out if isinstance(m["content"], list) for b in m["content"]]
    assert not any("cache_control" in b for b in blocks if b.get("type") == "thinking")

    def strip(msgs: list[dict[str, Any]]) -> list[Any]:
        def text(content: Any) -> Any:
            if isinstance(content, str):
                return [{"type": "text", "text": content}]
            return [{k: v for k, v in b.items() if k != "cache_control"} for b in content]

        return [(m["role"], text(m["content"])) for m in msgs]

    assert strip(out) == strip(prompt)


def _models() -> dict[str, Any]:
    """Real AgentScope model objects of this line (no request is made)."""
    from agentscope.model import AnthropicChatModel, DashScopeChatModel, OpenAIChatModel

    if IS_1X:
        return {
            "anthropic": AnthropicChatModel("claude-sonnet-4-5", api_key="k"),
            "dashscope": DashScopeChatModel("qwen-plus", api_key="k"),
            "openai": OpenAIChatModel("gpt-5", api_key="k"),
            "compatible": OpenAIChatModel(
                "llama", api_key="k", client_kwargs={"base_url": "http://127.0.0.1:8000/v1"}
            ),
            "studio": OpenAIChatModel(
                "qwen-plus",
                api_key="k",
                client_kwargs={"base_url": "https://dashscope.aliyuncs.com/compatible-mode/v1"},
            ),
        }
    from agentscope.credential import (
        AnthropicCredential,
        DashScopeCredential,
        OpenAICredential,
    )
    from pydantic import SecretStr

    key = SecretStr("k")
    return {
        "anthropic": AnthropicChatModel(
            credential=AnthropicCredential(api_key=key), model="claude-sonnet-4-5"
        ),
        "dashscope": DashScopeChatModel(
            credential=DashScopeCredential(api_key=key), model="qwen-plus"
        ),
        "openai": OpenAIChatModel(credential=OpenAICredential(api_key=key), model="gpt-5"),
        "compatible": OpenAIChatModel(
            credential=OpenAICredential(api_key=key, base_url="http://127.0.0.1:8000/v1"),
            model="llama",
        ),
        "studio": OpenAIChatModel(
            credential=OpenAICredential(
                api_key=key, base_url="https://dashscope.aliyuncs.com/compatible-mode/v1"
            ),
            model="qwen-plus",
        ),
    }


def test_the_responses_api_on_openais_url_is_openai() -> None:
    """2.x `OpenAIResponseModel`: OpenAI's own API (a `prompt_cache_key`, OpenAI's cache
    life) on OpenAI's URL; elsewhere nothing (its requests take no `cache_control`)."""
    if IS_1X:
        return  # (no Responses model on 1.x)
    from agentscope.credential import OpenAICredential
    from agentscope.model import OpenAIResponseModel
    from pydantic import SecretStr

    def responses(url: str | None) -> Any:
        credential = OpenAICredential(api_key=SecretStr("k"), base_url=url)
        return OpenAIResponseModel(credential=credential, model="gpt-5")

    assert provider_of(responses(None)) == provider_of(responses("https://api.openai.com/v1"))
    assert provider_of(responses(None)) == "openai"
    assert provider_of(responses("https://dashscope.aliyuncs.com/api/v2/apps")) == "other"
    tenant = Tenant.of("assistant", "s1")
    plan, key = call_cache(responses(None), "auto", "5m", lambda: (True, ()), lambda: tenant)
    assert plan is None and key == cache_key(tenant.agent, tenant.session)


def test_provider_of_real_model_classes_and_what_each_mode_gives() -> None:
    models = _models()
    assert {name: provider_of(m) for name, m in models.items()} == {
        "anthropic": "anthropic",
        # 1.x's DashScopeChatModel speaks the native API: no marks (docs/providers.md)
        "dashscope": "other" if IS_1X else "dashscope",
        "openai": "openai",
        "compatible": "compatible",
        "studio": "dashscope",
    }
    assert [style_of(p, "auto") for p in ("anthropic", "dashscope", "openai", "compatible")] == [
        "anthropic",
        "chat",
        None,
        None,
    ]
    assert style_of("compatible", "explicit") == "chat"
    assert style_of("anthropic", "off") is None

    def marks() -> tuple[bool, tuple[str, ...]]:
        return True, ("c1",)

    tenant = Tenant.of("assistant", "s1", user="alice")
    plan, key = call_cache(models["anthropic"], "auto", "5m", marks, lambda: tenant)
    assert plan == CachePlan("anthropic", True, ("c1",)) and key is None
    plan, key = call_cache(models["openai"], "auto", "5m", marks, lambda: tenant)
    assert plan is None and key == cache_key(tenant.agent, tenant.session)
    assert key.startswith("actx-") and "alice" not in key  # names nobody
    assert call_cache(models["openai"], "off", "5m", marks, lambda: tenant) == (None, None)
    plan, _ = call_cache(models["anthropic"], "auto", "1h", marks, lambda: tenant)
    assert plan is not None and mark([{"role": "user", "content": "x"}], plan)[0]["content"][0][
        "cache_control"
    ] == {"type": "ephemeral", "ttl": "1h"}
    # Model Studio's explicit cache lives 5 minutes only: no ttl on its marks
    plan, _ = call_cache(models["studio"], "auto", "1h", marks, lambda: tenant)
    assert plan is not None and plan.ttl == "5m"
    assert mark([{"role": "user", "content": "x"}], plan)[0]["content"][0]["cache_control"] == (
        EPHEMERAL
    )
    other = Tenant.of("assistant", "s2", user="alice")
    assert cache_key(other.agent, other.session) != key


def test_how_long_each_providers_idle_cache_lives() -> None:
    """`cache_life` (`ContextPipeline.cold`): a marked entry's TTL on Anthropic (5 minutes or
    an hour), 5 minutes on Model Studio and behind an explicit gateway, 10 on OpenAI's
    automatic cache (marks or not), 24 hours with ``prompt_cache_retention: 24h``; not known
    where nothing is marked."""
    assert cache_life("anthropic", "auto", "5m") == 300
    assert cache_life("anthropic", "auto", "1h") == 3_600
    assert cache_life("dashscope", "auto", "1h") == 300
    assert cache_life("compatible", "explicit", "5m") == 300
    assert cache_life("compatible", "explicit", "1h") == 3_600  # the gateway was told 1h
    assert cache_life("openai", "auto", "5m") == cache_life("openai", "off", "5m") == 600
    assert cache_life("openai", "auto", "5m", "in_memory") == 600
    assert cache_life("openai", "auto", "5m", "24h") == 86_400
    assert cache_life("anthropic", "off", "5m") is None
    assert cache_life("dashscope", "off", "5m") is None
    assert cache_life("compatible", "auto", "5m") is None
    assert cache_life("other", "auto", "5m") is None


def test_the_retention_an_openai_model_asks_for() -> None:
    """`retention_of` reads ``prompt_cache_retention`` where each line's real
    `OpenAIChatModel` sends it from: 1.x's ``generate_kwargs`` (or the ``extra_body`` in
    them), 2.x's ``extra_body``; `None` where it is not set."""
    from agentscope.model import OpenAIChatModel

    if IS_1X:
        plain = OpenAIChatModel("gpt-5", api_key="k")
        direct = OpenAIChatModel(
            "gpt-5", api_key="k", generate_kwargs={"prompt_cache_retention": "24h"}
        )
        body = OpenAIChatModel(
            "gpt-5", api_key="k", generate_kwargs={"extra_body": {"prompt_cache_retention": "24h"}}
        )
        models = [direct, body]
    else:
        from agentscope.credential import OpenAICredential
        from pydantic import SecretStr

        credential = OpenAICredential(api_key=SecretStr("k"))
        plain = OpenAIChatModel(credential=credential, model="gpt-5")
        models = [
            OpenAIChatModel(
                credential=credential, model="gpt-5", extra_body={"prompt_cache_retention": "24h"}
            )
        ]
    assert retention_of(plain) is None
    assert [retention_of(m) for m in models] == ["24h"] * len(models)
    assert cache_life(provider_of(models[0]), "auto", "5m", retention_of(models[0])) == 86_400


def test_a_helper_agents_calls_are_marked_where_the_provider_takes_marks() -> None:
    """`helper_cache` (the Summarizer's run): the system prompt and the newest message on
    Anthropic and Model Studio (never a ``1h`` there), nothing on OpenAI (it caches by
    itself) nor on other servers unless ``explicit``."""
    models = _models()
    assert helper_cache(models["anthropic"], "auto", "1h") == CachePlan(
        "anthropic", False, (), "1h"
    )
    assert helper_cache(models["studio"], "auto", "1h") == CachePlan("chat", False, (), "5m")
    assert helper_cache(models["openai"], "auto", "5m") is None
    assert helper_cache(models["compatible"], "auto", "5m") is None
    assert helper_cache(models["compatible"], "explicit", "5m") == CachePlan("chat", False, ())
    assert helper_cache(models["anthropic"], "off", "5m") is None
    plan = helper_cache(models["anthropic"], "auto", "5m")
    assert plan is not None
    prompt = [
        {"role": "system", "content": "You keep notes."},
        {"role": "user", "content": "the transcript"},
        {"role": "assistant", "content": [{"type": "text", "text": "reading"}]},
    ]
    marked = mark(prompt, plan)
    controls = [
        m["content"][-1].get("cache_control") if isinstance(m["content"], list) else None
        for m in marked
    ]
    assert controls == [EPHEMERAL, None, EPHEMERAL]
