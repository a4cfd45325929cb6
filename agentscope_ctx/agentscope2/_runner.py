"""The 2.x side of `agentscope_ctx.core._runner`: our helper agents as AgentScope 2.x
`Agent`s.

`run_agent` builds a fresh `Agent` per run (empty `AgentState`) with:

- `InjectionConfig(inject_runtime_state=False)`: no time / task / context-length hints in a
  prompt we sized ourselves;
- `_RunnerMiddleware`, whose `on_compress_context` never calls `next_handler`: the agent's
  built-in compression (a structured-output call, which some providers reject) never runs;
  its `on_model_call` drops `tool_choice` when there are no tools (the agent asks for
  `tool_choice="none"` after a stray tool call at its last iteration: a tool-less run sends
  no tool fields at all) and holds each model call to `call_timeout`;
- `ReActConfig(max_iters=..., interruption_raise_cancelled_error=True)`: a cancellation (the
  caller's `asyncio.wait_for`, or its own task being cancelled) leaves the run as a
  `CancelledError` instead of the agent's "I notice the interruption" reply, which
  `wait_for` on Python 3.11 would return as the answer;
- every tool a `function_tool` (allowed without asking the user).

A timed-out model call: AgentScope's `ChatModelBase.__call__` answers a cancelled API call
with an empty INTERRUPTED response instead of raising, so the deadline is checked after the
call returns, and each chunk of a stream likewise; past it, `TimeoutError` is raised (the
agent does not retry: `ModelConfig.max_retries` is 0).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.message import Msg, SystemMsg, TextBlock, UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.model import ChatModelBase, ChatResponse, FinishedReason
from agentscope.tool import ToolChoice, Toolkit

from ..core._host import AgentRun, PrefixedCall
from ..models._cache import KeyedModel, planned
from ..telemetry import note_response, noted_stream
from ._tools import function_tool

if TYPE_CHECKING:
    from agentscope.formatter import FormatterBase

__all__ = ["call_prefixed", "format_prefixed", "format_prompt", "run_agent"]

ModelResult = ChatResponse | AsyncGenerator[ChatResponse, None]


class _RunnerMiddleware(MiddlewareBase):
    """No built-in compression, no `tool_choice` without tools, a time limit per model call."""

    def __init__(self, call_timeout: float | None) -> None:
        """Args:
        call_timeout: Longest wait, in seconds, for one model call (a stream: all of it).
        """
        super().__init__()
        self.call_timeout = call_timeout

    async def on_compress_context(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., Awaitable[None]],
    ) -> None:
        """Skip the built-in compression: the caller keeps its prompt within budget."""

    async def on_model_call(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., Awaitable[ModelResult]],
    ) -> ModelResult:
        """Call on, without `tool_choice` when there are no tools, within the time limit."""
        result = await self._call(input_kwargs, next_handler)
        if isinstance(result, ChatResponse):
            note_response(result)  # the helper span's tokens (nothing when tracing is off)
            return result
        return noted_stream(result)

    async def _call(
        self,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., Awaitable[ModelResult]],
    ) -> ModelResult:
        changes: dict[str, Any] = {} if input_kwargs.get("tools") else {"tool_choice": None}
        if self.call_timeout is None:
            return await next_handler(**changes)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.call_timeout
        result = await asyncio.wait_for(next_handler(**changes), self.call_timeout)
        if loop.time() >= deadline:  # cancelled inside, answered with an empty response
            raise TimeoutError(f"model call took over {self.call_timeout:g} s")
        if isinstance(result, ChatResponse):
            return result
        return _bounded(result, deadline, self.call_timeout)


async def _bounded(
    chunks: AsyncGenerator[ChatResponse, None], deadline: float, limit: float
) -> AsyncGenerator[ChatResponse, None]:
    """The stream `chunks`, raising `TimeoutError` once `deadline` has passed."""
    loop = asyncio.get_running_loop()
    try:
        while True:
            try:
                chunk = await asyncio.wait_for(anext(chunks), max(deadline - loop.time(), 0))
            except StopAsyncIteration:
                return
            if loop.time() >= deadline:
                raise TimeoutError(f"model call took over {limit:g} s")
            yield chunk
    finally:
        await chunks.aclose()


async def run_agent(model: ChatModelBase, formatter: FormatterBase | None, run: AgentRun) -> str:
    """Run a fresh 2.x `Agent` on `run.prompt`; return its final text (see
    `agentscope_ctx.core._runner.run_agent`; a 2.x model owns its formatter: `formatter` is
    not used)."""
    agent = Agent(
        name=run.name,
        system_prompt=run.sys_prompt,
        model=model,
        toolkit=Toolkit(tools=[function_tool(t.func, read_only=t.read_only) for t in run.tools]),
        middlewares=[_RunnerMiddleware(run.call_timeout)],
        react_config=ReActConfig(max_iters=run.max_iters, interruption_raise_cancelled_error=True),
        injection_config=InjectionConfig(inject_runtime_state=False),
    )
    with planned(model, run.cache):  # (its calls, formatted by the model, marked so)
        reply = await agent.reply(UserMsg(name="user", content=run.prompt))
    return reply.get_text_content() or ""


async def format_prompt(
    model: ChatModelBase, formatter: FormatterBase | None = None, *, sys_prompt: str, prompt: str
) -> list[dict[str, Any]]:
    """A system prompt and a user message as `model.formatter` sends them (`formatter` is not
    used: a 2.x model owns its own)."""
    messages = [SystemMsg(name="system", content=sys_prompt), UserMsg(name="user", content=prompt)]
    return await _formatter(model).format(messages)


def _formatter(model: ChatModelBase) -> FormatterBase:
    formatter: FormatterBase | None = getattr(model, "formatter", None)
    if formatter is None:
        raise TypeError(f"{type(model).__name__} has no formatter (a 2.x model owns one)")
    return formatter


async def format_prefixed(
    model: ChatModelBase,
    formatter: FormatterBase | None,
    messages: Sequence[Msg],
    instruction: str,
) -> list[dict[str, Any]]:
    """`messages` and the user message `instruction` as `model.formatter` sends them
    (`formatter` is not used: a 2.x model owns its own)."""
    return await _formatter(model).format([*messages, UserMsg(name="user", content=instruction)])


async def call_prefixed(
    model: ChatModelBase, formatter: FormatterBase | None, call: PrefixedCall
) -> str:
    """Call `model` on `call.messages` (2.x messages) and the user message `call.instruction`
    (see `agentscope_ctx.core._runner.call_prefixed`; `formatter` is not used), with the
    agent's call's cache marks and key (`call.cache`: the formatter marks the request while
    `PLAN` is set, as at the agent's call, the newest mark on the instruction); the answer's
    text."""
    tool_choice: ToolChoice | None = call.tool_choice
    plan, key = call.cache
    with planned(model, plan):
        result = await (model if key is None else KeyedModel(model, key))(
            messages=[*call.messages, UserMsg(name="user", content=call.instruction)],
            tools=call.tools or None,
            tool_choice=tool_choice if call.tools else None,
        )
        if not isinstance(result, ChatResponse):  # the base class ends a stream with the whole
            last = None
            try:
                async for chunk in result:
                    last = chunk
            finally:
                await result.aclose()
            if last is None:
                return ""
            result = last
    note_response(result)
    if result.finished_reason == FinishedReason.INTERRUPTED:  # cancelled (our time limit)
        raise TimeoutError("the model call was interrupted")
    return "".join(b.text for b in result.content if isinstance(b, TextBlock))
