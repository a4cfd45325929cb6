"""`build_model` on AgentScope 2.x: the same `ModelConfig` as on 1.x, a 2.x chat model.

A 2.x model takes its key in a `credential=` object, owns its formatter (`model.formatter`)
and knows its context window (`model.context_size`). How the 1.x fields map:

- the key (read from `api_key_env`, as on 1.x) and `base_url` go to the provider's
  credential (`OpenAICredential`, `DashScopeCredential`, `AnthropicCredential`,
  `OllamaCredential(host=)`);
- `max_tokens` and the `generate_kwargs` that are fields of the model's `Parameters`
  (temperature, top_p, ...) go there, validated by AgentScope; for ``openai`` the others go to
  the request body (`extra_body`: vLLM's ``top_k``, ``repetition_penalty``, ...), for the other
  providers they are a `ConfigError` (a 2.x agent passes no free generation arguments);
- `client_kwargs` and `stream` as on 1.x;
- `context_size`: the config's, else the one of AgentScope's model card for `model_name`, else
  the class default; a card also sets the formatter's accepted media types (as AgentScope's own
  app builds a model from a card).

Decisions where 1.x and 2.x differ:

- DashScope on 2.x speaks its OpenAI-compatible API (through the ``openai`` package), so its
  `base_url` is the compatible-mode endpoint. A 1.x-style native URL (``.../api/v1``, the
  form in ``configs/providers/dashscope.yaml``) is turned into its compatible-mode twin
  (``.../compatible-mode/v1``), so one config serves both lines.
- Anthropic keeps the 1.x default answer length (2048 tokens) when `max_tokens` is unset.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from agentscope.credential import (
    AnthropicCredential,
    DashScopeCredential,
    OllamaCredential,
    OpenAICredential,
)
from agentscope.model import (
    AnthropicChatModel,
    ChatModelBase,
    DashScopeChatModel,
    ModelCard,
    OllamaChatModel,
    OpenAIChatModel,
)
from pydantic import BaseModel, SecretStr, ValidationError

from ..core._errors import ConfigError, _short_repr
from ..core.config._model_config import ModelConfig

__all__ = ["build_model_v2"]

logger = logging.getLogger("agentscope_ctx")

_ANTHROPIC_MAX_TOKENS = 2048
"""The 1.x default answer length of `build_model` for Anthropic, kept on 2.x."""

_NATIVE_DASHSCOPE = "/api/v1"
_COMPATIBLE_DASHSCOPE = "/compatible-mode/v1"


def _parameters(
    model_cls: type[ChatModelBase], cfg: ModelConfig, where: str
) -> tuple[BaseModel, dict[str, Any]]:
    """The model's `Parameters` from `max_tokens` and `generate_kwargs`, and the rest."""
    parameters_cls: type[BaseModel] = model_cls.Parameters  # type: ignore[attr-defined]
    fields = parameters_cls.model_fields
    known = {k: v for k, v in cfg.generate_kwargs.items() if k in fields}
    rest = {k: v for k, v in cfg.generate_kwargs.items() if k not in fields}
    if cfg.max_tokens is not None:
        known.setdefault("max_tokens", cfg.max_tokens)
    elif model_cls is AnthropicChatModel:
        known.setdefault("max_tokens", _ANTHROPIC_MAX_TOKENS)
    try:
        parameters = parameters_cls(**known)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = ".".join(str(part) for part in error["loc"])
        field = f"{where}.max_tokens" if name == "max_tokens" else f"{where}.generate_kwargs.{name}"
        raise ConfigError(
            f"invalid config field {field!r}: got {_short_repr(error.get('input'))}; "
            f"{error['msg']} (AgentScope {model_cls.__name__}.Parameters)",
            field=field,
        ) from None
    if rest and model_cls is not OpenAIChatModel:
        name = sorted(rest)[0]
        raise ConfigError(
            f"invalid config field '{where}.generate_kwargs.{name}': AgentScope 2.x's "
            f"{model_cls.__name__} takes only {', '.join(sorted(fields))}",
            field=f"{where}.generate_kwargs.{name}",
        )
    return parameters, rest


def _dashscope_url(url: str) -> str:
    """The compatible-mode endpoint of a DashScope URL given in the 1.x (native) form."""
    stripped = url.rstrip("/")
    if stripped.endswith(_NATIVE_DASHSCOPE):
        return stripped[: -len(_NATIVE_DASHSCOPE)] + _COMPATIBLE_DASHSCOPE
    return url


_CLASSES: dict[str, Any] = {  # (their constructors differ in what else they take)
    "openai": OpenAIChatModel,
    "dashscope": DashScopeChatModel,
    "anthropic": AnthropicChatModel,
}
"""The 2.x model class of each provider (any other: ``ollama``, `ModelConfig` allows no more)."""


def _credential(cfg: ModelConfig, secret: SecretStr) -> Any:
    """The provider's credential: the key and `base_url` (Ollama's: its host, no key)."""
    if cfg.provider == "openai":
        return OpenAICredential(api_key=secret, base_url=cfg.base_url)
    if cfg.provider == "dashscope":
        if cfg.base_url:
            return DashScopeCredential(api_key=secret, base_url=_dashscope_url(cfg.base_url))
        return DashScopeCredential(api_key=secret)
    if cfg.provider == "anthropic":
        return AnthropicCredential(api_key=secret, base_url=cfg.base_url)
    return OllamaCredential(host=cfg.base_url)


def _card(model_cls: type[ChatModelBase], name: str) -> ModelCard | None:
    """AgentScope's model card for `name`, if it ships one."""
    try:
        cards = model_cls.list_models()
    except Exception:  # an unreadable card must not stop a build: keep the class defaults
        logger.debug("agentscope_ctx: no model cards for %s", model_cls.__name__, exc_info=True)
        return None
    return next((card for card in cards if card.name == name), None)


def build_model_v2(cfg: ModelConfig, key: str | None, where: str = "model") -> ChatModelBase:
    """A 2.x chat model for `cfg`, with `key` (already read from the environment).

    Raises:
        ConfigError: a generation argument the model does not take, or a bad value.
    """
    secret = SecretStr(key or "")
    model_cls: Any = _CLASSES.get(cfg.provider, OllamaChatModel)
    parameters, extra = _parameters(model_cls, cfg, where)
    body = {"extra_body": extra or None} if model_cls is OpenAIChatModel else {}
    model = model_cls(
        credential=_credential(cfg, secret),
        model=cfg.model_name,
        parameters=parameters,
        stream=cfg.stream,
        client_kwargs=dict(cfg.client_kwargs) or None,
        **body,
    )
    card = _card(type(model), cfg.model_name)
    if card is not None:
        model.context_size = card.context_size
        model.formatter.input_types = list(card.input_types)
    if cfg.context_size is not None:
        model.context_size = cfg.context_size
    return cast(ChatModelBase, model)
