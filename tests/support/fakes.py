"""Test doubles shared by the suite: the scripted chat model of the installed AgentScope line.

`FakeChatModel` stands for a remote LLM we cannot reach: a real `ChatModelBase` of the installed
line that replays a scripted queue of responses and records every prompt it received.
Everything else in the tests is real. Both lines' models share the queue (`_Scripted`, on the
public `agentscope_ctx.testing` model's); what differs per line is how AgentScope calls a model
(stated once in the package, for the demo's models and these: 1.x
`agentscope_ctx.testing._model.CallModel`, 2.x `CallChatModel`, each handing a call to
`respond`) and what an answer is made of:

- 1.x: the model is called with the formatted prompt (`list[dict]`); a tool call is a
  `ToolUseBlock` dict; `name=` names the model.
- 2.x: `_call_api` receives the prompt as `list[Msg]`, and a call records it as the real
  `OpenAIChatFormatter` formats it too (`"formatted"`, the formatter a 2.x agent finds on its
  model); a tool call is a `ToolCallBlock`; `context_size=` is the provider's window; streamed,
  the answer comes as one delta chunk, which the base class accumulates into the final response,
  as it does for a real streaming provider. `ALLOW` and `StrictChatModel` are 2.x only.

`text(reply)` and `tool_call(name, **arguments)` make the installed line's answers; the `line`
fixture (`tests/support/agent_line.py`) hands them to a test of a behaviour both lines share.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from copy import deepcopy
from typing import Any

from agentscope.model import ChatResponse

from agentscope_ctx._line import IS_1X
from agentscope_ctx.testing._answers import AnswerQueue

Reply = ChatResponse | str
Script = ChatResponse | str | Exception | Callable[[Any], "Reply | Awaitable[Reply]"]
"""One item of a fake model's queue: an answer, a string (a text answer), an exception (raised),
or a callable that receives the prompt (1.x: `list[dict]`, 2.x: `list[Msg]`) and returns one of
those, or a coroutine that does (e.g. one that never finishes: a hanging provider)."""


class _Scripted:
    """The scripted queue of a fake model, the same on both lines: the public scripted model's
    (`agentscope_ctx.testing`'s `AnswerQueue`), with a route before it and the usage a provider
    reports; a callable item gets the prompt as the line's model does (1.x: formatted, 2.x:
    `list[Msg]`)."""

    queue: AnswerQueue
    calls: list[dict[str, Any]]
    route: Callable[[list[dict[str, Any]]], Script | None] | None
    """Answers a call before the queue when it returns an item: given the prompt as the
    provider gets it (OpenAI chat messages, `tests.support.agent_line.sent`), e.g. a
    compaction request told from the agent's calls on one model."""
    usage: Any
    """What the provider reports on each answer from the queue (`usage(...)`; `None`:
    nothing)."""

    def _script(self, responses: list[Script] | None, default: Script | None) -> None:
        self.queue = AnswerQueue(responses or [], default)
        self.calls = []
        self.route = None
        self.usage = None

    def enqueue(self, *responses: Script) -> None:
        self.queue.enqueue(*responses)

    async def _next_answer(self, prompt: Any, formatted: list[dict[str, Any]]) -> ChatResponse:
        """The routed answer, else the next of the queue (`default` when it is empty), raised
        if an exception."""
        routed = self.route(formatted) if self.route is not None else None
        source = self.queue if routed is None else AnswerQueue([routed], None)
        item = await source.next(prompt)
        response = text(item) if isinstance(item, str) else item
        assert isinstance(response, ChatResponse), response
        if routed is None and self.usage is not None:
            response.usage = self.usage
        return response


if IS_1X:
    from agentscope.message import TextBlock, ToolUseBlock

    from agentscope_ctx.testing._model import Call, CallModel

    def text(reply: str) -> ChatResponse:
        """A plain text answer (ends a ReAct reply)."""
        return ChatResponse(content=[TextBlock(type="text", text=reply)])

    def tool_call(name: str, call_id: str | None = None, **arguments: Any) -> ChatResponse:
        """An answer that calls one tool."""
        call_id = call_id or f"call_{name}_{abs(hash(json.dumps(arguments, sort_keys=True)))}"
        return ChatResponse(
            content=[
                ToolUseBlock(
                    type="tool_use",
                    id=call_id,
                    name=name,
                    input=arguments,
                    raw_input=json.dumps(arguments),
                )
            ]
        )

    def usage(input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> Any:
        """A provider's usage report, with its cache reads as OpenAI reports them."""
        from agentscope.model._model_usage import ChatUsage

        details = {
            "prompt_tokens": input_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens},
        }
        return ChatUsage(
            input_tokens=input_tokens, output_tokens=output_tokens, time=0.0, metadata=details
        )

    class FakeChatModel(_Scripted, CallModel):
        """A scripted 1.x chat model: each call pops the next `Script` item of the queue;
        when the queue is empty, `default` answers (a text by default). Called as the demo's
        1.x models are (`CallModel`)."""

        def __init__(
            self,
            responses: list[Script] | None = None,
            *,
            stream: bool = False,
            default: Script | None = "Done.",
            name: str = "fake-model",
        ) -> None:
            super().__init__(model_name=name, stream=stream)
            self._script(responses, default)

        async def respond(self, call: Call) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
            self.calls.append(
                {
                    "messages": call.messages,
                    "tools": call.tools,
                    "tool_choice": call.tool_choice,
                    **call.kwargs,
                }
            )
            response = await self._next_answer(call.messages, call.messages)
            if not self.stream:
                return response
            return self._stream(response)

        @staticmethod
        async def _stream(response: ChatResponse) -> AsyncGenerator[ChatResponse, None]:
            yield response

else:
    from agentscope.message import TextBlock, ToolCallBlock
    from agentscope.permission import PermissionBehavior, PermissionDecision

    from agentscope_ctx.testing._model import ChatCall, OfflineChatModel

    ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed in tests")
    """For `FunctionTool(..., permission=ALLOW)`: 2.x asks the user before a custom tool
    runs."""

    def text(reply: str) -> ChatResponse:
        """A plain text answer (ends a reply)."""
        return ChatResponse(content=[TextBlock(text=reply)], is_last=True)

    def tool_call(name: str, call_id: str | None = None, **arguments: Any) -> ChatResponse:
        """An answer that calls one tool."""
        raw = json.dumps(arguments)
        call_id = call_id or f"call_{name}_{abs(hash(raw))}"
        return ChatResponse(content=[ToolCallBlock(id=call_id, name=name, input=raw)], is_last=True)

    def usage(input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> Any:
        """A provider's usage report, with its cache reads."""
        from agentscope.model import ChatUsage

        return ChatUsage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            time=0.0,
            cache_input_tokens=cached_tokens,
        )

    class FakeChatModel(_Scripted, OfflineChatModel):
        """A scripted 2.x chat model: each call pops the next `Script` item of the queue;
        when the queue is empty, `default` answers. The demo's offline 2.x model (no
        credential, no parameters, the real `OpenAIChatFormatter`), with a queue."""

        def __init__(
            self,
            responses: list[Script] | None = None,
            *,
            stream: bool = False,
            default: Script | None = "Done.",
            context_size: int = 128_000,
        ) -> None:
            super().__init__("fake-model", context_size, stream=stream)
            self._script(responses, default)

        async def respond(
            self, call: ChatCall
        ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
            formatted = await self.formatter.format(call.messages)
            self.calls.append(
                {
                    "messages": deepcopy(call.messages),
                    "formatted": formatted,
                    "tools": call.tools,
                    "tool_choice": call.tool_choice,
                    **call.kwargs,
                }
            )
            response = await self._next_answer(call.messages, formatted)
            if not self.stream:
                return response
            return self._stream(response)

        @staticmethod
        async def _stream(response: ChatResponse) -> AsyncGenerator[ChatResponse, None]:
            yield ChatResponse(content=list(response.content), is_last=False, usage=response.usage)

    class StrictChatModel(FakeChatModel):
        """A provider that serves plain chat only: it rejects any call that carries tools, a
        `tool_choice` or a `response_format`, and structured output (what AgentScope's built-in
        context compression asks for), as some OpenAI-compatible servers do. Every call is
        recorded, the rejected ones too."""

        async def respond(
            self, call: ChatCall
        ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
            if call.tools or call.tool_choice is not None or "response_format" in call.kwargs:
                self.calls.append(
                    {"rejected": True, "tools": call.tools, "tool_choice": call.tool_choice}
                )
                raise ValueError("400: this model does not support tools or response_format")
            return await super().respond(call)


async def hang(messages: Any) -> str:
    """A provider that never answers (a script item, e.g. ``FakeChatModel(default=hang)``)."""
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


class StallingStream(FakeChatModel):
    """Streams the first chunk of its answer, then nothing ever again."""

    @staticmethod
    async def _stream(response: ChatResponse) -> AsyncGenerator[ChatResponse, None]:
        if IS_1X:
            yield response
        else:
            yield ChatResponse(content=list(response.content), is_last=False)
        await asyncio.Event().wait()


NOTED_SUMMARY = "\n".join(
    f"## {title}\n- noted"
    for title in (
        "Goal",
        "Constraints and preferences",
        "Progress",
        "Key decisions",
        "Next steps",
        "Critical context",
    )
)
"""A compactor model's summary: each section a heading with one item."""
