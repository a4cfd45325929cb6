"""`build_model` on AgentScope 1.x: a `ModelConfig` as a 1.x chat model and its formatter,
through AgentScope's own classes (see `agentscope_ctx._providers`, which checks the config and
reads the key first)."""

from __future__ import annotations

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

from ..core.config._model_config import ModelConfig

__all__ = ["build_model_1x"]


def build_model_1x(cfg: ModelConfig, key: str | None) -> tuple[ChatModelBase, FormatterBase]:
    """The 1.x model of `cfg`, with `key`, and its formatter. Makes no network request."""
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
