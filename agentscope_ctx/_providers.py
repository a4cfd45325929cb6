"""Model configs: build a real AgentScope chat model and its formatter from a mapping.

On AgentScope 1.x and 2.x alike (2.x: `agentscope_ctx.agentscope2._providers`, where a model takes
its key as a `credential=` and owns its formatter: the formatter returned is
`model.formatter`). Providers, through AgentScope's own classes:

- ``openai``: `OpenAIChatModel`; `base_url` goes to the client, so vLLM, llama.cpp's server
  and Ollama's OpenAI endpoint work too;
- ``dashscope``: `DashScopeChatModel` (`base_url` is its `base_http_api_url`);
- ``anthropic``: `AnthropicChatModel`;
- ``ollama``: `OllamaChatModel` (`base_url` is the Ollama host).

Keys never sit in the config: `api_key_env` names the environment variable that holds it
(default: ``OPENAI_API_KEY``, ``DASHSCOPE_API_KEY``, ``ANTHROPIC_API_KEY``; none for Ollama).
Building a model makes no network request. Example (a file may hold ``model:`` and an
optional ``compactor_model:`` section, see ``configs/providers/``)::

    model:
      provider: openai
      model_name: gpt-4o-mini
      api_key_env: OPENAI_API_KEY
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentscope.formatter import (
    AnthropicChatFormatter,
    DashScopeChatFormatter,
    FormatterBase,
    OllamaChatFormatter,
    OpenAIChatFormatter,
)
from agentscope.model import (
    AnthropicChatModel,
    ChatModelBase,
    DashScopeChatModel,
    OllamaChatModel,
    OpenAIChatModel,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._line import IS_1X
from .core._config import _config_error
from .core._config_file import read_config_mapping
from .core._errors import ConfigError

__all__ = ["ModelConfig", "Models", "build_model", "load_models", "read_mapping"]

Provider = Literal["openai", "dashscope", "anthropic", "ollama"]

_DEFAULT_KEY_ENV: dict[str, str | None] = {
    "openai": "OPENAI_API_KEY",
    "dashscope": "DASHSCOPE_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "ollama": None,
}
_SDK = {"openai": "openai", "dashscope": "dashscope", "anthropic": "anthropic", "ollama": "ollama"}
_SDK_2X = {**_SDK, "dashscope": "openai"}
"""AgentScope 2.x reaches DashScope through its OpenAI-compatible API."""
_LOCAL_KEY = "EMPTY"
"""Placeholder key for OpenAI-compatible local servers that check none."""


class ModelConfig(BaseModel):
    """One chat model."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    provider: Provider
    """Which API: openai (and OpenAI-compatible servers), dashscope, anthropic or ollama."""

    model_name: str = Field(min_length=1)
    """The model's name at the provider (``gpt-4o-mini``, ``qwen-max``, ``qwen2.5:7b``)."""

    api_key_env: str | None = None
    """Environment variable holding the API key. Unset: the provider's usual variable.
    `null` for an OpenAI-compatible local server that needs no key (with `base_url`)."""

    base_url: str | None = None
    """Endpoint: the OpenAI client's base_url, DashScope's base_http_api_url, the Anthropic
    client's base_url, or the Ollama host."""

    stream: bool = False
    """Stream the answers."""

    max_tokens: int | None = Field(default=None, ge=1)
    """Longest answer, in tokens (Anthropic requires one; default 2048 there)."""

    generate_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Extra generation arguments (temperature, top_p, ...), passed on as they are."""

    client_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Extra arguments of the provider's client (timeout, headers, ...)."""

    context_size: int | None = Field(default=None, ge=1)
    """AgentScope 2.x: the model's context window in tokens (`model.context_size`). Unset:
    AgentScope's model card for `model_name`, else its default for the provider. Unused on
    AgentScope 1.x, whose models have none."""

    def key_env(self) -> str | None:
        """The environment variable to read the key from, if any."""
        if "api_key_env" in self.model_fields_set:
            return self.api_key_env
        return _DEFAULT_KEY_ENV[self.provider]


@dataclass(frozen=True)
class Models:
    """The models a config builds: the agent's, and the Compactor's (the same by default)."""

    model: ChatModelBase
    formatter: FormatterBase
    compactor_model: ChatModelBase
    compactor_formatter: FormatterBase


def _parse(data: ModelConfig | Mapping[str, Any], where: str) -> ModelConfig:
    if isinstance(data, ModelConfig):
        return data
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{where!r} must be a mapping with provider and model_name; got {type(data).__name__}",
            field=where,
        )
    try:
        return ModelConfig(**data)
    except ValidationError as exc:
        error = _config_error(exc)
        field = f"{where}.{error.field}" if error.field else where
        raise ConfigError(str(error).replace(repr(error.field), repr(field)), field=field) from None


def _api_key(config: ModelConfig, where: str) -> str | None:
    env = config.key_env()
    if env is None:
        if config.provider == "openai":
            if not config.base_url:
                raise ConfigError(
                    f"{where}: provider 'openai' without a key needs base_url (a local "
                    "OpenAI-compatible server); set api_key_env (e.g. OPENAI_API_KEY)",
                    field=f"{where}.api_key_env",
                )
            return _LOCAL_KEY
        if config.provider in ("dashscope", "anthropic"):
            raise ConfigError(
                f"{where}: provider {config.provider!r} needs api_key_env "
                f"(e.g. {_DEFAULT_KEY_ENV[config.provider]})",
                field=f"{where}.api_key_env",
            )
        return None
    key = os.environ.get(env, "").strip()
    if not key:
        raise ConfigError(
            f"{where}: the API key of provider {config.provider!r} is read from the "
            f"environment variable {env}, which is not set; export {env}=... first",
            field=f"{where}.api_key_env",
        )
    return key


def _require_sdk(provider: str) -> None:
    package = (_SDK if IS_1X else _SDK_2X)[provider]
    try:
        importlib.import_module(package)
    except ImportError:
        raise ConfigError(
            f"provider {provider!r} needs the Python package {package!r}, which is not "
            f"installed: pip install {package}",
            field="provider",
        ) from None


def build_model(
    config: ModelConfig | Mapping[str, Any], *, where: str = "model"
) -> tuple[ChatModelBase, FormatterBase]:
    """Build a chat model and its formatter from a config. Makes no network request.

    Args:
        config: a `ModelConfig`, or a mapping of its fields.
        where: the config section's name, used in error messages.

    Raises:
        ConfigError: a bad field, a missing API key (names the variable), or a missing SDK
            (names the package to install).
    """
    cfg = _parse(config, where)
    key = _api_key(cfg, where)
    _require_sdk(cfg.provider)
    if not IS_1X:
        # imported by name: the 1.x type check does not follow it (it checks 2.x code)
        v2 = importlib.import_module("agentscope_ctx.agentscope2._providers")
        built: ChatModelBase = v2.build_model_v2(cfg, key, where)
        own: FormatterBase = built.formatter  # type: ignore[attr-defined]  # 2.x: the model's
        return built, own
    client = dict(cfg.client_kwargs)
    generate = dict(cfg.generate_kwargs)
    model: ChatModelBase
    formatter: FormatterBase
    if cfg.provider == "openai":
        if cfg.base_url:
            client["base_url"] = cfg.base_url
        if cfg.max_tokens:
            generate.setdefault("max_tokens", cfg.max_tokens)
        model = OpenAIChatModel(
            cfg.model_name,
            api_key=key,
            stream=cfg.stream,
            client_kwargs=client or None,
            generate_kwargs=generate or None,
        )
        formatter = OpenAIChatFormatter()
    elif cfg.provider == "dashscope":
        if cfg.max_tokens:
            generate.setdefault("max_tokens", cfg.max_tokens)
        model = DashScopeChatModel(
            cfg.model_name,
            api_key=str(key),
            stream=cfg.stream,
            generate_kwargs=generate or None,
            base_http_api_url=cfg.base_url,
        )
        formatter = DashScopeChatFormatter()
    elif cfg.provider == "anthropic":
        if cfg.base_url:
            client["base_url"] = cfg.base_url
        model = AnthropicChatModel(
            cfg.model_name,
            api_key=key,
            max_tokens=cfg.max_tokens or 2048,
            stream=cfg.stream,
            client_kwargs=client or None,
            generate_kwargs=generate or None,
        )
        formatter = AnthropicChatFormatter()
    else:
        model = OllamaChatModel(
            cfg.model_name,
            stream=cfg.stream,
            host=cfg.base_url,
            client_kwargs=client or None,
            generate_kwargs=generate or None,
        )
        formatter = OllamaChatFormatter()
    return model, formatter


def read_mapping(path: str | Path) -> dict[str, Any]:
    """Read a YAML file holding a mapping (bounded: see `read_config_mapping`).

    Raises:
        ConfigError: the file is missing, unreadable, too big, not YAML or not a mapping.
    """
    return read_config_mapping(path)


def load_models(source: str | Path | Mapping[str, Any]) -> Models | None:
    """Build the models of a config (a YAML path or a mapping) with a ``model:`` section and
    an optional ``compactor_model:`` section. Returns `None` when there is no ``model:``.

    Raises:
        ConfigError: as `build_model`.
    """
    data = read_mapping(source) if isinstance(source, (str, Path)) else dict(source)
    section = data.get("model")
    if section is None:
        if data.get("compactor_model") is not None:
            raise ConfigError("compactor_model needs a model section too", field="model")
        return None
    model, formatter = build_model(section, where="model")
    compactor = data.get("compactor_model")
    if compactor is None:
        return Models(model, formatter, model, formatter)
    c_model, c_formatter = build_model(compactor, where="compactor_model")
    return Models(model, formatter, c_model, c_formatter)
