"""What a scripted model answers, and what it records: the line-free part of
`agentscope_ctx.testing.ScriptedChatModel` (the queue, the tool call, the record of a call),
the same on both AgentScope lines. Loads no AgentScope module.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = ["Answer", "AnswerQueue", "Prompt", "ScriptedCall", "ToolCall"]

Prompt: TypeAlias = "list[dict[str, Any]]"
"""A formatted prompt, as an OpenAI-compatible provider receives it (chat messages)."""


@dataclass(frozen=True)
class ToolCall:
    """An answer that calls one tool, the same on both AgentScope lines.

    Example: ``ToolCall("run_shell", {"command": "grep -rn TODO ."})``.
    """

    name: str
    """The tool's name, as its schema gives it."""
    arguments: dict[str, object] = field(default_factory=dict)
    """The call's arguments (JSON values)."""
    id: str | None = None
    """The call's id; `None`: ``call_NNN``, NNN the model call's number (from 1)."""
    text: str = ""
    """What the model says before the call (its reasoning), if anything."""


Answer: TypeAlias = "str | ToolCall | BaseException | object | Callable[[Prompt], object]"
"""One item of a scripted model's queue: a text (ends a reply), a `ToolCall`, an exception
(raised, as a provider's error), a `ChatResponse` of the installed line (sent as it is), or a
function of the formatted prompt returning one of those (or a coroutine that does)."""


@dataclass(frozen=True)
class ScriptedCall:
    """One call a scripted model received."""

    messages: list[dict[str, Any]]
    """The prompt, formatted as an OpenAI-compatible provider receives it."""
    tools: list[dict[str, Any]] | None
    """The tool schemas sent with it (`None`: none)."""
    tool_choice: str | None
    """The tool choice asked for, if any."""
    summary: bool
    """A context compactor's request, answered with `write_summary` (not from the queue)."""


class AnswerQueue:
    """The queue of a scripted model: answers given in order; when it is empty, `default`
    answers every call (`None`: an `AssertionError` says the script ran out)."""

    def __init__(self, answers: Iterable[Answer], default: Answer | None) -> None:
        self.answers: list[Answer] = list(answers)
        """What is still to be answered, in order."""
        self.default = default

    def enqueue(self, *answers: Answer) -> None:
        """Add `answers` at the end of the queue."""
        self.answers.extend(answers)

    async def next(self, prompt: Prompt) -> object:
        """The next answer for `prompt`: a function called, an exception raised, else as
        given (a text, a `ToolCall`, a `ChatResponse`)."""
        if self.answers:
            item = self.answers.pop(0)
        elif self.default is not None:
            item = self.default
        else:
            raise AssertionError("ScriptedChatModel: no answer left in the queue, and no default")
        if callable(item) and not isinstance(item, type):
            item = item(prompt)
            if inspect.isawaitable(item):
                item = await _awaited(item)
        if isinstance(item, BaseException):
            raise item
        return item


async def _awaited(item: Awaitable[object]) -> object:
    return await item
