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
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ._line import IS_1X
from .core._errors import ConfigError
from .core.config._config import _config_error
from .core.config._config_file import read_config_mapping
from .core.config._model_config import DEFAULT_KEY_ENV, ModelConfig

if TYPE_CHECKING:
    from agentscope.formatter import FormatterBase
    from agentscope.model import ChatModelBase

__all__ = ["ModelConfig", "Models", "build_model", "load_models", "read_mapping"]

_SDK = {"openai": "openai", "dashscope": "dashscope", "anthropic": "anthropic", "ollama": "ollama"}
_SDK_2X = {**_SDK, "dashscope": "openai"}
"""AgentScope 2.x reaches DashScope through its OpenAI-compatible API."""
_LOCAL_KEY = "EMPTY"
"""Placeholder key for OpenAI-compatible local servers that check none."""


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
                f"(e.g. {DEFAULT_KEY_ENV[config.provider]})",
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
    from .agentscope1._providers import build_model_1x

    return build_model_1x(cfg, key)


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
