"""The runner seam: how our helper agents (Compactor, Summarizer, consolidation) run, on both
AgentScope lines.

Callers see one line-neutral API; the AgentScope calls behind it differ by line, and the
line's adapter lends them to the core (`_host`: the core imports no AgentScope):

- `run_agent` asks a fresh agent (empty memory, console output off) one question and returns
  its final text. On 1.x it is a `ReActAgent` with an `InMemoryMemory` and a `Toolkit` holding
  `tools` (`agentscope_ctx.agentscope1._runner`); on 2.x an `agentscope.agent.Agent`
  (`agentscope_ctx.agentscope2._runner`): no runtime-state injection, built-in context
  compression off (the caller sizes its own prompt), every tool allowed without asking the
  user.
  Its defaults (no tools, one iteration) are the Compactor's and consolidation's case.
- No structured output and no `response_format`, on either line: a helper agent answers in
  plain text, and its caller validates that text (the Compactor: `validate_summary`, one
  retry, the extractive fallback). A tool-less run sends no `tools` and no `tool_choice`, so
  providers that reject those (or `response_format`) serve it as well.
- `tool_text` makes a tool function whose result is its text a tool of the installed line:
  on 1.x it wraps the text in a 1.x `ToolResponse` (what a 1.x `Toolkit` requires); on 2.x it
  returns the function unchanged (a 2.x `FunctionTool` turns a `str` into the result's text
  block; see `agentscope_ctx.agentscope2._tools.function_tool`).
- The model's formatter: a 1.x model needs one passed along (`formatter`); a 2.x model owns
  its own (`model.formatter`), and the `formatter` argument is ignored there (`None` is fine).
- `call_prefixed` is the one call made without an agent: the Compactor's prefix request
  (`compactor.request: prefix`), which must start with the agent's last prompt byte for byte
  (so that a provider's prompt cache serves it), and an agent would format it anew. It sends
  the agent's last prompt as the agent sent it (1.x: the formatted messages; 2.x: the same
  messages, which the model's formatter turns into the same bytes), the same tools, and a
  `tool_choice` that does not force a call (`free_choice`), then one user message; it returns
  the text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeAlias, cast

from ..telemetry import helper_span
from ._host import AgentRun, AgentTool, PrefixedCall, host

if TYPE_CHECKING:
    from agentscope.formatter import FormatterBase
    from agentscope.model import ChatModelBase

__all__ = [
    "AgentTool",
    "call_prefixed",
    "format_prefixed",
    "format_prompt",
    "free_choice",
    "has_model",
    "run_agent",
    "tool_text",
]

P = ParamSpec("P")


def has_model(model: ChatModelBase | None, formatter: FormatterBase | None) -> bool:
    """Whether a helper agent can run: a model, and on 1.x its formatter (a 2.x model owns
    its formatter, so `formatter` may be `None` there)."""
    return model is not None and (formatter is not None or not host().needs_formatter)


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
    cache: Any = None,
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
        cache: The prompt-cache marks of its calls (`AgentRun.cache`); `None`: none.

    Raises:
        TimeoutError: a model call took longer than `call_timeout`.
        Exception: whatever the model or the agent raised.
    """
    with helper_span(name, model_label(model)):  # its model calls, as one GenAI span
        return (
            await host()
            .runner()
            .run_agent(
                model,
                formatter,
                AgentRun(name, sys_prompt, prompt, tuple(tools), max_iters, call_timeout, cache),
            )
        )


def model_label(model: Any) -> str:
    """The model's name (1.x `model_name`, 2.x `model`), for spans."""
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or "model")


async def format_prompt(
    model: ChatModelBase, formatter: FormatterBase | None, *, sys_prompt: str, prompt: str
) -> list[dict[str, Any]]:
    """A system prompt and a user message as `model`'s formatter sends them (for counting)."""
    runner = host().runner()
    return await runner.format_prompt(model, formatter, sys_prompt=sys_prompt, prompt=prompt)


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
    return await host().runner().format_prefixed(model, formatter, messages, instruction)


async def call_prefixed(
    model: ChatModelBase,
    formatter: FormatterBase | None,
    messages: Sequence[Any],
    *,
    tools: list[dict[str, Any]] | None,
    tool_choice: Any,
    instruction: str,
    cache: tuple[Any, str | None] = (None, None),
) -> str:
    """Call `model` on `messages` (the agent's last prompt, as it was sent) with the user
    message `instruction` after them, the same `tools`, and `tool_choice` unless it forces a
    call (`free_choice`), under the prompt cache's treatment of the agent's call (`cache`,
    `PrefixedCall.cache`); return the answer's text (empty when it holds none, e.g. only a
    tool call).

    Raises:
        TimeoutError: the call was interrupted (2.x answers a cancelled call so).
        Exception: whatever the model raised.
    """
    with helper_span("compactor", model_label(model)):  # only the Compactor asks so
        return (
            await host()
            .runner()
            .call_prefixed(
                model,
                formatter,
                PrefixedCall(messages, tools, free_choice(tool_choice), instruction, cache),
            )
        )


if TYPE_CHECKING:  # each line's type check sees its own (mypy --always-true/false IS_1X)
    from .._line import IS_1X

    if IS_1X:
        from agentscope.tool import ToolResponse as ToolText
    else:
        ToolText: TypeAlias = str


def tool_text(func: Callable[P, str]) -> Callable[P, ToolText]:
    """`func` as a tool function of the installed line, answering its text: a 1.x
    `ToolResponse` on 1.x, the `str` itself on 2.x (a `FunctionTool` makes the result's text
    block); name, docstring and signature kept, so the toolkit builds the same schema."""
    return cast("Callable[P, ToolText]", host().tool_text(func))
