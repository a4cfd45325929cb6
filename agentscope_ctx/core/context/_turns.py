"""The current turn and the units of the conversation, as compaction sees them (DESIGN.md
§13): which user message is the current turn (`current_turn`), which tool calls after it
still wait for their results and stay with it (`waiting`, `turn_ids`), and where the older
messages can be split off without parting a tool call from its result (`split_point`).

A thinking model's tool loop stays valid (DESIGN.md §18): the first assistant message after
the current user turn, when it opens with a ``thinking`` (or ``redacted_thinking``) block,
stays with the turn with the results of its calls (`_thinking_head`). Anthropic refuses a
tool loop whose first assistant message lost the signed thinking block the API issued for it
("a final assistant message must start with a thinking block"); the loop's later steps may
still leave for the summary, which the API accepts. In a session whose model thinks, the
newest hint stays too (AgentScope 2.x's runtime state, the time above all): AgentScope
injects it again when none is left in the context, and a hint injected mid-loop is a user
text between the tool results, which opens a new turn for the provider, one that does not
start with thinking. A compaction at a turn's first step, before the loop has a head, would
take it as well: the hint stays whenever the model thinks, not only inside a loop.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._entry import Msg

__all__ = ["HINT_MARK", "THINKING_KINDS", "current_turn", "split_point", "turn_ids", "waiting"]

HINT_MARK = "hint"
"""The mark of a hint message (AgentScope 1.x's `_MemoryMark.HINT`; the 2.x adapter marks its
hint entries so): not a user turn."""

THINKING_KINDS = ("thinking", "redacted_thinking")
"""Block types of a model's reasoning that a provider signs (1.x keeps a redacted block as
``redacted_thinking``; 2.x as ``thinking`` with ``redacted_thinking_data``)."""


def current_turn(content: Sequence[tuple[Msg, Sequence[str]]]) -> str | None:
    """Id of the current user turn: the newest message with role ``"user"`` that holds no
    tool result and is not marked as a hint (`None` when there is none)."""
    at = _turn_index(content)
    return None if at is None else str(content[at][0].id)


def _turn_index(content: Sequence[tuple[Msg, Sequence[str]]]) -> int | None:
    """Where the current user turn is in `content` (see `current_turn`)."""
    for at in range(len(content) - 1, -1, -1):
        msg, marks = content[at]
        if msg.role != "user" or HINT_MARK in marks:
            continue
        content_ = msg.content
        blocks = content_ if isinstance(content_, list) else []
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            continue
        return at
    return None


def turn_ids(content: Sequence[tuple[Msg, Sequence[str]]]) -> set[str]:
    """Ids of what never leaves the prompt as the current turn: the current user turn
    (`current_turn`), the messages after it that hold a call still waiting (`waiting`), the
    first step of a thinking tool loop (`_thinking_head`) and the newest hint (see the
    module)."""
    at = _turn_index(content)
    ids = _waiting_after(content, at)
    if at is None:
        return ids
    head = _thinking_head(content, at)
    if _thinks(content):  # the newest hint stays too (see the module)
        hint = next((str(m.id) for m, marks in reversed(content) if HINT_MARK in marks), None)
        head |= set() if hint is None else {hint}
    return ids | {str(content[at][0].id)} | head


def _thinks(content: Sequence[tuple[Msg, Sequence[str]]]) -> bool:
    """Whether the model thinks in this session: an assistant message opens with thinking."""
    for msg, _ in content:
        if msg.role == "assistant":
            blocks = msg.get_content_blocks()
            if blocks and blocks[0].get("type") in THINKING_KINDS:
                return True
    return False


def _thinking_head(content: Sequence[tuple[Msg, Sequence[str]]], turn: int) -> set[str]:
    """Ids of the current tool loop's first step when it opens with a thinking block: that
    assistant message, the hints before it and the messages holding its calls' results (see
    the module)."""
    at = next((i for i in range(turn + 1, len(content)) if content[i][0].role == "assistant"), None)
    if at is None:
        return set()
    head = content[at][0]
    blocks = head.get_content_blocks()
    if not blocks or blocks[0].get("type") not in THINKING_KINDS:
        return set()
    calls = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
    # with the hints before it (AgentScope 2.x's runtime state: one that left would be
    # injected again mid-loop, a user text that opens a new turn for the provider)
    return {str(m.id) for m, _ in content[turn + 1 : at + 1]} | {
        str(m.id)
        for m, _ in content[turn + 1 :]
        if any(
            b.get("type") == "tool_result" and str(b.get("id")) in calls
            for b in m.get_content_blocks()
        )
    }


def waiting(content: Sequence[tuple[Msg, Sequence[str]]]) -> set[str]:
    """Ids of the messages after the current user turn holding a tool call whose result is
    not in memory yet: a call running (1.x runs the pipeline after each tool of a step), or
    awaiting a confirmation or an external result. An older unanswered call, left by an
    interrupted reply, is not waited for. With no user turn in memory, only the newest
    message holding a tool call (the step running) can wait. No prompt is sent while a call
    waits: the model is called once the results are in. The results of the other calls of
    those messages come with them (a call never apart from its result)."""
    return _waiting_after(content, _turn_index(content))


def _waiting_after(content: Sequence[tuple[Msg, Sequence[str]]], turn: int | None) -> set[str]:
    """`waiting`, the current user turn being at `turn` in `content`."""
    if turn is not None:
        start = turn + 1
    else:
        steps = [i for i, (m, _) in enumerate(content) if m.get_content_blocks("tool_use")]
        start = steps[-1] if steps else len(content)
    blocks = [(msg, b) for msg, _ in content[start:] for b in msg.get_content_blocks()]
    answered = {str(b.get("id")) for _, b in blocks if b.get("type") == "tool_result"}
    ids = {
        str(msg.id)
        for msg, b in blocks
        if b.get("type") == "tool_use" and str(b.get("id")) not in answered
    }
    # the results of the other calls of those messages stay with them (one unit)
    calls = {
        str(b.get("id")) for msg, b in blocks if str(msg.id) in ids and b.get("type") == "tool_use"
    }
    ids.update(
        str(msg.id)
        for msg, b in blocks
        if b.get("type") == "tool_result" and str(b.get("id")) in calls
    )
    return ids


def split_point(msgs: Sequence[Msg], counts: Sequence[int], keep_tokens: int) -> int:
    """Index that splits `msgs` into older (`[:i]`) and kept (`[i:]`) parts.

    The kept part is the longest suffix worth at most `keep_tokens` that never holds a
    tool_result whose tool_use is in the older part; at least the last such unit is kept.
    Returns 0 when no valid split exists (everything is one unit).
    """
    pending: set[str] = set()  # tool results in the kept part whose tool_use is not yet seen
    kept = 0
    best = 0
    for i in range(len(msgs) - 1, -1, -1):
        for block in msgs[i].get_content_blocks():
            if block.get("type") == "tool_result":
                pending.add(str(block.get("id")))
            elif block.get("type") == "tool_use":
                pending.discard(str(block.get("id")))
        kept += counts[i]
        if pending or i == 0:
            continue
        if kept > keep_tokens and best:
            break
        best = i
    return best
