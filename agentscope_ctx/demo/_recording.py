"""`RecordingModel`: runs a demo on a real model, measuring what the scripted one measures,
plus what only a provider tells: its own count of each prompt (usage) and the prompts it
refuses. A refused prompt keeps its step number and is shown as such; when it was refused as
too long, the agent's `GuardedModel` compacts and retries, and the retry is marked.

`CallModel` states once how AgentScope 1.x calls a chat model, for the demo's 1.x models
(this one, and the offline ones of `_line1`) and the tests' scripted 1.x model."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agentscope.model import ChatModelBase, ChatResponse

from ..core._unreachable import unreachable
from ..core.tokens._calibration import prompt_usage
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

__all__ = ["Call", "CallModel", "Recorder", "RecordingModel"]


@dataclass(frozen=True)
class Call:
    """One call of a 1.x chat model, as the agent made it."""

    messages: list[dict[str, Any]]
    """The formatted prompt."""
    tools: list[dict[str, Any]] | None
    """The tool schemas."""
    tool_choice: str | None
    structured_model: Any
    kwargs: dict[str, Any]
    """Any other keyword arguments."""


class CallModel(ChatModelBase):
    """A 1.x chat model whose call is one `respond(call)`: the agent's arguments as a `Call`."""

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        structured_model: Any = None,
        **kwargs: Any,
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        return await self.respond(Call(messages, tools, tool_choice, structured_model, kwargs))

    async def respond(self, call: Call) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        """The answer to `call` (a response, or a stream of them)."""
        raise NotImplementedError


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


class RecordingModel(Recorder, CallModel):
    """Wraps a real chat model: counts each prompt, notes continuation reads, the provider's
    reported prompt tokens and the prompts it rejects.

    Args:
        inner: the real model.
        stats: counts each prompt received and watches its notices.
        on_step: called with a one-line description of each answer (or rejection).
    """

    @staticmethod
    def _base_arguments(inner: ChatModelBase) -> dict[str, Any]:
        return {"model_name": inner.model_name, "stream": inner.stream}

    async def respond(self, call: Call) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        self.inner.stream = self.stream
        return await self._record(
            call.messages,
            call.tools,
            lambda: self.inner(
                call.messages,
                tools=call.tools,
                tool_choice=call.tool_choice,
                structured_model=call.structured_model,
                **call.kwargs,
            ),
        )

    def _note(self, response: ChatResponse, step: int, tokens: int) -> None:
        usage = prompt_usage(getattr(response, "usage", None))
        provider = None if usage is None else usage.tokens
        if usage is not None:
            self.stats.provider_tokens[step - 1] = usage.tokens
            self.stats.provider_cached[step - 1] = usage.cached
        moves: list[Move] = []
        texts: list[str] = []
        for block in response.content:
            if block.get("type") == "tool_use":
                raw = block.get("input")
                arguments: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
                name = str(block.get("name"))
                move = Move(tool=name, arguments=arguments)
                move.continuation = self.stats.note_call(name, arguments)
                moves.append(move)
            elif block.get("type") == "text":
                texts.append(str(block.get("text", "")))
        self._describe(moves, texts, step, tokens, provider)
