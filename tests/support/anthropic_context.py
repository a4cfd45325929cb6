"""Anthropic's native context management, for the simulator (`tests/support/anthropic_sim.py`):
what the server makes of the messages before the model sees them.

Sources: the context-editing and compaction pages (platform.claude.com/docs/en/build-with-claude/
context-editing and .../compaction, read in their published Markdown), the context-windows page,
the ``claude-api`` skill (``anthropics/skills``) and the SDK's beta types
(``anthropic.types.beta``: ``BetaContextManagementConfigParam``, ``BetaCompactionBlock``,
``BetaContextManagementResponse``, ``BetaIterationsUsage``).

- **Thinking kept** (context windows; context editing, "Thinking block clearing"): with thinking
  off, no thinking block reaches the model. With it on, a model that strips previous turns'
  thinking (Sonnet 4.5, Haiku 4.5) keeps the ongoing turn's only ("keep 1 turn"); Opus 4.5 and
  later keep all. ``clear_thinking_20251015`` (``keep``: ``{"type": "thinking_turns", "value":
  N > 0}`` or ``"all"``, default 1 turn) overrides that; it must be the first edit. Turns count
  back from the ongoing one: the assistant messages since the last user message that is not a
  tool loop's results are turn 1, those before the previous such message turn 2, ...
- **Tool result clearing** (``clear_tool_uses_20250919``, beta ``context-management-2025-06-27``):
  when the prompt exceeds ``trigger`` (default 100,000 input tokens; or a count of tool uses),
  the oldest tool uses are cleared, keeping the last ``keep`` (default 3): each result's content
  becomes a placeholder (`CLEARED`), and with ``clear_tool_inputs`` (true, or a list of tool
  names) the call's input too; ``exclude_tools`` are never cleared; nothing is cleared unless
  at least ``clear_at_least`` tokens go. The response's ``context_management.applied_edits``
  reports each edit applied (``cleared_tool_uses`` / ``cleared_thinking_turns``,
  ``cleared_input_tokens``). The client keeps its full history: the edit is recomputed on each
  request, so the same history gives the same prompt (and its cache).
- **Compaction** (``compact_20260112``, beta ``compact-2026-01-12``): when the prompt reaches
  ``trigger`` (``input_tokens`` only, default 150,000, at least 50,000), the server summarizes
  it (a sampling of its own, reported as a ``compaction`` entry of ``usage.iterations``, not in
  the top-level usage) and answers with a ``compaction`` block first, then continues from the
  summary; ``pause_after_compaction`` answers the block alone with stop reason ``compaction``.
  A compaction block sent back makes the server ignore every block before it (the last such
  block wins; one with ``content: null`` is a no-op); it carries a signature over its content
  (the SDK's ``compaction_signature_invalid`` / ``compaction_content_mismatch``). A compaction
  block needs the compaction edit declared. With the compaction beta, every response carries
  ``usage.iterations``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.anthropic_wire import (
    THINKING,
    Rejected,
    compaction_problem,
    content_of,
    is_tool_results,
    kinds,
)

__all__ = [
    "CLEARED",
    "COMPACT_BETA",
    "CONTEXT_BETA",
    "Edits",
    "after_compaction",
    "clear_tool_uses",
    "compaction_trigger",
    "describe",
    "keep_thinking",
    "parse_edits",
]

CONTEXT_BETA = "context-management-2025-06-27"
COMPACT_BETA = "compact-2026-01-12"
CLEARED = "[tool result cleared to save context]"
"""What a cleared tool result reads (the docs say "placeholder text", not which)."""

_DEFAULT_TRIGGER = {"type": "input_tokens", "value": 100_000}
_DEFAULT_KEEP = {"type": "tool_uses", "value": 3}
_COMPACT_TRIGGER = {"type": "input_tokens", "value": 150_000}
_COMPACT_MINIMUM = 50_000
_BETA_OF = {
    "clear_tool_uses_20250919": CONTEXT_BETA,
    "clear_thinking_20251015": CONTEXT_BETA,
    "compact_20260112": COMPACT_BETA,
}


@dataclass
class Edits:
    """The request's ``context_management.edits``, checked."""

    clear_thinking: dict[str, Any] | None = None
    clear_tool_uses: dict[str, Any] | None = None
    compact: dict[str, Any] | None = None


def _value(spec: Any, where: str, kinds_allowed: tuple[str, ...], minimum: int = 0) -> int:
    if not isinstance(spec, dict) or spec.get("type") not in kinds_allowed:
        allowed = " or ".join(f"'{k}'" for k in kinds_allowed)
        raise Rejected(f"{where}.type: Input should be {allowed}")
    value = spec.get("value")
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise Rejected(f"{where}.value: Input should be greater than or equal to {minimum}")
    return value


def parse_edits(
    body: dict[str, Any], beta: frozenset[str], thinking_on: bool, compacts: bool
) -> Edits:
    """The request's edits, checked against the beta headers, the model and each other.

    Args:
        body: the request.
        beta: its ``anthropic-beta`` values.
        thinking_on: whether it turns thinking on.
        compacts: whether its model supports compaction.
    """
    config = body.get("context_management")
    edits = Edits()
    if config is None:
        return edits
    if not beta & {CONTEXT_BETA, COMPACT_BETA}:
        raise Rejected("context_management: Extra inputs are not permitted")
    items = config.get("edits") if isinstance(config, dict) else None
    if not isinstance(items, list):
        raise Rejected("context_management.edits: Input should be a valid list")
    for n, edit in enumerate(items):
        where = f"context_management.edits.{n}"
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind not in _BETA_OF:
            raise Rejected(
                f"{where}: Input tag '{kind}' found using 'type' does not match any of the "
                "expected tags: 'clear_thinking_20251015', 'clear_tool_uses_20250919', "
                "'compact_20260112'"
            )
        if _BETA_OF[kind] not in beta:
            raise Rejected(f"{where}: `{kind}` requires the `{_BETA_OF[kind]}` beta header")
        field = {"clear_thinking_20251015": "clear_thinking",
                 "clear_tool_uses_20250919": "clear_tool_uses",
                 "compact_20260112": "compact"}[kind]  # fmt: skip
        if getattr(edits, field) is not None:
            raise Rejected(f"{where}: duplicate `{kind}` edit")
        setattr(edits, field, edit)
        if kind == "clear_thinking_20251015":
            if n:
                raise Rejected(
                    f"{where}: the `clear_thinking_20251015` strategy must be listed first in "
                    "the `edits` array"
                )
            if not thinking_on:
                raise Rejected(f"{where}: `clear_thinking_20251015` requires `thinking` enabled")
            keep = edit.get("keep", {"type": "thinking_turns", "value": 1})
            if keep != "all":
                _value(keep, f"{where}.keep", ("thinking_turns",), 1)
        elif kind == "clear_tool_uses_20250919":
            _value(edit.get("trigger", _DEFAULT_TRIGGER), f"{where}.trigger",
                   ("input_tokens", "tool_uses"))  # fmt: skip
            _value(edit.get("keep", _DEFAULT_KEEP), f"{where}.keep", ("tool_uses",))
            if edit.get("clear_at_least") is not None:
                _value(edit["clear_at_least"], f"{where}.clear_at_least", ("input_tokens",))
        else:
            if not compacts:
                raise Rejected(f"{where}: `compact_20260112` is not supported for model "
                               f"{body['model']!r}")  # fmt: skip
            trigger = edit.get("trigger") or _COMPACT_TRIGGER
            _value(trigger, f"{where}.trigger", ("input_tokens",), _COMPACT_MINIMUM)
    return edits


def after_compaction(messages: list[dict[str, Any]], edits: Edits) -> list[dict[str, Any]]:
    """`messages` as the server reads them: every block before the last compaction block (with
    content) dropped; a compaction block with ``content: null`` dropped as a no-op."""
    last = None
    for i, message in enumerate(messages):
        for k, block in enumerate(content_of(message)):
            if block.get("type") != "compaction":
                continue
            where = f"messages.{i}.content.{k}"
            if edits.compact is None:
                raise Rejected(
                    f"{where}: a `compaction` block needs the `compact_20260112` edit in "
                    "`context_management`"
                )
            if block.get("content") is None:
                continue
            problem = compaction_problem(block["content"], block.get("signature"))
            if block.get("signature") is not None and problem is not None:
                raise Rejected(f"{where}: the `compaction` block's `signature` does not verify",
                               code=problem)  # fmt: skip
            last = (i, k)
    out = []
    for i, message in enumerate(messages):
        blocks = content_of(message)
        if last is not None and i < last[0]:
            continue
        if last is not None and i == last[0]:
            blocks = blocks[last[1] :]
        blocks = [
            b for b in blocks if b.get("type") != "compaction" or b.get("content") is not None
        ]
        if blocks:
            out.append({**message, "content": blocks})
    return out


def keep_thinking(
    messages: list[dict[str, Any]], thinking_on: bool, keep: int | str
) -> tuple[list[dict[str, Any]], int]:
    """`messages` with the thinking blocks the model does not see removed, and how many turns
    lost theirs. A turn is the assistant messages after a user message that is not a tool
    loop's results; the ongoing turn is the last one.

    Args:
        messages: the messages.
        thinking_on: whether the request turns thinking on (off: no thinking is kept).
        keep: ``"all"``; ``"ongoing"`` (the ongoing turn's only: the default of a model that
            strips previous turns' thinking); or N, the N latest turns that hold thinking (the
            ``clear_thinking_20251015`` edit's ``thinking_turns``).
    """
    turn, turns = 0, []
    for message in messages:
        if message.get("role") == "user" and not is_tool_results(message):
            turn += 1
        turns.append(turn)
    thinking = sorted(
        {
            t
            for m, t in zip(messages, turns, strict=True)
            if m.get("role") == "assistant" and any(k in THINKING for k in kinds(m))
        }
    )
    if not thinking_on:
        kept: set[int] = set()
    elif keep == "all":
        kept = set(thinking)
    elif keep == "ongoing":
        kept = {turns[-1]}
    else:
        kept = set(thinking[-int(keep) :])
    out = []
    for message, t in zip(messages, turns, strict=True):
        if message.get("role") == "assistant" and t not in kept:
            blocks = [b for b in content_of(message) if b.get("type") not in THINKING]
            if blocks:
                out.append({**message, "content": blocks})
        else:
            out.append(message)
    return out, len(set(thinking) - kept)


def clear_tool_uses(
    edit: dict[str, Any],
    messages: list[dict[str, Any]],
    measure: Callable[[list[dict[str, Any]]], int],
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """`messages` after a ``clear_tool_uses_20250919`` edit, and the edit as applied (`None`
    when it was not).

    Args:
        edit: the edit.
        messages: the messages.
        measure: the prompt's input tokens with some messages.
    """
    trigger = edit.get("trigger", _DEFAULT_TRIGGER)
    keep = edit.get("keep", _DEFAULT_KEEP)["value"]
    excluded = set(edit.get("exclude_tools") or [])
    inputs = edit.get("clear_tool_inputs", False)
    uses = [
        block
        for message in messages
        if message.get("role") == "assistant"
        for block in content_of(message)
        if block.get("type") == "tool_use"
    ]
    before = measure(messages)
    reached = before if trigger["type"] == "input_tokens" else len(uses)
    if reached <= trigger["value"]:
        return messages, None
    older = uses[: max(len(uses) - keep, 0)]
    cleared = {b.get("id"): b for b in older if b.get("name") not in excluded}
    if not cleared:
        return messages, None
    out = []
    for message in messages:
        blocks = []
        for block in content_of(message):
            kind, ids = block.get("type"), cleared
            if kind == "tool_result" and block.get("tool_use_id") in ids:
                block = {**block, "content": CLEARED}
            elif kind == "tool_use" and block.get("id") in ids:
                name = block.get("name")
                if inputs is True or (isinstance(inputs, list) and name in inputs):
                    block = {**block, "input": {}}
            blocks.append(block)
        out.append({**message, "content": blocks})
    gone = before - measure(out)
    least = edit.get("clear_at_least")
    if least is not None and gone < least["value"]:
        return messages, None
    applied = {
        "type": "clear_tool_uses_20250919",
        "cleared_tool_uses": len(cleared),
        "cleared_input_tokens": gone,
    }
    return out, applied


def compaction_trigger(edits: Edits) -> int | None:
    """The prompt size at which the request compacts (`None`: it does not)."""
    if edits.compact is None:
        return None
    return int((edits.compact.get("trigger") or _COMPACT_TRIGGER)["value"])


def describe(messages: list[dict[str, Any]]) -> str:
    """A deterministic stand-in summary of `messages` (the simulator's default summarizer)."""
    users = [m for m in messages if m.get("role") == "user" and not is_tool_results(m)]
    last = " ".join(b.get("text", "") for b in content_of(users[-1]) if b.get("type") == "text")
    calls = sum(kinds(m).count("tool_use") for m in messages)
    return (
        f"<summary>{len(messages)} messages, {calls} tool calls. The latest request: "
        f"{last[:300]}</summary>"
        if users
        else f"<summary>{len(messages)} messages, {calls} tool calls.</summary>"
    )
