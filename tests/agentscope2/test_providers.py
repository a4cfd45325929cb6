"""`build_model`/`load_models` on AgentScope 2.x: each provider's 2.x model from the same
configs as on 1.x, offline; the real 2.x `OpenAIChatModel` (openai SDK, credential, its own
formatter) against the local OpenAI-compatible server, plain JSON and SSE streaming, alone
and inside a real 2.x `Agent` with the context middleware."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentscope.agent import Agent
from agentscope.formatter import (
    AnthropicChatFormatter,
    DashScopeChatFormatter,
    OpenAIChatFormatter,
)
from agentscope.message import TextBlock, ToolCallBlock, ToolResultBlock, UserMsg
from agentscope.model import (
    AnthropicChatModel,
    ChatResponse,
    DashScopeChatModel,
    OpenAIChatModel,
)
from agentscope.tool import FunctionTool, Toolkit

from agentscope_ctx import ConfigError, ContextConfig
from agentscope_ctx._providers import build_model, load_models
from agentscope_ctx.agentscope2 import ContextMiddleware
from tests.support.fakes import ALLOW
from tests.support.openai_server import (
    REPORTED_PROMPT_TOKENS,
    Reply,
    Server,
    build_report,
    check_report_reached_cut,
    model_fields,
    report_script,
    serving,
)

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
KEYS = ("OPENAI_API_KEY", "DASHSCOPE_API_KEY", "ANTHROPIC_API_KEY")


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEYS:
        monkeypatch.setenv(name, f"fake-{name.lower()}")


@pytest.fixture
def server() -> Iterator[Server]:
    with serving() as srv:
        yield srv


@pytest.mark.parametrize(
    ("provider", "model_cls", "formatter_cls", "key"),
    [
        ("openai", OpenAIChatModel, OpenAIChatFormatter, "fake-openai_api_key"),
        ("dashscope", DashScopeChatModel, DashScopeChatFormatter, "fake-dashscope_api_key"),
        ("anthropic", AnthropicChatModel, AnthropicChatFormatter, "fake-anthropic_api_key"),
    ],
)
def test_i14_4_each_provider_builds_a_2x_model_offline(
    provider: str, model_cls: type, formatter_cls: type, key: str, keys: None
) -> None:
    model, formatter = build_model(
        {"provider": provider, "model_name": "some-model", "max_tokens": 321}
    )
    assert isinstance(model, model_cls) and isinstance(formatter, formatter_cls)
    assert formatter is model.formatter  # a 2.x model owns its formatter
    assert model.model == "some-model" and model.stream is False  # our default, not 2.x's
    assert model.credential.api_key.get_secret_value() == key  # type: ignore[attr-defined]
    assert model.parameters.max_tokens == 321  # type: ignore[attr-defined]
    assert model.client.api_key == key  # type: ignore[attr-defined]


def test_i14_4_example_files_load_on_2x(keys: None) -> None:
    for name in ("openai", "dashscope", "anthropic", "local_openai"):
        models = load_models(CONFIGS / "providers" / f"{name}.yaml")
        assert models is not None and models.formatter is models.model.formatter
    openai = load_models(CONFIGS / "providers" / "openai.yaml")
    assert openai is not None and openai.model.parameters.temperature == 0.2  # type: ignore[attr-defined]
    # AgentScope's model card for gpt-4o-mini gives the context window
    assert openai.model.context_size == 128_000
    local = load_models(CONFIGS / "providers" / "local_openai.yaml")
    assert local is not None and local.model.context_size == 32_768  # no card: the config's
    dashscope = load_models(CONFIGS / "providers" / "dashscope.yaml")
    assert dashscope is not None and dashscope.compactor_model.model == "qwen-turbo"
    assert load_models(CONFIGS / "agent.yaml") is not None


def test_i14_4_base_urls_and_the_context_size(keys: None) -> None:
    local, _ = build_model(
        {
            "provider": "openai",
            "model_name": "Qwen/Qwen2.5-7B-Instruct",
            "base_url": "http://localhost:8000/v1",
            "api_key_env": None,
            "context_size": 32_768,
            "generate_kwargs": {"temperature": 0.1, "repetition_penalty": 1.05},
        }
    )
    assert isinstance(local, OpenAIChatModel)
    assert str(local.client.base_url).startswith("http://localhost:8000/v1")
    assert local.client.api_key == "EMPTY" and local.context_size == 32_768
    assert local.parameters.temperature == 0.1  # type: ignore[attr-defined]
    assert local.extra_body == {"repetition_penalty": 1.05}  # an OpenAI-compatible server's
    # DashScope's 1.x (native) URL becomes its OpenAI-compatible twin on 2.x
    intl, _ = build_model(
        {
            "provider": "dashscope",
            "model_name": "qwen-max",
            "base_url": "https://dashscope-intl.aliyuncs.com/api/v1",
        }
    )
    assert str(intl.client.base_url) == (  # type: ignore[attr-defined]
        "https://dashscope-intl.aliyuncs.com/compatible-mode/v1/"
    )
    claude, _ = build_model({"provider": "anthropic", "model_name": "claude"})
    assert claude.parameters.max_tokens == 2048  # type: ignore[attr-defined]  # 1.x's default


@pytest.mark.parametrize("provider", ["openai", "dashscope", "anthropic"])
def test_i14_4_missing_key_names_the_variable(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MY_SECRET_KEY", raising=False)
    with pytest.raises(ConfigError, match="MY_SECRET_KEY") as info:
        build_model({"provider": provider, "model_name": "m", "api_key_env": "MY_SECRET_KEY"})
    assert "not set" in str(info.value) and info.value.field == "model.api_key_env"


@pytest.mark.parametrize(
    ("section", "field", "words"),
    [
        (
            {"provider": "anthropic", "model_name": "m", "generate_kwargs": {"temperature": 1}},
            "model.generate_kwargs.temperature",
            "takes only max_tokens",
        ),
        (
            {"provider": "openai", "model_name": "m", "generate_kwargs": {"temperature": 5}},
            "model.generate_kwargs.temperature",
            "got 5",
        ),
        (
            {"provider": "openai", "model_name": "m", "context_size": 0},
            "model.context_size",
            "context_size",
        ),
    ],
)
def test_i14_4_bad_generation_arguments_are_named(
    section: dict[str, object], field: str, words: str, keys: None
) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        build_model(section)
    assert info.value.field == field


def test_i14_4_dashscope_needs_the_openai_package_on_2x(
    monkeypatch: pytest.MonkeyPatch, keys: None
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    with pytest.raises(ConfigError, match="pip install openai"):
        build_model({"provider": "dashscope", "model_name": "qwen-max"})


def test_i14_4_ollama_without_its_package_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ollama", None)
    with pytest.raises(ConfigError, match="pip install ollama"):
        load_models(CONFIGS / "providers" / "ollama.yaml")


@pytest.mark.skipif(importlib.util.find_spec("ollama") is None, reason="ollama not installed")
def test_i14_4_ollama_builds_offline() -> None:
    models = load_models(CONFIGS / "providers" / "ollama.yaml")
    assert models is not None and models.model.model == "qwen2.5:7b"
    assert models.model.credential.host == "http://localhost:11434"  # type: ignore[attr-defined]


# -- the real 2.x OpenAIChatModel against the local server --------------------------------


def _model(server: Server, stream: bool) -> OpenAIChatModel:
    model, formatter = build_model(model_fields(server, stream))
    assert isinstance(model, OpenAIChatModel) and formatter is model.formatter
    return model


async def _final(result: ChatResponse | object) -> ChatResponse:
    """The whole answer: the response, or a stream's last (accumulated) chunk."""
    if isinstance(result, ChatResponse):
        return result
    last = None
    async for chunk in result:  # type: ignore[attr-defined]
        last = chunk
    assert isinstance(last, ChatResponse)
    return last


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_i14_4_openai_model_speaks_json_and_sse(server: Server, stream: bool) -> None:
    model = _model(server, stream)
    server.script += [
        Reply(tool="lookup", arguments={"city": "Zürich", "days": 3}),
        Reply(text="Sunny all week in Zürich — 22 °C on Friday."),
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Weather.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    first = await _final(await model([UserMsg("user", "Weather?")], tools=tools))
    second = await _final(await model([UserMsg("user", "And?")]))

    (call,) = first.content
    assert isinstance(call, ToolCallBlock) and call.name == "lookup" and call.id == "call_1"
    assert call.input == '{"city": "Z\\u00fcrich", "days": 3}'  # the raw JSON, streamed in pieces
    (answer,) = second.content
    assert isinstance(answer, TextBlock)
    assert answer.text == "Sunny all week in Zürich — 22 °C on Friday."
    assert first.usage is not None and first.usage.input_tokens == REPORTED_PROMPT_TOKENS
    assert [r.get("stream", False) for r in server.requests] == [stream, stream]
    assert server.requests[0]["model"] == "local-test-model"
    assert server.requests[0]["tools"][0]["function"]["name"] == "lookup"
    assert server.requests[0]["messages"] == [
        {"role": "user", "name": "user", "content": [{"type": "text", "text": "Weather?"}]}
    ]
    if stream:
        assert server.requests[0]["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_i14_4_openai_model_drives_a_2x_agent_with_the_middleware(
    server: Server, tmp_path: Path, stream: bool
) -> None:
    model = _model(server, stream)
    server.script += report_script()
    middleware = ContextMiddleware(
        ContextConfig(
            working_dir=tmp_path / "ctx",
            tool_result={"recent_max_bytes": 4_096, "old_max_bytes": 1_024},
        )
    )
    agent = Agent(
        name="ops",
        system_prompt="You check services with build_report.",
        model=model,
        toolkit=Toolkit(tools=[FunctionTool(build_report, permission=ALLOW)]),
        middlewares=[middleware],
    )
    reply = await agent.reply(UserMsg("user", "Is checkout-api healthy?"))

    check_report_reached_cut(server, reply.get_text_content(), stream)
    results = [b for m in agent.state.context for b in m.content if isinstance(b, ToolResultBlock)]
    assert [b.name for b in results] == ["build_report"]
    assert reply.usage is not None and reply.usage.input_tokens == 2 * REPORTED_PROMPT_TOKENS
