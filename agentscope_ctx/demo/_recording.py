"""`RecordingModel`: runs a demo on a real model, measuring what the scripted one measures."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any

from agentscope.model import ChatModelBase, ChatResponse

from .._tokens import TokenCounter
from ._scripted import Move, PromptStats, describe

__all__ = ["RecordingModel"]


class RecordingModel(ChatModelBase):
    """Wraps a real chat model: counts each prompt and notes continuation reads.

    Args:
        inner: the real model.
        counter: counts each prompt received.
        on_step: called with a one-line description of each answer.
    """

    def __init__(
        self,
        inner: ChatModelBase,
        *,
        counter: TokenCounter,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(model_name=inner.model_name, stream=inner.stream)
        self.inner = inner
        self.stats = PromptStats(counter)
        self.on_step = on_step

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        structured_model: Any = None,
        **kwargs: Any,
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        tokens, _ = await self.stats.observe(messages, tools)
        step = len(self.stats.prompt_tokens)
        response = await self.inner(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            structured_model=structured_model,
            **kwargs,
        )
        if isinstance(response, ChatResponse):
            self._note(response, step, tokens)
            return response
        return self._relay(response, step, tokens)

    async def _relay(
        self, chunks: AsyncGenerator[ChatResponse, None], step: int, tokens: int
    ) -> AsyncGenerator[ChatResponse, None]:
        last: ChatResponse | None = None
        async for chunk in chunks:
            last = chunk
            yield chunk
        if last is not None:  # AgentScope's chunks accumulate: the last one is whole
            self._note(last, step, tokens)

    def _note(self, response: ChatResponse, step: int, tokens: int) -> None:
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
        if not moves:
            moves.append(Move(text="".join(texts)))
        if self.on_step is not None:
            for move in moves:
                self.on_step(describe(step, tokens, move))
