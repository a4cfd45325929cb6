"""Test doubles for AgentScope 2.x, the counterpart of `tests/support/fakes.py`.

`FakeChatModel` stands for a remote LLM we cannot reach: a real 2.x `ChatModelBase` whose
API call replays a scripted queue and records every prompt it received, formatted by the
real `OpenAIChatFormatter` (the formatter a 2.x agent finds on its model). Everything else in
the tests is real.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from copy import deepcopy
from typing import Any

from agentscope.credential import CredentialBase
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolCallBlock
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import ToolChoice
from pydantic import BaseModel

Reply = ChatResponse | str
Script = ChatResponse | str | Exception | Callable[[list[Msg]], "Reply | Awaitable[Reply]"]

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="allowed in tests")
"""For `FunctionTool(..., permission=ALLOW)`: 2.x asks the user before a custom tool runs."""


def text(reply: str) -> ChatResponse:
    """A plain text answer (ends a reply)."""
    return ChatResponse(content=[TextBlock(text=reply)], is_last=True)


def tool_call(name: str, call_id: str | None = None, **arguments: Any) -> ChatResponse:
    """An answer that calls one tool."""
    raw = json.dumps(arguments)
    call_id = call_id or f"call_{name}_{abs(hash(raw))}"
    return ChatResponse(content=[ToolCallBlock(id=call_id, name=name, input=raw)], is_last=True)


class FakeChatModel(ChatModelBase):
    """A scripted 2.x chat model.

    Each call pops the next item of the queue: a `ChatResponse` or a string (a text answer),
    an exception (raised), or a callable that receives the prompt (`list[Msg]`) and returns
    one of those, or a coroutine that does. When the queue is empty, `default` answers.
    With `stream=True` the answer comes as one delta chunk, which the base class
    accumulates into the final response, as it does for a real streaming provider.
    """

    class Parameters(BaseModel):
        """No parameters."""

    def __init__(
        self,
        responses: list[Script] | None = None,
        *,
        stream: bool = False,
        default: Script | None = "Done.",
        context_size: int = 128_000,
    ) -> None:
        super().__init__(
            credential=CredentialBase(),
            model="fake-model",
            parameters=FakeChatModel.Parameters(),
            stream=stream,
            max_retries=0,
            context_size=context_size,
        )
        self.formatter = OpenAIChatFormatter()
        self.queue: list[Script] = list(responses or [])
        self.default = default
        self.calls: list[dict[str, Any]] = []

    def enqueue(self, *responses: Script) -> None:
        self.queue.extend(responses)

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        self.calls.append(
            {
                "messages": deepcopy(messages),
                "formatted": await self.formatter.format(messages),
                "tools": tools,
                "tool_choice": tool_choice,
                **kwargs,
            }
        )
        item = self.queue.pop(0) if self.queue else self.default
        if item is None:
            raise AssertionError("FakeChatModel: script exhausted and no default")
        if callable(item) and not isinstance(item, ChatResponse):
            item = item(messages)
            if inspect.isawaitable(item):
                item = await item
        if isinstance(item, Exception):
            raise item
        response = text(item) if isinstance(item, str) else item
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

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: ToolChoice | None = None,
        **kwargs: Any,
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        if tools or tool_choice is not None or "response_format" in kwargs:
            self.calls.append({"rejected": True, "tools": tools, "tool_choice": tool_choice})
            raise ValueError("400: this model does not support tools or response_format")
        return await super()._call_api(model_name, messages, tools, tool_choice, **kwargs)
