"""Model configs: each provider's model is built from config with a fake key, offline."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("the model builders make 1.x chat models; build_agent makes a ReActAgent"),
        allow_module_level=True,
    )

from agentscope.formatter import (
    AnthropicChatFormatter,
    DashScopeChatFormatter,
    OpenAIChatFormatter,
)
from agentscope.model import AnthropicChatModel, DashScopeChatModel, OpenAIChatModel

from agentscope_ctx import ConfigError
from agentscope_ctx._providers import build_model, load_models

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "providers"
KEYS = ("OPENAI_API_KEY", "DASHSCOPE_API_KEY", "ANTHROPIC_API_KEY")


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEYS:
        monkeypatch.setenv(name, f"fake-{name.lower()}")


@pytest.mark.parametrize(
    ("provider", "model_cls", "formatter_cls"),
    [
        ("openai", OpenAIChatModel, OpenAIChatFormatter),
        ("dashscope", DashScopeChatModel, DashScopeChatFormatter),
        ("anthropic", AnthropicChatModel, AnthropicChatFormatter),
    ],
)
def test_each_provider_builds_offline(
    provider: str, model_cls: type, formatter_cls: type, keys: None
) -> None:
    model, formatter = build_model({"provider": provider, "model_name": "some-model"})
    assert isinstance(model, model_cls) and isinstance(formatter, formatter_cls)
    assert model.model_name == "some-model"


def test_openai_base_url_reaches_the_client(keys: None) -> None:
    model, _ = build_model(
        {"provider": "openai", "model_name": "qwen", "base_url": "http://localhost:8000/v1"}
    )
    assert isinstance(model, OpenAIChatModel)
    assert str(model.client.base_url).startswith("http://localhost:8000/v1")
    assert model.client.api_key == "fake-openai_api_key"


def test_local_openai_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    models = load_models(CONFIGS / "local_openai.yaml")
    assert models is not None and isinstance(models.model, OpenAIChatModel)
    assert models.compactor_model is models.model


@pytest.mark.parametrize("provider", ["openai", "dashscope", "anthropic"])
def test_missing_key_names_the_variable(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_SECRET_KEY", raising=False)
    with pytest.raises(ConfigError, match="MY_SECRET_KEY") as info:
        build_model({"provider": provider, "model_name": "m", "api_key_env": "MY_SECRET_KEY"})
    assert "not set" in str(info.value) and info.value.field == "model.api_key_env"


def test_missing_default_key_names_the_default_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        build_model({"provider": "anthropic", "model_name": "m"})


def test_missing_sdk_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ollama", None)  # makes `import ollama` fail
    with pytest.raises(ConfigError, match="pip install ollama"):
        build_model({"provider": "ollama", "model_name": "qwen2.5:7b"})


@pytest.mark.skipif(importlib.util.find_spec("ollama") is None, reason="ollama not installed")
def test_ollama_builds_offline() -> None:
    model, _ = build_model({"provider": "ollama", "model_name": "qwen2.5:7b"})
    assert model.model_name == "qwen2.5:7b"


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"provider": "gemini", "model_name": "m"}, "model.provider"),
        ({"provider": "openai"}, "model.model_name"),
        ({"provider": "openai", "model_name": "m", "apikey": "x"}, "model.apikey"),
        ({"provider": "anthropic", "model_name": "m", "max_tokens": 0}, "model.max_tokens"),
    ],
)
def test_bad_fields_are_named(section: dict[str, object], field: str, keys: None) -> None:
    with pytest.raises(ConfigError) as info:
        build_model(section)
    assert info.value.field == field and field in str(info.value)


def test_example_files_load(keys: None) -> None:
    for name in ("openai", "dashscope", "anthropic"):
        models = load_models(CONFIGS / f"{name}.yaml")
        assert models is not None
    dashscope = load_models(CONFIGS / "dashscope.yaml")
    assert dashscope is not None and dashscope.compactor_model.model_name == "qwen-turbo"
    assert load_models({"context": {}}) is None


def test_compactor_model_section_is_named_in_errors(keys: None) -> None:
    with pytest.raises(ConfigError, match=r"compactor_model\.provider"):
        load_models(
            {
                "model": {"provider": "openai", "model_name": "m"},
                "compactor_model": {"provider": "nope", "model_name": "m"},
            }
        )


# -- build_agent: a ReActAgent from one YAML ---------------------------------------------

AGENT_YAML = Path(__file__).resolve().parents[2] / "configs" / "agent.yaml"


def test_build_agent_from_the_example(keys: None) -> None:
    from agentscope_ctx import ContextMemory
    from agentscope_ctx._agent_config import build_agent

    agent, manager = build_agent(AGENT_YAML)
    from agentscope_ctx.models._guard import GuardedModel

    # attach() wraps the model to read usage and recover from context-length errors
    assert agent.name == "assistant" and isinstance(agent.model, GuardedModel)
    assert isinstance(agent.model.inner, OpenAIChatModel)
    assert isinstance(agent.memory, ContextMemory)
    assert {"run_shell", "fetch_url", "read_file"} <= set(agent.toolkit.tools)
    assert manager.config.max_input_tokens == 100_000
    assert manager.model is agent.model.inner  # the compactor calls the model itself


def test_build_agent_from_a_mapping(tmp_path: Path, keys: None) -> None:
    from agentscope_ctx._agent_config import build_agent

    agent, manager = build_agent(
        {
            "agent": {"name": "reader", "tools": ["read_file"], "tool_root": str(tmp_path)},
            "model": {"provider": "anthropic", "model_name": "claude"},
            "compactor_model": {"provider": "dashscope", "model_name": "qwen-turbo"},
            "context": {"working_dir": str(tmp_path), "max_input_tokens": 20_000},
        }
    )
    assert set(agent.toolkit.tools) >= {"read_file"} and "run_shell" not in agent.toolkit.tools
    assert isinstance(manager.model, DashScopeChatModel)
    assert manager.working_dir == tmp_path.resolve()


def test_build_agent_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentscope_ctx._agent_config import build_agent

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        build_agent(AGENT_YAML)
