"""`ModelConfig`: one chat model as a config names it (provider, name, key variable, endpoint),
line-neutral; the edge (`agentscope_ctx._providers`) builds it into a model of the installed
AgentScope line (`agentscope1._providers`, `agentscope2._providers`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DEFAULT_KEY_ENV", "ModelConfig", "Provider"]

Provider = Literal["openai", "dashscope", "anthropic", "ollama"]

DEFAULT_KEY_ENV: dict[str, str | None] = {
    "openai": "OPENAI_API_KEY",
    "dashscope": "DASHSCOPE_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "ollama": None,
}


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
        return DEFAULT_KEY_ENV[self.provider]
