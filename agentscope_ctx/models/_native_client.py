"""The model's SDK client in native mode: the request rewritten, the provider's block caught.

AgentScope's model classes call ``self.client.messages.create(**kwargs)`` (Anthropic, both
lines) and ``self.client.responses.create(**kwargs)`` (2.x `OpenAIResponseModel`), then parse
the response, dropping the blocks they do not know. `native_client` wraps the model's client
once (every other attribute is the client's, read and written through); while an adapter's
model call has set `NATIVE`, ``create`` gets the request shaped by `models._native` and the
response is read (a stream: each event as AgentScope reads it) for the block the provider
compacted into, which lands in the call's `NativeCall.captured`. A call made without
`NATIVE` (the compactor's, another agent's on the same model) goes out as AgentScope made it.

When the provider refuses native context management (a 400 naming the beta, the edit, the
model or a block it cannot verify: `is_refusal`), the request is made again as AgentScope
made it (a stand-in then goes as its readable text) and this client asks no more: the local
ladder alone holds the budget from then on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from typing import Any

from ._cache import unwrapped
from ._native import (
    NativeCall,
    anthropic_request,
    is_refusal,
    read_anthropic,
    read_anthropic_event,
    read_responses,
    read_responses_event,
    responses_request,
)

__all__ = ["NATIVE", "native_client"]

logger = logging.getLogger("agentscope_ctx")

NATIVE: ContextVar[NativeCall | None] = ContextVar("agentscope_ctx_native", default=None)
"""The native-mode call under way in this task (set by the adapters' model call)."""

_SHAPES = {
    "messages": ("anthropic", anthropic_request, read_anthropic, read_anthropic_event),
    "responses": ("responses", responses_request, read_responses, read_responses_event),
}


class _Client:
    """A model's SDK client whose ``messages`` / ``responses`` shape native-mode calls."""

    __slots__ = ("_inner", "_refused")

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_refused", None)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name in _SHAPES:
            return _Endpoint(value, self, name)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)

    @property
    def refused(self) -> str | None:
        """The provider's refusal, once it refused (then no call asks again)."""
        refused: str | None = self._refused
        return refused

    def refuse(self, reason: str) -> None:
        object.__setattr__(self, "_refused", reason)


class _Endpoint:
    """``client.messages`` or ``client.responses``, with a shaping ``create``."""

    def __init__(self, inner: Any, client: _Client, name: str) -> None:
        self._inner, self._client, self._name = inner, client, name

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def create(self, **kwargs: Any) -> Any:
        call = NATIVE.get()
        kind, shape, read, follow = _SHAPES[self._name]
        if call is None or call.kind != kind or self._client.refused is not None:
            if call is not None and self._client.refused is not None:
                call.refused = self._client.refused
            return await self._inner.create(**kwargs)
        try:
            response = await self._inner.create(**shape(kwargs, call))
        except Exception as error:
            if not is_refusal(error):
                raise
            reason = str(error)[:300]
            logger.warning(
                "agentscope_ctx: the provider refused native context management (%s); the "
                "local ladder alone holds the budget from now on",
                reason,
            )
            self._client.refuse(reason)
            call.refused, call.sent_block = reason, False
            return await self._inner.create(**kwargs)
        if kwargs.get("stream"):
            return _Tapped(response, lambda event: follow(event, call))
        read(response, call)
        return response


class _Tapped:
    """A streamed response whose events are shown to `see` as its reader takes them
    (``async with`` and ``async for``, as AgentScope reads either; the rest passes)."""

    def __init__(self, inner: Any, see: Callable[[Any], None]) -> None:
        self._inner, self._see, self._entered = inner, see, None

    async def __aenter__(self) -> _Tapped:
        self._entered = await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        source = self._entered if self._entered is not None else self._inner
        async for event in source:
            try:
                self._see(event)
            except Exception:  # reading the block is a saving: never break the stream
                logger.exception("agentscope_ctx: could not read a streamed event")
            yield event

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def native_client(model: Any) -> bool:
    """Wrap `model.client` (once; a wrapper's ``inner`` model's) so that native-mode calls
    are shaped; whether the client asks for native context management (not refused)."""
    target = unwrapped(model)
    client = getattr(target, "client", None)
    if client is None:
        return False
    if not isinstance(client, _Client):
        client = _Client(client)
        target.client = client
    return client.refused is None
