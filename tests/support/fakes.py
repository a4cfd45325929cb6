"""Test doubles shared by the suite.

`FakeChatModel` stands for a remote LLM we cannot reach: it replays a scripted queue of
responses and records every prompt it received. Everything else in the tests is real.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from agentscope.message import TextBlock, ToolUseBlock
from agentscope.model import ChatModelBase, ChatResponse

Reply = ChatResponse | str
Script = (
    ChatResponse | str | Exception | Callable[[list[dict[str, Any]]], "Reply | Awaitable[Reply]"]
)


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


class FakeChatModel(ChatModelBase):
    """A scripted chat model.

    Each call pops the next item of the queue: a `ChatResponse` or a string (returned as a
    text answer), an exception (raised), or a callable that receives the prompt and returns
    one of those, or a coroutine that does (e.g. one that never finishes: a hanging
    provider). When the queue is empty, `default` answers (a text by default).
    """

    def __init__(
        self,
        responses: list[Script] | None = None,
        *,
        stream: bool = False,
        default: Script | None = "Done.",
        name: str = "fake-model",
    ) -> None:
        super().__init__(model_name=name, stream=stream)
        self.queue: list[Script] = list(responses or [])
        self.default = default
        self.calls: list[dict[str, Any]] = []

    def enqueue(self, *responses: Script) -> None:
        self.queue.extend(responses)

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        structured_model: Any = None,
        **kwargs: Any,
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        self.calls.append(
            {"messages": messages, "tools": tools, "tool_choice": tool_choice, **kwargs}
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
        yield response
