"""Tool calls another worker left without their results.

With a memory shared by several workers (1.x `RedisMemory`, `AsyncSQLAlchemyMemory`), every
message is written through as it enters the context. A worker killed between its model's
tool call and the tool's result leaves a `tool_use` that nothing answers; the next worker's
prompt would carry it, and a provider rejects a tool call without its result (OpenAI: "An
assistant message with 'tool_calls' must be followed by tool messages"). At the start of a
reply, before any call of its own can be pending, the manager moves such calls out of the
context into `dialog/` (saved first, so nothing is lost and `search_history` finds them),
with the results the same message's other calls got, so that no result is left without its
call either.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._entry import Msg

__all__ = ["unanswered"]


def unanswered(msgs: Sequence[Msg]) -> list[str]:
    """Ids of the messages to move out of `msgs`, in order: each message holding a
    `tool_use` that no `tool_result` of `msgs` answers, and the messages holding results of
    that message's other calls."""
    answered = {
        str(block.get("id")) for msg in msgs for block in msg.get_content_blocks("tool_result")
    }
    open_calls: set[str] = set()
    for msg in msgs:
        calls = {str(block.get("id")) for block in msg.get_content_blocks("tool_use")}
        if calls - answered:
            open_calls |= calls
    if not open_calls:
        return []
    return [
        str(msg.id)
        for msg in msgs
        if any(str(b.get("id")) in open_calls for b in msg.get_content_blocks("tool_use"))
        or any(str(b.get("id")) in open_calls for b in msg.get_content_blocks("tool_result"))
    ]
