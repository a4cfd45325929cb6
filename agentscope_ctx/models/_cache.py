"""Prompt-cache breakpoints on a formatted request (DESIGN.md §18, docs/providers.md).

Anthropic and Alibaba Model Studio cache a prompt only up to a block marked
``cache_control: {"type": "ephemeral"}``: at most 4 marks, each finding the longest prefix
cached before it by looking back at most 20 blocks. AgentScope's formatters place none, so
the package does, on the request as formatted (`mark`), where its own prompt is stable:

1. the system prompt's last block: the tool schemas and the system prompt (they come first
   in the provider's prefix), unchanged between compactions;
2. the summary message (the first after the system prompt when there is a summary: the
   summary, its carried block and eviction index), unchanged between compactions;
3. the result of the stable call: the newest tool result before the oldest tool message the
   ladder may still rewrite (a due cut, or an output not yet at its last level,
   `Ladder.stable_call`), so that a batch of cuts further on still reads the cache up to
   there; and, when the ladder has just cut, the previous call's stable call too: that is
   where this call reads, and the new one may be more than 20 blocks on, beyond the
   lookback;
4. the newest message, moving forward with each call (the previous call's mark is a few
   blocks back, within the lookback).

Marks that fall on one message are one mark. Of more than four, the newest message, the
previous stable call, the stable call, the summary and the system prompt are kept in that
order (the summary mark holds the system prompt's prefix too). A block that cannot carry a
mark (a thinking block; an assistant message with tool calls and no text, in the chat
format) passes it to the one before it in the same message, else the message is left
unmarked.

Two formats: ``anthropic`` (the Messages API: a content list of typed blocks, the system
prompt as the first message until the model moves it to ``system``) and ``chat`` (the
OpenAI-compatible Chat Completions format Model Studio's compatible mode takes, and
DashScope's native one: a string content becomes a list of one text part).

OpenAI caches every prefix by itself; what helps there is a stable `prompt_cache_key`, so
that one session's requests reach the same cache (`cache_key`).

`provider_of` names the provider from the model's class and its server's URL. This module
imports no AgentScope: the adapters pass the model in and call it at the model call. On 1.x
the model is given the formatted request (`GuardedModel` marks it); a 2.x model formats the
messages itself, so its formatter is wrapped once (`marking_formatter`) and marks what it
formats while the 2.x adapter's model call has set `PLAN`; a call made without it (another
agent's on the same model, the compactor's plain request) goes out as AgentScope made it. A
`prompt_cache_key` rides on the call through `KeyedModel`.

The helpers' calls get marks too: the compactor's prefix request those of the agent's call
it starts with (`LastPrompt.cache`, applied by each line's `call_prefixed`), so that it reads
that call's cache; the Summarizer's runs `helper_cache` (the system prompt and the newest
message), so that each call of a run reads the one before it.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..core._tenant import Tenant

__all__ = [
    "PLAN",
    "CachePlan",
    "KeyedModel",
    "Provider",
    "cache_key",
    "cache_life",
    "call_cache",
    "helper_cache",
    "mark",
    "marking_formatter",
    "planned",
    "provider_of",
    "retention_of",
    "style_of",
    "unwrapped",
]

Provider = Literal["anthropic", "dashscope", "openai", "compatible", "other"]
"""Who serves a model: Anthropic, Alibaba Model Studio (DashScope), OpenAI's own API,
another OpenAI-compatible server (vLLM, Ollama, a gateway), anything else."""

Style = Literal["anthropic", "chat"]

MAX_MARKS = 4
"""Anthropic's and Model Studio's limit of `cache_control` breakpoints in one request."""

_UNMARKABLE = ("thinking", "redacted_thinking")
"""Block types a provider refuses a `cache_control` on."""


@dataclass(frozen=True)
class CachePlan:
    """Where the marks of one model call go (see the module docstring)."""

    style: Style
    summary: bool
    """The message after the system prompt is the summary."""
    stable_calls: tuple[str, ...]
    """Ids of the tool calls whose result messages get mark 3: the previous call's stable
    call (if it differs) and this call's, in that order."""
    ttl: Literal["5m", "1h"] = "5m"


PLAN: ContextVar[CachePlan | None] = ContextVar("agentscope_ctx_cache_plan", default=None)
"""The marks of the model call under way in this task (set by the 2.x adapter's model call)."""


class _MarkingFormatter:
    """A 2.x model's formatter that marks what it formats while `PLAN` is set; every other
    attribute is the wrapped formatter's (read and written through)."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "_inner", inner)

    async def format(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        formatted: list[dict[str, Any]] = await self._inner.format(*args, **kwargs)
        plan = PLAN.get()
        return formatted if plan is None else mark(formatted, plan)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)


@contextmanager
def planned(model: Any, plan: CachePlan | None) -> Iterator[None]:
    """Inside, the requests a 2.x `model` formats are marked with `plan` (`PLAN`; its
    formatter wrapped once by `marking_formatter`); `None`: not marked."""
    if plan is not None:
        marking_formatter(model)
    token = PLAN.set(plan)
    try:
        yield
    finally:
        PLAN.reset(token)


def marking_formatter(model: Any) -> None:
    """Wrap `model.formatter` (once) so that it marks its requests while `PLAN` is set."""
    formatter = getattr(model, "formatter", None)
    if formatter is not None and not isinstance(formatter, _MarkingFormatter):
        model.formatter = _MarkingFormatter(formatter)


class KeyedModel:
    """`model` called with a `prompt_cache_key` (OpenAI): what the 2.x adapter's model call
    passes on as the call's model; every other attribute is the model's."""

    def __init__(self, model: Any, key: str) -> None:
        self.inner = model
        self.key = key

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("prompt_cache_key", self.key)
        return await self.inner(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["inner"], name)


def unwrapped(model: Any) -> Any:
    """The model a wrapper of the package's holds as its ``inner`` (`KeyedModel`,
    `GuardedModel`, the 1.x runner's `_TimedModel`), else `model` itself."""
    inner = getattr(model, "__dict__", {}).get("inner")
    return model if inner is None else inner


def provider_of(model: Any) -> Provider:
    """The provider of an AgentScope chat model (1.x or 2.x; a wrapper's ``inner`` model),
    from its class names and the URL of its client."""
    model = unwrapped(model)
    names = {cls.__name__ for cls in type(model).__mro__}
    if "AnthropicChatModel" in names:
        return "anthropic"
    if "DashScopeChatModel" in names:
        # 2.x speaks Model Studio's OpenAI-compatible API (an OpenAI client); 1.x its native
        # API through the dashscope SDK, whose content format the marks are not made for
        return "dashscope" if hasattr(model, "client") else "other"
    if "OpenAIResponseModel" in names:  # 2.x, the Responses API: OpenAI's own, or no marks
        url = _base_url(model)
        return "openai" if not url or "api.openai.com" in url else "other"
    if "OpenAIChatModel" not in names:
        return "other"
    url = _base_url(model)
    if "dashscope" in url or "aliyuncs.com" in url:
        return "dashscope"
    if not url or "api.openai.com" in url:
        return "openai"
    return "compatible"


def style_of(provider: Provider, mode: str) -> Style | None:
    """The format the marks take for `provider` under `cache.mode` (`None`: no marks)."""
    if mode == "off":
        return None
    if provider == "anthropic":
        return "anthropic"
    if provider == "dashscope" or (mode == "explicit" and provider in ("openai", "compatible")):
        return "chat"
    return None


def cache_life(
    provider: Provider, mode: str, ttl: Literal["5m", "1h"], retention: str | None = None
) -> float | None:
    """Seconds after which an idle prompt cache of `provider` is gone (`ContextPipeline.cold`;
    `None`: not known, never counted gone). Anthropic's marked entries, and a `cache.mode:
    explicit` gateway's, live `ttl` after their last use; Model Studio's explicit ones 5
    minutes (its only life); OpenAI's automatic cache "generally" 5 to 10 minutes of
    inactivity (up to an hour off-peak): 10 minutes, or 24 hours where the model's requests
    ask for ``prompt_cache_retention: 24h`` (`retention`, `retention_of`). Without marks,
    Anthropic caches nothing and Model Studio's implicit cache states no lifetime: `None`."""
    if provider == "openai":
        return 86_400.0 if retention == "24h" else 600.0
    if style_of(provider, mode) is None:
        return None
    return 3_600.0 if _ttl(provider, ttl) == "1h" else 300.0


def _ttl(provider: Provider, ttl: Literal["5m", "1h"]) -> Literal["5m", "1h"]:
    """The life `provider`'s marked entries get from `cache.ttl`: Model Studio's explicit
    cache has one, 5 minutes (a config shared with an Anthropic agent may say ``1h``)."""
    return "5m" if provider == "dashscope" else ttl


def _plan(
    provider: Provider,
    mode: str,
    ttl: Literal["5m", "1h"],
    marks: Callable[[], tuple[bool, tuple[str, ...]]],
) -> CachePlan | None:
    """The marks of a call to `provider` under `cache.mode` (`marks` gives the summary flag
    and the stable calls); `None` where the provider takes none (`style_of`)."""
    style = style_of(provider, mode)
    if style is None:
        return None
    summary, stable = marks()
    return CachePlan(style, summary, stable, _ttl(provider, ttl))


def retention_of(model: Any) -> str | None:
    """The ``prompt_cache_retention`` an OpenAI model's requests carry (``"in_memory"``,
    ``"24h"``; `None`: not set): the 1.x model's ``generate_kwargs`` (or the ``extra_body``
    in them), the 2.x model's ``extra_body``; a wrapper's ``inner`` model's."""
    model = unwrapped(model)
    for holder in (getattr(model, "generate_kwargs", None), getattr(model, "extra_body", None)):
        if not isinstance(holder, dict):
            continue
        body = holder.get("extra_body")
        for source in (holder, body if isinstance(body, dict) else {}):
            value = source.get("prompt_cache_retention")
            if isinstance(value, str):
                return value
    return None


def call_cache(
    model: Any,
    mode: str,
    ttl: Literal["5m", "1h"],
    marks: Callable[[], tuple[bool, tuple[str, ...]]],
    tenant: Callable[[], Tenant],
) -> tuple[CachePlan | None, str | None]:
    """What one model call of `model` gets under `cache.mode`: its marks (`None`: none;
    `marks` gives the pipeline's `cache_marks`) and its `prompt_cache_key` (`None`: none;
    OpenAI's API only, from the `tenant`'s agent key and session). Model Studio's marks
    never carry ``1h`` (`_ttl`)."""
    provider = provider_of(model)
    plan = _plan(provider, mode, ttl, marks)
    owner = tenant() if provider == "openai" and mode != "off" else None
    key = None if owner is None else cache_key(owner.agent, owner.session)
    return plan, key


def helper_cache(model: Any, mode: str, ttl: Literal["5m", "1h"]) -> CachePlan | None:
    """The marks of a helper agent's calls on `model` (the Summarizer's: a run of several
    calls on one growing prompt): the system prompt and the newest message, so that each
    call reads the one before it; `None` where the provider takes no marks (`style_of`)."""
    return _plan(provider_of(model), mode, ttl, lambda: (False, ()))


def cache_key(*parts: str) -> str:
    """A `prompt_cache_key` for one tenant's session: stable, and naming nobody (a hash)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return f"actx-{digest[:32]}"


def mark(messages: list[dict[str, Any]], plan: CachePlan) -> list[dict[str, Any]]:
    """`messages` (a formatted request) with the plan's marks; the messages that get one are
    copied, the others are the same objects (nothing given is changed)."""
    if not messages:
        return messages
    last = len(messages) - 1
    at = [last]  # by priority (see the module)
    for call in reversed(plan.stable_calls):  # the previous one first: this call reads there
        found = _result_of(messages, call, plan.style)
        if found is not None:
            at.insert(1, found)
    if messages[0].get("role") == "system":
        if plan.summary and last > 1:
            at.append(1)
        at.append(0)
    at = list(dict.fromkeys(at))[:MAX_MARKS]
    control: dict[str, Any] = {"type": "ephemeral"}
    if plan.ttl != "5m":
        control["ttl"] = plan.ttl
    out = list(messages)
    for i in at:
        marked = _marked(messages[i], control)
        if marked is not None:
            out[i] = marked
    return out


def _result_of(messages: list[dict[str, Any]], call_id: str, style: Style) -> int | None:
    """Index of the message holding the result of `call_id`."""
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if style == "chat" and msg.get("role") == "tool" and msg.get("tool_call_id") == call_id:
            return i
        content = msg.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict)
            and b.get("type") == "tool_result"
            and (b.get("tool_use_id") == call_id or b.get("id") == call_id)
            for b in content
        ):
            return i
    return None


def _marked(msg: dict[str, Any], control: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of `msg` whose last markable block carries `control` (`None`: none can)."""
    content = msg.get("content")
    if isinstance(content, str):
        if not content:
            return None
        return {**msg, "content": [{"type": "text", "text": content, "cache_control": control}]}
    if not isinstance(content, list):
        return None
    for k in range(len(content) - 1, -1, -1):
        block = content[k]
        if isinstance(block, dict) and block.get("type") not in _UNMARKABLE:
            blocks = list(content)
            blocks[k] = {**copy.copy(block), "cache_control": control}
            return {**msg, "content": blocks}
    return None


def _base_url(model: Any) -> str:
    """The URL of the model's server, as far as the model shows it ('' when it does not)."""
    for holder in (getattr(model, "client", None), getattr(model, "credential", None), model):
        url = getattr(holder, "base_url", None)
        if url:
            return str(url).lower()
    return ""
