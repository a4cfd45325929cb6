"""Scripted chat models for tests and offline runs: no provider, no network, no API key.

`ScriptedChatModel` is a real `ChatModelBase` of the installed AgentScope line (a 2.x one for
an `Agent`, a 1.x one for a `ReActAgent`) that answers from a queue, in order, and records
every prompt it receives, as LangChain's `FakeListChatModel` does::

    from agentscope_ctx.testing import ScriptedChatModel, ToolCall

    model = ScriptedChatModel([
        ToolCall("run_shell", {"command": "grep -rn TODO ."}),  # first call: a tool call
        "notes.txt has one TODO.",                              # second: the answer
    ])
    ...                                   # an agent (and a ContextManager) on `model`
    model.prompts[1]                      # the second prompt, as a provider gets it

A queue item is a text, a `ToolCall`, an exception (raised, as a provider's error), a
`ChatResponse` of the installed line, or a function of the prompt returning one of those;
`enqueue` adds more; once the queue is empty, `default` answers (``"Done."``). With
``stream=True`` it answers as a streaming provider does. A context compactor's request (the
`ContextManager`'s summary of older messages) is answered with `write_summary`'s summary of
the transcript it was sent, which passes the compactor's checks: the same model can be the
agent's and the manager's, and a compaction is a model compaction. `calls` holds each call
(prompt, tool schemas, tool choice, whether it was a summary).

`import agentscope_ctx` does not import this module; importing it loads no AgentScope model
code until `ScriptedChatModel` is used.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from ._answers import Answer, Prompt, ScriptedCall, ToolCall
from ._summary import NOT_A_SUMMARY, is_compactor_prompt, write_summary

if _typing.TYPE_CHECKING:
    from ._model import ScriptedChatModel

__all__ = [
    "NOT_A_SUMMARY",
    "Answer",
    "Prompt",
    "ScriptedCall",
    "ScriptedChatModel",
    "ToolCall",
    "is_compactor_prompt",
    "write_summary",
]

if not _typing.TYPE_CHECKING:  # hidden from type checkers: a typo must stay an error there

    def __getattr__(name: str) -> object:
        if name == "ScriptedChatModel":  # the line's model: AgentScope's model code on first use
            value = _importlib.import_module("._model", __name__).ScriptedChatModel
            globals()[name] = value
            return value
        raise AttributeError(f"module 'agentscope_ctx.testing' has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__))
