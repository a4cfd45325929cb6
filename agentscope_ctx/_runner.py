"""The runner seam: how our helper agents (Compactor, Summarizer, consolidation) run, on both
AgentScope lines.

Callers see one line-neutral API; the AgentScope calls behind it differ by line:

- `run_agent` asks a fresh agent (empty memory, console output off) one question and returns
  its final text. On 1.x it is a `ReActAgent` with an `InMemoryMemory` and a `Toolkit` holding
  `tools` (as it always was); on 2.x an `agentscope.agent.Agent` built by
  `agentscope_ctx._v2._runner` (imported on first use, so this module imports on both lines):
  no runtime-state injection, built-in context compression off (the caller sizes its own
  prompt), every tool allowed without asking the user.
- `run_agent_once` is the tool-less, one-iteration case (the Compactor, consolidation).
- No structured output and no `response_format`, on either line: a helper agent answers in
  plain text, and its caller validates that text (the Compactor: `validate_summary`, one
  retry, the extractive fallback). A tool-less run sends no `tools` and no `tool_choice`, so
  providers that reject those (or `response_format`) serve it as well.
- `tool_text` makes a tool function whose result is its text a tool of the installed line:
  on 1.x it wraps the text in a 1.x `ToolResponse` (what a 1.x `Toolkit` requires); on 2.x it
  returns the function unchanged (a 2.x `FunctionTool` turns a `str` into the result's text
  block; see `agentscope_ctx._v2._tools.function_tool`).
- The model's formatter: a 1.x model needs one passed along (`formatter`); a 2.x model owns
  its own (`model.formatter`), and the `formatter` argument is ignored there (`None` is fine).
- `call_prefixed` is the one call made without an agent: the Compactor's prefix request
  (`compactor.request: prefix`), which must start with the agent's last prompt byte for byte
  (so that a provider's prompt cache serves it), and an agent would format it anew. It sends
  the agent's last prompt as the agent sent it (1.x: the formatted messages; 2.x: the same
  messages, which the model's formatter turns into the same bytes), the same tools, and a
  `tool_choice` that does not force a call, then one user message; it returns the text.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeAlias, cast

from ._line import IS_1X

if TYPE_CHECKING:
    from agentscope.formatter import FormatterBase
    from agentscope.model import ChatModelBase

__all__ = [
    "AgentTool",
    "ToolText",
    "call_prefixed",
    "format_prefixed",
    "format_prompt",
    "has_model",
    "run_agent",
    "run_agent_once",
    "tool_text",
]

P = ParamSpec("P")


@dataclass(frozen=True)
class AgentTool:
    """A tool for `run_agent`: a function of keyword arguments, documented Google-style (its
    name, docstring and signature make the schema), decorated with `tool_text`.

    Attributes:
        func: The tool function (a bound method is fine).
        read_only: Whether it only reads (2.x: read-only tools run concurrently; the others
            one at a time). Ignored on 1.x.
    """

    func: Callable[..., Any]
    read_only: bool = False


def has_model(model: ChatModelBase | None, formatter: FormatterBase | None) -> bool:
    """Whether a helper agent can run: a model, and on 1.x its formatter (a 2.x model owns
    its formatter, so `formatter` may be `None` there)."""
    return model is not None and (formatter is not None or not IS_1X)


async def run_agent_once(
    model: ChatModelBase,
    formatter: FormatterBase | None,
    *,
    name: str,
    sys_prompt: str,
    prompt: str,
) -> str:
    """Ask a tool-less, one-iteration agent with a fresh memory; return its text.

    Args:
        model: The chat model of the installed line.
        formatter: The formatter of `model` (1.x; ignored on 2.x).
        name: The agent's name.
        sys_prompt: Its system prompt.
        prompt: The user message.
    """
    return await run_agent(model, formatter, name=name, sys_prompt=sys_prompt, prompt=prompt)


async def run_agent(
    model: ChatModelBase,
    formatter: FormatterBase | None,
    *,
    name: str,
    sys_prompt: str,
    prompt: str,
    tools: Sequence[AgentTool] = (),
    max_iters: int = 1,
    call_timeout: float | None = None,
) -> str:
    """Run a fresh agent on `prompt` until its final text answer; return that text.

    Args:
        model: The chat model of the installed line.
        formatter: The formatter of `model` (1.x; ignored on 2.x).
        name: The agent's name.
        sys_prompt: Its system prompt.
        prompt: The user message.
        tools: Its tools (none by default).
        max_iters: Reasoning-acting iterations; past them the agent is asked for a final
            text answer (both lines do this).
        call_timeout: Longest wait, in seconds, for one model call (a streamed answer: for
            all of it); `None` for no limit.

    Raises:
        TimeoutError: a model call took longer than `call_timeout`.
        Exception: whatever the model or the agent raised.
    """
    if IS_1X:
        return await _run_1x(
            model, formatter, name, sys_prompt, prompt, tools, max_iters, call_timeout
        )
    run = _line2().run_agent
    return await run(
        model,
        name=name,
        sys_prompt=sys_prompt,
        prompt=prompt,
        tools=tools,
        max_iters=max_iters,
        call_timeout=call_timeout,
    )


async def format_prompt(
    model: ChatModelBase, formatter: FormatterBase | None, *, sys_prompt: str, prompt: str
) -> list[dict[str, Any]]:
    """A system prompt and a user message as `model`'s formatter sends them (for counting)."""
    if IS_1X:
        assert formatter is not None
        return list(
            await formatter.format(
                [Msg1("system", sys_prompt, "system"), Msg1("user", prompt, "user")]
            )
        )
    return await _line2().format_prompt(model, sys_prompt=sys_prompt, prompt=prompt)


def free_choice(tool_choice: Any) -> Any:
    """`tool_choice` unless it forces a call (``"required"``, ``"any"``, a tool's name: then
    `None`, the provider's default, which lets the model answer in text)."""
    mode = getattr(tool_choice, "mode", tool_choice)  # 2.x: a `ToolChoice`
    if mode is None or mode in ("auto", "none"):
        return tool_choice
    return None


async def format_prefixed(
    model: ChatModelBase,
    formatter: FormatterBase | None,
    messages: Sequence[Any],
    instruction: str,
) -> list[dict[str, Any]]:
    """The prefix request as the provider receives it (for counting): `messages` (1.x: the
    formatted messages; 2.x: the messages) with the user message `instruction` after them."""
    if IS_1X:
        assert formatter is not None
        return [*messages, *await formatter.format([Msg1("user", instruction, "user")])]
    return await _line2().format_prefixed(model, messages, instruction)


async def call_prefixed(
    model: ChatModelBase,
    formatter: FormatterBase | None,
    messages: Sequence[Any],
    *,
    tools: list[dict[str, Any]] | None,
    tool_choice: Any,
    instruction: str,
) -> str:
    """Call `model` on `messages` (the agent's last prompt, as it was sent) with the user
    message `instruction` after them, the same `tools`, and `tool_choice` unless it forces a
    call; return the answer's text (empty when it holds none, e.g. only a tool call).

    Raises:
        Exception: whatever the model raised.
    """
    if IS_1X:
        prompt = await format_prefixed(model, formatter, messages, instruction)
        kwargs: dict[str, Any] = {"tools": tools} if tools else {}
        choice = free_choice(tool_choice)
        if tools and choice is not None:
            kwargs["tool_choice"] = choice
        result = await model(prompt, **kwargs)
        if not isinstance(result, ChatResponse):  # a 1.x stream: each chunk holds all so far
            last = None
            async for chunk in result:
                last = chunk
            if last is None:
                return ""
            result = last
        return "".join(str(b.get("text", "")) for b in result.content if b.get("type") == "text")
    return await _line2().call_prefixed(
        model, messages, tools=tools, tool_choice=free_choice(tool_choice), instruction=instruction
    )


class _Line2(Protocol):
    """What `agentscope_ctx._v2._runner` provides."""

    async def run_agent(
        self,
        model: ChatModelBase,
        *,
        name: str,
        sys_prompt: str,
        prompt: str,
        tools: Sequence[AgentTool],
        max_iters: int,
        call_timeout: float | None,
    ) -> str: ...

    async def format_prompt(
        self, model: ChatModelBase, *, sys_prompt: str, prompt: str
    ) -> list[dict[str, Any]]: ...

    async def format_prefixed(
        self, model: ChatModelBase, messages: Sequence[Any], instruction: str
    ) -> list[dict[str, Any]]: ...

    async def call_prefixed(
        self,
        model: ChatModelBase,
        messages: Sequence[Any],
        *,
        tools: list[dict[str, Any]] | None,
        tool_choice: Any,
        instruction: str,
    ) -> str: ...


def _line2() -> _Line2:
    """The 2.x runner, imported by name on first use: the 1.x type check (which excludes
    `_v2/`) does not follow it; the 2.x one checks it with `_v2/*.py`."""
    return cast("_Line2", importlib.import_module("agentscope_ctx._v2._runner"))


if IS_1X:
    from agentscope.agent import ReActAgent
    from agentscope.memory import InMemoryMemory
    from agentscope.message import Msg as Msg1
    from agentscope.message import TextBlock
    from agentscope.model import ChatModelBase as ChatModel1
    from agentscope.model import ChatResponse
    from agentscope.tool import Toolkit
    from agentscope.tool import ToolResponse as ToolText

    def tool_text(func: Callable[P, str]) -> Callable[P, ToolText]:
        """`func` as a 1.x tool function: its text in a `ToolResponse` (name, docstring and
        signature kept, so the `Toolkit` builds the same schema)."""

        @functools.wraps(func)
        def tool(*args: P.args, **kwargs: P.kwargs) -> ToolText:
            return ToolText(content=[TextBlock(type="text", text=func(*args, **kwargs))])

        return tool

    async def _run_1x(
        model: ChatModelBase,
        formatter: FormatterBase | None,
        name: str,
        sys_prompt: str,
        prompt: str,
        tools: Sequence[AgentTool],
        max_iters: int,
        call_timeout: float | None,
    ) -> str:
        assert formatter is not None, "AgentScope 1.x models need their formatter"
        toolkit = Toolkit()
        for tool in tools:
            toolkit.register_tool_function(tool.func)
        agent = ReActAgent(
            name=name,
            sys_prompt=sys_prompt,
            model=model if call_timeout is None else _TimedModel(model, call_timeout),
            formatter=formatter,
            toolkit=toolkit,
            memory=InMemoryMemory(),
            max_iters=max_iters,
        )
        agent.set_console_output_enabled(False)
        # `reply`, not `agent(...)`: `__call__` turns a cancellation (our timeout) into a reply.
        reply = await agent.reply(Msg1("user", prompt, "user"))
        return reply.get_text_content() or ""

    class _TimedModel(ChatModel1):
        """`inner`, with every call abandoned (`TimeoutError`) after `timeout` seconds; for a
        streamed answer, the whole stream counts."""

        def __init__(self, inner: ChatModel1, timeout: float) -> None:
            super().__init__(model_name=inner.model_name, stream=inner.stream)
            self.inner = inner
            self.timeout = timeout

        async def __call__(
            self, *args: Any, **kwargs: Any
        ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
            deadline = asyncio.get_running_loop().time() + self.timeout
            result = await asyncio.wait_for(self.inner(*args, **kwargs), self.timeout)
            if isinstance(result, ChatResponse):
                return result
            return self._stream(result, deadline)

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

else:
    ToolText: TypeAlias = str  # type: ignore[no-redef]

    def tool_text(func: Callable[P, str]) -> Callable[P, ToolText]:
        """`func` as a 2.x tool function: unchanged (a `FunctionTool` turns its `str` into the
        result's text block)."""
        return func  # type: ignore[return-value]  # the 1.x type check sees the 1.x alias
