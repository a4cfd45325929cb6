"""What the installed AgentScope line lends the core: the core imports no AgentScope (DESIGN
§12), yet on 1.x its messages must be AgentScope's own `Msg`, its `TokenCounter` a
`TokenCounterBase`, its `ContextMemory` a `MemoryBase`, and on both lines its helper agents
(Compactor, Summarizer, consolidation) run as agents of the line.

Dependency inversion: a `Host` says all of that; the 1.x adapter builds its own
(`agentscope_ctx.agentscope1._host`), 2.x lends only its runner (`agentscope2._runner`): its
`Msg` is a pydantic model, so the core keeps its plain copy (`_plain_msg`), converted at the
adapter. The edge (`agentscope_ctx/__init__.py`, which runs before any module of the package)
chooses the line and `install`s a loader; the core calls `host()` where it needs the line. The
loader runs on first use and the runner loads on the first helper-agent run, so
`import agentscope_ctx` loads no adapter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentscope.formatter import FormatterBase
    from agentscope.model import ChatModelBase

__all__ = ["AgentRun", "AgentTool", "Host", "PrefixedCall", "Runner", "host", "install"]


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


@dataclass(frozen=True)
class AgentRun:
    """One helper-agent run, as the line's runner gets it (`_runner.run_agent` makes it).

    Attributes:
        name: The agent's name.
        sys_prompt: Its system prompt.
        prompt: The user message.
        tools: Its tools.
        max_iters: Reasoning-acting iterations before a final text answer is asked for.
        call_timeout: Longest wait, in seconds, for one model call; `None`: no limit.
        cache: The prompt-cache marks' plan for each of its model calls (the adapters':
            a `models._cache.CachePlan`, the newest mark moving on with each call, so that
            each call of a run reads the one before it); `None`: none.
    """

    name: str
    sys_prompt: str
    prompt: str
    tools: Sequence[AgentTool] = ()
    max_iters: int = 1
    call_timeout: float | None = None
    cache: Any = None


@dataclass(frozen=True)
class PrefixedCall:
    """The Compactor's prefix request, as the line's runner gets it (`_runner.call_prefixed`
    makes it).

    Attributes:
        messages: The agent's last prompt, as it was sent.
        tools: Its tools' schemas (`None`: none).
        tool_choice: A choice that does not force a call (`_runner.free_choice`).
        instruction: The user message after the prompt.
        cache: What the agent's call applied for the provider's prompt cache (the adapter's:
            the marks' plan and the ``prompt_cache_key``, `LastPrompt.cache`), applied to
            this request too, so that it reads what that call cached; `None` in either
            place: nothing.
    """

    messages: Sequence[Any]
    tools: list[dict[str, Any]] | None
    tool_choice: Any
    instruction: str
    cache: tuple[Any, str | None] = (None, None)


class Runner(Protocol):
    """How the line runs a helper agent (`agentscope1._runner`, `agentscope2._runner`)."""

    async def run_agent(
        self, model: ChatModelBase, formatter: FormatterBase | None, run: AgentRun
    ) -> str:
        """Run a fresh agent of the line on `run.prompt`; its final text (`_runner.run_agent`)."""
        ...

    async def format_prompt(
        self, model: ChatModelBase, formatter: FormatterBase | None, *, sys_prompt: str, prompt: str
    ) -> list[dict[str, Any]]:
        """A system prompt and a user message as `model`'s formatter sends them."""
        ...

    async def format_prefixed(
        self,
        model: ChatModelBase,
        formatter: FormatterBase | None,
        messages: Sequence[Any],
        instruction: str,
    ) -> list[dict[str, Any]]:
        """An agent's prompt as sent and one user message after it, as the provider gets them."""
        ...

    async def call_prefixed(
        self, model: ChatModelBase, formatter: FormatterBase | None, call: PrefixedCall
    ) -> str:
        """Call `model` on an agent's prompt as sent and one user message; the answer's text
        (`_runner.call_prefixed`; `call.tool_choice` already freed)."""
        ...


def _unchanged(func: Callable[..., str]) -> Callable[..., Any]:
    return func


@dataclass(frozen=True)
class Host:
    """One AgentScope line, as the core sees it."""

    runner: Callable[[], Runner]
    """Loads the line's runner (on the first helper-agent run)."""
    message_class: type | None = None
    """The core's message class (`_entry.Msg`): 1.x's `Msg`; `None`: `_plain_msg.PlainMsg`."""
    token_counter_base: type | None = None
    """The base class of `TokenCounter` (1.x's `TokenCounterBase`); `None`: a plain one."""
    memory_base: type | None = None
    """The base class of `ContextMemory` (1.x's `MemoryBase`); `None`: the core's stand-in."""
    needs_formatter: bool = False
    """Whether a model needs its formatter passed along (1.x) or owns one (2.x)."""
    tool_text: Callable[[Callable[..., str]], Callable[..., Any]] = _unchanged
    """Makes a function answering a `str` a tool of the line (1.x: a `ToolResponse`; 2.x: the
    function itself, a `FunctionTool` makes the text block)."""


_loader: Callable[[], Host] | None = None
_host: Host | None = None
_lock = threading.RLock()  # a loader may import modules that ask for the host


def install(loader: Callable[[], Host]) -> None:
    """Set where the host comes from (the edge does, at `import agentscope_ctx`)."""
    global _loader, _host
    with _lock:
        _loader, _host = loader, None


def host() -> Host:
    """The installed line's host, loaded on first use.

    Raises:
        RuntimeError: no loader was installed (`agentscope_ctx/__init__.py` installs one).
    """
    global _host
    if _host is None:
        with _lock:
            if _host is None:
                if _loader is None:
                    raise RuntimeError(
                        "agentscope_ctx.core has no AgentScope line installed; import it "
                        "through the agentscope_ctx package"
                    )
                _host = _loader()
    return _host
