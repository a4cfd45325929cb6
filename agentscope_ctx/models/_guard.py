"""`GuardedModel`: the agent's model, watched for what the provider says about the prompt.

After each call it reads the provider-reported prompt size (`ChatResponse.usage`, see
`prompt_usage`) so that the pipeline can calibrate its estimate. When a call fails with the
provider's context-length error, it runs one emergency compaction (given the error, so that
a window it states is learned), rebuilds the prompt from the compacted memory and retries
once; if that fails too, the original error is raised with a one-line explanation. It
never loops.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from agentscope.model import ChatModelBase, ChatResponse

from ..core._overflow import is_context_overflow
from ..core._unreachable import unreachable
from ..core.tokens._calibration import PromptUsage, prompt_usage
from ._cache import CachePlan, mark
from ._native import NativeCall
from ._native_client import NATIVE

__all__ = ["GuardedModel", "is_context_overflow", "note_unreachable"]

logger = logging.getLogger("agentscope_ctx")

Recover = Callable[[Exception], Awaitable[list[dict[str, Any]] | None]]


class GuardedModel(ChatModelBase):
    """Wraps a `ChatModelBase`; everything else about the model stays as it was.

    Args:
        inner: the agent's model.
        on_usage: called with the provider's count of the prompt after a call.
        recover: given the provider's context-length error, runs the emergency compaction
            and returns the rebuilt prompt (or `None` when nothing could be done).
    """

    def __init__(
        self,
        inner: ChatModelBase,
        *,
        on_usage: Callable[[PromptUsage], object],
        recover: Recover,
        on_prompt: Callable[[list[dict[str, Any]] | None, dict[str, Any]], object] | None = None,
        cache: Callable[[], tuple[CachePlan | None, str | None]] | None = None,
        native: Callable[[], NativeCall | None] | None = None,
        on_native: Callable[[NativeCall], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(model_name=inner.model_name, stream=inner.stream)
        self.inner = inner
        self.on_usage = on_usage
        self.recover = recover
        self.on_prompt = on_prompt
        """Told each prompt the provider accepted, with the call's keyword arguments (`None`
        for a prompt it rejected: the retry's prompt is not the agent's memory)."""
        self.cache = cache
        """The prompt-cache marks and key of the next call (`models._cache.call_cache`),
        applied to the request as formatted; `on_prompt` is told the request unmarked."""
        self.applied: tuple[CachePlan | None, str | None] = (None, None)
        """The marks' plan and the key the last call was given (`on_prompt` reads them: the
        compactor's prefix request applies them too)."""
        self.native = native
        """The native-mode part of the next call (`compactor.mode: native`), set for the
        model's client while the call is made (`models._native_client`)."""
        self.on_native = on_native
        """Given the call after a response that opened with the provider's block."""

    def __getattr__(self, name: str) -> Any:  # other attributes of the wrapped model
        inner = self.__dict__.get("inner")
        if inner is None:  # not initialised (copy, pickle): behave like a plain object
            raise AttributeError(name)
        return getattr(inner, name)

    async def __call__(
        self, messages: list[dict[str, Any]], *args: Any, **kwargs: Any
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        self.inner.stream = self.stream  # callers (e.g. query rewriting) toggle it on us
        call = self.native() if self.native is not None else None
        token = NATIVE.set(call)
        try:
            response = await self.inner(self._cached(messages, kwargs), *args, **kwargs)
        except Exception as exc:
            self._prompt(None, kwargs)
            if not is_context_overflow(exc):
                note_unreachable(exc)
                raise
            return await self._retry(exc, args, kwargs)
        finally:
            NATIVE.reset(token)
        self._prompt(messages, kwargs)
        if isinstance(response, ChatResponse):
            self._observe(response)
            await self._native_done(call)
            return response
        return self._stream(response, args, kwargs, call=call)

    async def _retry(
        self, original: Exception, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        logger.warning("agentscope_ctx: the provider says the prompt is too long: %s", original)
        prompt = await self.recover(original)
        if prompt is None:
            _explain(original, "agentscope_ctx could not compact the context any further")
            raise original
        try:
            response = await self.inner(self._cached(prompt, kwargs), *args, **kwargs)
        except Exception as exc:
            if is_context_overflow(exc):
                _explain(
                    original,
                    "agentscope_ctx compacted the context once and retried; the provider "
                    "still says the prompt is too long (is max_input_tokens above the "
                    "model's window?)",
                )
                raise original from exc
            raise
        if isinstance(response, ChatResponse):
            self._observe(response)
            return response
        return self._stream(response, args, kwargs, retried=True)

    async def _stream(
        self,
        stream: AsyncGenerator[ChatResponse, None],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        retried: bool = False,
        call: NativeCall | None = None,
    ) -> AsyncGenerator[ChatResponse, None]:
        last: ChatResponse | None = None
        try:
            async for chunk in stream:
                last = chunk
                yield chunk
        except Exception as exc:
            # A streaming provider may report the overflow on the first chunk.
            if last is not None or retried or not is_context_overflow(exc):
                raise
            retry = await self._retry(exc, args, kwargs)
            if isinstance(retry, ChatResponse):
                yield retry
                return
            async for chunk in retry:
                yield chunk
            return
        if last is not None:
            self._observe(last)
        await self._native_done(call)

    async def _native_done(self, call: NativeCall | None) -> None:
        """Hand a block the response opened with to `on_native` (once)."""
        if call is None or call.captured is None or self.on_native is None:
            return
        try:
            await self.on_native(call)
        except Exception:  # native mode is a saving: never fail the reply for it
            logger.exception("agentscope_ctx: could not keep the provider's compaction")
        call.captured = None

    def _cached(
        self, messages: list[dict[str, Any]], kwargs: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """`messages` with the prompt-cache marks; the cache key goes into `kwargs`."""
        if self.cache is None:
            return messages
        try:
            plan, key = self.cache()
            self.applied = (plan, key)
            if key is not None:
                kwargs.setdefault("prompt_cache_key", key)
            return messages if plan is None else mark(messages, plan)
        except Exception:  # the cache is a saving: never fail the call for it
            logger.exception("agentscope_ctx: could not place the prompt-cache marks")
            return messages

    def _prompt(self, messages: list[dict[str, Any]] | None, kwargs: dict[str, Any]) -> None:
        if self.on_prompt is None:
            return
        try:
            self.on_prompt(messages, kwargs)
        except Exception:  # keeping the prompt is a nicety: never fail the call
            logger.exception("agentscope_ctx: could not keep the prompt")

    def _observe(self, response: ChatResponse) -> None:
        usage = prompt_usage(getattr(response, "usage", None))
        if usage is None:
            return
        try:
            self.on_usage(usage)
        except Exception:  # calibration is best effort: never fail the reply for it
            logger.exception("agentscope_ctx: could not record the reported usage")


def note_unreachable(exc: BaseException) -> None:
    """When `exc` says the model server could not be reached, name its URL: a note on the
    error (shown with it) and a warning in the log."""
    text = unreachable(exc)
    if text is None:
        return
    if hasattr(exc, "add_note") and text not in getattr(exc, "__notes__", ()):
        exc.add_note(text)
    logger.warning("agentscope_ctx: %s", text)


def _explain(exc: Exception, line: str) -> None:
    if hasattr(exc, "add_note"):  # Python 3.11+
        exc.add_note(line)
    logger.error("agentscope_ctx: %s", line)
