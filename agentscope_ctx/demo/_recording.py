"""`Recorder`: runs a demo on a real model, measuring what the scripted one measures,
plus what only a provider tells: its own count of each prompt (usage) and the prompts it
refuses. A refused prompt keeps its step number and is shown as such; when it was refused as
too long, the agent's `GuardedModel` compacts and retries, and the retry is marked.

What both lines' recording models share (1.x: `_line1.RecordingModel`, 2.x:
`_line2.RecordingChatModel`)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from agentscope.model import ChatModelBase, ChatResponse

from ..core._unreachable import unreachable
from ..models._guard import is_context_overflow
from ._scripted import (
    Move,
    Prompt,
    PromptStats,
    Schemas,
    describe,
    describe_rejection,
    rejection_reason,
)

__all__ = ["Recorder"]


class Recorder:
    """What both lines' recording models do around the inner model's call: number the step,
    mark a retry after an overflow, relay a stream, note a rejection, describe the moves."""

    def __init__(
        self,
        inner: ChatModelBase,
        *,
        stats: PromptStats,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        """Wrap `inner` (see `RecordingModel`); the chat model base is made with
        `_base_arguments(inner)`."""
        super().__init__(**self._base_arguments(inner))
        self.inner = inner
        self.stats = stats
        self.on_step = on_step
        self._overflowed = False

    @staticmethod
    def _base_arguments(inner: ChatModelBase) -> dict[str, Any]:
        """The line's chat model base's arguments, taken from the wrapped model."""
        raise NotImplementedError

    async def _record(
        self,
        prompt: Prompt,
        tools: Schemas,
        call: Callable[[], Awaitable[ChatResponse | AsyncGenerator[ChatResponse, None]]],
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        """Count `prompt` as the step's, make the inner model's `call` and note its answer
        (a stream as it is relayed) or its refusal."""
        tokens, _ = await self.stats.observe(prompt, tools)
        step = self._start()
        try:
            response = await call()
        except Exception as exc:
            self._reject(exc, step, tokens)
            raise
        if isinstance(response, ChatResponse):
            self._note(response, step, tokens)
            return response
        return self._relay(response, step, tokens)

    def _start(self) -> int:
        """The step of the prompt just observed (a retry after an overflow is marked)."""
        step = len(self.stats.prompt_tokens)
        if self._overflowed:
            self.stats.retries.append(step)
            self._overflowed = False
        return step

    async def _relay(
        self, chunks: AsyncGenerator[ChatResponse, None], step: int, tokens: int
    ) -> AsyncGenerator[ChatResponse, None]:
        last: ChatResponse | None = None
        try:
            async for chunk in chunks:
                last = chunk
                yield chunk
        except Exception as exc:  # a streaming provider may refuse on the first chunk
            self._reject(exc, step, tokens)
            raise
        if last is not None:  # the chunks accumulate: the last one is the whole answer
            self._note(last, step, tokens)

    def _reject(self, exc: Exception, step: int, tokens: int) -> None:
        client = getattr(getattr(self, "inner", None), "client", None)
        base_url = getattr(client, "base_url", None)
        unsent = unreachable(exc, None if base_url is None else str(base_url))
        reason = unsent or rejection_reason(exc)
        self.stats.rejected[step] = reason
        self._overflowed = is_context_overflow(exc)
        if self.on_step is not None:
            self.on_step(describe_rejection(step, tokens, reason, sent=unsent is None))

    def _note(self, response: ChatResponse, step: int, tokens: int) -> None:
        raise NotImplementedError

    def _describe(
        self, moves: list[Move], texts: list[str], step: int, tokens: int, provider: int | None
    ) -> None:
        """Describe the answer's moves (its text when it called no tool)."""
        if not moves:
            moves.append(Move(text="".join(texts)))
        if self.on_step is not None:
            retry = step in self.stats.retries
            for move in moves:
                self.on_step(describe(step, tokens, move, provider=provider, retry=retry))
