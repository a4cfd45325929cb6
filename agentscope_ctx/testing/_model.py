"""`ScriptedChatModel`: a real `ChatModelBase` of the installed AgentScope line answered from
a queue (`_answers.AnswerQueue`), recording each prompt it receives, streamed or not; a
context compactor's request gets `_summary.write_summary`'s answer.

Also the line's call shape, stated once for every offline model of the package (this one, the
demos' and the tests'): on 1.x a model is called with the formatted prompt (`Call`,
`CallModel`); on 2.x `_call_api` gets `list[Msg]` (`ChatCall`, `CallChatModel`), and
`OfflineChatModel` formats it with the real `OpenAIChatFormatter`, as a provider's model does.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass
from typing import Any

from agentscope.model import ChatModelBase, ChatResponse

from .._line import IS_1X
from ._answers import Answer, AnswerQueue, Prompt, ScriptedCall, ToolCall
from ._summary import compactor_request, write_summary

__all__ = ["ScriptedChatModel"]

CONTEXT_SIZE = 128_000
"""A 2.x scripted model's context window by default (a common provider's)."""


class _Scripted:
    """What both lines' scripted models share: the queue, the record, the summaries."""

    queue: AnswerQueue
    calls: list[ScriptedCall]
    summaries: bool

    def enqueue(self, *answers: Answer) -> None:
        """Add `answers` at the end of the queue."""
        self.queue.enqueue(*answers)

    @property
    def prompts(self) -> list[Prompt]:
        """Every prompt received, formatted as an OpenAI-compatible provider gets it."""
        return [call.messages for call in self.calls]

    async def _answer(
        self, messages: Prompt, tools: list[dict[str, Any]] | None, tool_choice: str | None
    ) -> object:
        """Record the call, then answer it: a summary, else the queue's next answer."""
        request = compactor_request(messages) if self.summaries else None
        self.calls.append(ScriptedCall(messages, tools, tool_choice, request is not None))
        if request is not None:
            return write_summary(request)
        return await self.queue.next(messages)

    def _call_id(self, call: ToolCall) -> str:
        return call.id or f"call_{len(self.calls):03d}"


if IS_1X:
    from agentscope.message import TextBlock, ToolUseBlock

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
        """A 1.x chat model whose call is one `respond(call)`: the agent's arguments as a
        `Call`."""

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

    class ScriptedChatModel(_Scripted, CallModel):
        """A scripted AgentScope 1.x chat model (see `agentscope_ctx.testing`).

        Args:
            answers: the queue, in order (`Answer`: texts, `ToolCall`s, exceptions, ...).
            default: the answer once the queue is empty (`None`: an `AssertionError`).
            stream: answer as a stream (growing chunks, the last one whole), as 1.x
                providers stream.
            summaries: answer a context compactor's request with `write_summary`'s summary,
                leaving the queue as it is.
            model_name: the model's name.
        """

        def __init__(
            self,
            answers: Iterable[Answer] = (),
            *,
            default: Answer | None = "Done.",
            stream: bool = False,
            summaries: bool = True,
            model_name: str = "scripted",
        ) -> None:
            super().__init__(model_name=model_name, stream=stream)
            self.queue = AnswerQueue(answers, default)
            self.calls = []
            self.summaries = summaries

        async def respond(self, call: Call) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
            choice = call.tool_choice if isinstance(call.tool_choice, str) else None
            response = self._response(await self._answer(call.messages, call.tools, choice))
            return self._stream(response) if self.stream else response

        def _response(self, answer: object) -> ChatResponse:
            if isinstance(answer, ChatResponse):
                return answer
            if isinstance(answer, ToolCall):
                said = [TextBlock(type="text", text=answer.text)] if answer.text else []
                use = ToolUseBlock(
                    type="tool_use",
                    id=self._call_id(answer),
                    name=answer.name,
                    input=dict(answer.arguments),
                    raw_input=json.dumps(answer.arguments),
                )
                return ChatResponse(content=[*said, use])
            return ChatResponse(content=[TextBlock(type="text", text=str(answer))])

        @staticmethod
        async def _stream(response: ChatResponse) -> AsyncGenerator[ChatResponse, None]:
            blocks = list(response.content)
            if blocks and blocks[0].get("type") == "text":  # the text grows, then the rest
                text = str(blocks[0].get("text", ""))
                half = TextBlock(type="text", text=text[: len(text) // 2])
                yield ChatResponse(content=[half], id=response.id)
            yield response

else:
    from agentscope.credential import CredentialBase
    from agentscope.formatter import OpenAIChatFormatter
    from agentscope.message import Msg, TextBlock, ToolCallBlock
    from agentscope.tool import ToolChoice
    from pydantic import BaseModel

    @dataclass(frozen=True)
    class ChatCall:
        """One call of a 2.x chat model's `_call_api`, as the base class made it."""

        model_name: str
        messages: list[Msg]
        tools: list[dict[str, Any]] | None
        """The tool schemas."""
        tool_choice: ToolChoice | None
        kwargs: dict[str, Any]
        """Any other keyword arguments."""

    class CallChatModel(ChatModelBase):
        """A 2.x chat model whose `_call_api` is one `respond(call)`: its arguments as a
        `ChatCall`."""

        async def _call_api(
            self,
            model_name: str,
            messages: list[Msg],
            tools: list[dict[str, Any]] | None = None,
            tool_choice: ToolChoice | None = None,
            **kwargs: Any,
        ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
            return await self.respond(ChatCall(model_name, messages, tools, tool_choice, kwargs))

        async def respond(
            self, call: ChatCall
        ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
            """The answer to `call` (a response, or a stream of them when `stream` is on)."""
            raise NotImplementedError

    class OfflineChatModel(CallChatModel):
        """A 2.x chat model answered here (no provider): no credential, no parameters, no
        retries; `formatter` is the real `OpenAIChatFormatter` (the one a 2.x agent finds on
        its model), and `answer` gets each call's messages as a provider would, with the tool
        schemas."""

        class Parameters(BaseModel):
            """An offline model takes no parameters."""

        def __init__(
            self, model: str, context_size: int = CONTEXT_SIZE, *, stream: bool = False
        ) -> None:
            super().__init__(
                credential=CredentialBase(),
                model=model,
                parameters=OfflineChatModel.Parameters(),
                stream=stream,
                max_retries=0,
                context_size=context_size,
            )
            self.formatter = OpenAIChatFormatter()

        async def respond(
            self, call: ChatCall
        ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
            return await self.answer(await self.formatter.format(call.messages), call.tools)

        async def answer(
            self, formatted: Prompt, tools: list[dict[str, Any]] | None
        ) -> ChatResponse:
            """The response to one call: `formatted` is the prompt as a provider gets it."""
            raise NotImplementedError

    class ScriptedChatModel(_Scripted, OfflineChatModel):
        """A scripted AgentScope 2.x chat model (see `agentscope_ctx.testing`).

        Args:
            answers: the queue, in order (`Answer`: texts, `ToolCall`s, exceptions, ...).
            default: the answer once the queue is empty (`None`: an `AssertionError`).
            stream: answer as a stream (deltas, which the base class accumulates into the
                whole answer), as 2.x providers stream.
            summaries: answer a context compactor's request with `write_summary`'s summary,
                leaving the queue as it is.
            model_name: the model's name.
            context_size: the model's context window, in tokens.
        """

        def __init__(
            self,
            answers: Iterable[Answer] = (),
            *,
            default: Answer | None = "Done.",
            stream: bool = False,
            summaries: bool = True,
            model_name: str = "scripted",
            context_size: int = CONTEXT_SIZE,
        ) -> None:
            super().__init__(model_name, context_size, stream=stream)
            self.queue = AnswerQueue(answers, default)
            self.calls = []
            self.summaries = summaries

        async def respond(
            self, call: ChatCall
        ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
            formatted = await self.formatter.format(call.messages)
            choice = call.tool_choice if isinstance(call.tool_choice, str) else None
            response = self._response(await self._answer(formatted, call.tools, choice))
            return self._stream(response) if self.stream else response

        def _response(self, answer: object) -> ChatResponse:
            if isinstance(answer, ChatResponse):
                return answer
            content: list[TextBlock | ToolCallBlock]
            if isinstance(answer, ToolCall):
                said = [TextBlock(text=answer.text)] if answer.text else []
                raw = json.dumps(answer.arguments)
                content = [
                    *said,
                    ToolCallBlock(id=self._call_id(answer), name=answer.name, input=raw),
                ]
            else:
                content = [TextBlock(text=str(answer))]
            return ChatResponse(content=content, is_last=True)  # type: ignore[arg-type]

        @staticmethod
        async def _stream(response: ChatResponse) -> AsyncGenerator[ChatResponse, None]:
            for block in response.content:  # one delta per block: the base class adds them up
                yield ChatResponse(content=[block], is_last=False, usage=response.usage)
