"""The 1.x side of the runner seam (`agentscope_ctx.core._runner`): our helper agents as
AgentScope 1.x `ReActAgent`s, their tools answering a 1.x `ToolResponse`."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any, ParamSpec

from agentscope.agent import ReActAgent
from agentscope.formatter import FormatterBase
from agentscope.memory import InMemoryMemory
from agentscope.message import Msg as Msg1
from agentscope.message import TextBlock
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.model import ChatModelBase as ChatModel1  # the base of `_TimedModel`
from agentscope.tool import Toolkit
from agentscope.tool import ToolResponse as ToolText

from ..core._host import AgentRun, PrefixedCall
from ..models._cache import mark
from ..telemetry import enabled, note_response, noted_stream

__all__ = ["call_prefixed", "format_prefixed", "format_prompt", "run_agent", "tool_text"]

P = ParamSpec("P")


async def format_prompt(
    model: ChatModelBase, formatter: FormatterBase | None, *, sys_prompt: str, prompt: str
) -> list[dict[str, Any]]:
    """A system prompt and a user message as `formatter` sends them (for counting)."""
    assert formatter is not None, "AgentScope 1.x models need their formatter"
    return list(
        await formatter.format([Msg1("system", sys_prompt, "system"), Msg1("user", prompt, "user")])
    )


async def format_prefixed(
    model: ChatModelBase,
    formatter: FormatterBase | None,
    messages: Sequence[Any],
    instruction: str,
) -> list[dict[str, Any]]:
    """`messages` (formatted, as the agent's model was called) and the user message
    `instruction`, formatted by `formatter`, after them."""
    assert formatter is not None, "AgentScope 1.x models need their formatter"
    return [*messages, *await formatter.format([Msg1("user", instruction, "user")])]


async def call_prefixed(
    model: ChatModelBase, formatter: FormatterBase | None, call: PrefixedCall
) -> str:
    """Call `model` on the formatted `call.messages` and the user message `call.instruction`,
    with `call.tools` and `call.tool_choice` (sent only with tools) and the agent's call's
    cache marks and key (`call.cache`; the newest mark on the instruction); the answer's text
    (`agentscope_ctx.core._runner.call_prefixed`)."""
    prompt = await format_prefixed(model, formatter, call.messages, call.instruction)
    kwargs: dict[str, Any] = {"tools": call.tools} if call.tools else {}
    if call.tools and call.tool_choice is not None:
        kwargs["tool_choice"] = call.tool_choice
    plan, key = call.cache
    if plan is not None:
        prompt = mark(prompt, plan)
    if key is not None:
        kwargs["prompt_cache_key"] = key
    result = await model(prompt, **kwargs)
    if not isinstance(result, ChatResponse):  # a 1.x stream: each chunk holds all so far
        last = None
        async for chunk in result:
            last = chunk
        if last is None:
            return ""
        result = last
    note_response(result)
    return "".join(str(b.get("text", "")) for b in result.content if b.get("type") == "text")


def tool_text(func: Callable[P, str]) -> Callable[P, ToolText]:
    """`func` as a 1.x tool function: its text in a `ToolResponse` (name, docstring and
    signature kept, so the `Toolkit` builds the same schema)."""

    @functools.wraps(func)
    def tool(*args: P.args, **kwargs: P.kwargs) -> ToolText:
        return ToolText(content=[TextBlock(type="text", text=func(*args, **kwargs))])

    return tool


async def run_agent(model: ChatModelBase, formatter: FormatterBase | None, run: AgentRun) -> str:
    """A fresh `ReActAgent` (an `InMemoryMemory`, console output off) run on `run.prompt`;
    its final text (`agentscope_ctx.core._runner.run_agent`)."""
    assert formatter is not None, "AgentScope 1.x models need their formatter"
    toolkit = Toolkit()
    for tool in run.tools:
        toolkit.register_tool_function(tool.func)
    timed = run.call_timeout is not None or enabled() or run.cache is not None
    agent = ReActAgent(
        name=run.name,
        sys_prompt=run.sys_prompt,
        model=_TimedModel(model, run.call_timeout, run.cache) if timed else model,
        formatter=formatter,
        toolkit=toolkit,
        memory=InMemoryMemory(),
        max_iters=run.max_iters,
    )
    agent.set_console_output_enabled(False)
    # `reply`, not `agent(...)`: `__call__` turns a cancellation (our timeout) into a reply.
    reply = await agent.reply(Msg1("user", run.prompt, "user"))
    return reply.get_text_content() or ""


class _TimedModel(ChatModel1):
    """`inner`, each answer's usage noted for the helper call's span, and every call
    abandoned (`TimeoutError`) after `timeout` seconds (`None`: no limit); for a streamed
    answer, the whole stream counts. With `plan`, each formatted request gets its
    prompt-cache marks (`models._cache.mark`)."""

    def __init__(self, inner: ChatModel1, timeout: float | None, plan: Any = None) -> None:
        super().__init__(model_name=inner.model_name, stream=inner.stream)
        self.inner = inner
        self.timeout = timeout
        self.plan = plan

    async def __call__(
        self, *args: Any, **kwargs: Any
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        if self.plan is not None and args and isinstance(args[0], list):
            args = (mark(args[0], self.plan), *args[1:])
        if self.timeout is None:
            result = await self.inner(*args, **kwargs)
        else:
            deadline = asyncio.get_running_loop().time() + self.timeout
            result = await asyncio.wait_for(self.inner(*args, **kwargs), self.timeout)
        if isinstance(result, ChatResponse):
            note_response(result)  # the helper span's tokens (nothing when tracing is off)
            return result
        return noted_stream(result if self.timeout is None else self._stream(result, deadline))

    @staticmethod
    async def _stream(
        chunks: AsyncGenerator[ChatResponse, None], deadline: float
    ) -> AsyncGenerator[ChatResponse, None]:
        loop = asyncio.get_running_loop()
        while True:
            try:
                chunk = await asyncio.wait_for(anext(chunks), max(deadline - loop.time(), 0))
            except StopAsyncIteration:
                return
            yield chunk
