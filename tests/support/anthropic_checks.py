"""What Anthropic's Messages API refuses, for the simulator (`tests/support/anthropic_sim.py`):
rule 1 (the request's shape, the tool loop's pairing) and rule 2 (extended thinking). Each check
raises a `Rejected` with the API's message (as quoted in public issue threads), or one close to
it where the exact text is not published.
"""

from __future__ import annotations

import hmac
from typing import Any

from tests.support.anthropic_wire import (
    DOCS,
    FORCED,
    THINKING,
    Rejected,
    content_of,
    is_tool_results,
    issued_redacted,
    kinds,
    sign,
    thinking_mode,
    turn_start,
)

__all__ = [
    "check_conversation",
    "check_shape",
    "check_thinking",
    "check_thinking_blocks",
]


def check_shape(body: dict[str, Any]) -> None:
    """Rule 1: the fields, the roles and the blocks of the request as sent."""
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            raise Rejected(f"{name}: Field required")
    if not isinstance(body["model"], str) or not body["model"]:
        raise Rejected("model: Input should be a valid string")
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
        raise Rejected("max_tokens: Input should be greater than or equal to 1")
    if max_tokens == 0:  # the documented cache pre-warm
        forced = (body.get("tool_choice") or {}).get("type") in FORCED
        if body.get("stream") or thinking_mode(body) == "enabled" or forced:
            raise Rejected(
                "max_tokens: 0 (a cache pre-warm) cannot be combined with `stream`, "
                "`thinking` or a forced `tool_choice`"
            )
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise Rejected("messages: List should have at least 1 item after validation, not 0")
    names = [tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)]
    if len(names) != len(set(names)):
        raise Rejected("tools: Tool names must be unique.")
    system = body.get("system")
    if isinstance(system, list):
        for block in system:
            if block.get("type") == "text" and not block.get("text"):
                raise Rejected("system: text content blocks must be non-empty")
            if block.get("type") == "compaction":
                raise Rejected(
                    "system: a `compaction` block cannot be in the system prompt",
                    code="compaction_block_misplaced",
                )
    for i, message in enumerate(messages):
        _check_message(i, message, last=i == len(messages) - 1)


def _check_message(i: int, message: Any, last: bool) -> None:
    role = message.get("role") if isinstance(message, dict) else None
    if role not in ("user", "assistant"):
        raise Rejected(f"messages.{i}.role: Input should be 'user' or 'assistant'")
    content = message.get("content")
    if not isinstance(content, (str, list)):
        raise Rejected(f"messages.{i}.content: Input should be a valid list")
    if not content and not (last and role == "assistant"):
        raise Rejected(
            f"messages.{i}: all messages must have non-empty content except for the "
            "optional final assistant message"
        )
    for k, block in enumerate(content_of(message)):
        kind = block.get("type")
        where = f"messages.{i}.content.{k}"
        if kind in THINKING and "cache_control" in block:
            raise Rejected(f"{where}.{kind}.cache_control: Extra inputs are not permitted")
        if kind == "text" and not block.get("text"):
            raise Rejected("messages: text content blocks must be non-empty")
        if kind == "tool_result" and isinstance(block.get("content"), list):
            for sub in block["content"]:
                if sub.get("type") == "text" and not sub.get("text"):
                    raise Rejected("messages: text content blocks must be non-empty")
        if kind == "compaction":
            if role != "assistant":
                raise Rejected(
                    f"{where}: a `compaction` block can only be in an `assistant` message",
                    code="compaction_block_misplaced",
                )
            if block.get("content") == "":
                raise Rejected(f"{where}.content: a `compaction` block's content must be non-empty")
        if role == "user" and kind in (*THINKING, "tool_use"):
            raise Rejected(f"{where}: `{kind}` blocks can only be in `assistant` messages")
        if role == "assistant" and kind == "tool_result":
            raise Rejected(f"{where}: `tool_result` blocks can only be in `user` messages")


def check_conversation(messages: list[dict[str, Any]]) -> None:
    """Rule 1, on the messages the model will see (after a compaction block): the first is the
    user's (or opens with the compaction block), each ``tool_use`` is answered first thing in
    the next message, each ``tool_result`` answers the previous one, and no id repeats."""
    if messages[0]["role"] != "user" and kinds(messages[0])[:1] != ["compaction"]:
        raise Rejected('messages: first message must use the "user" role')
    seen: set[str] = set()
    for i, message in enumerate(messages):
        blocks = content_of(message)
        if message["role"] == "user":
            previous = content_of(messages[i - 1]) if i else []
            asked = {b.get("id") for b in previous if b.get("type") == "tool_use"}
            for k, block in enumerate(blocks):
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in asked:
                    raise Rejected(
                        f"messages.{i}.content.{k}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                        "block must have a corresponding `tool_use` block in the previous "
                        "message."
                    )
            continue
        ids = []
        for k, block in enumerate(blocks):
            if block.get("type") == "tool_use":
                if block.get("id") in seen:
                    raise Rejected(f"messages.{i}.content.{k}: `tool_use` ids must be unique")
                seen.add(block.get("id"))
                ids.append(block.get("id"))
        if ids and i + 1 < len(messages):
            _check_answered(i, ids, content_of(messages[i + 1]))


def _check_answered(i: int, ids: list[Any], after: list[dict[str, Any]]) -> None:
    answered = {b.get("tool_use_id") for b in after if b.get("type") == "tool_result"}
    missing = [str(t) for t in ids if t not in answered]
    if missing:
        raise Rejected(
            f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
            f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
            "a corresponding `tool_result` block in the next message."
        )
    if [b.get("type") for b in after[: len(ids)]] != ["tool_result"] * len(ids):
        raise Rejected(
            f"messages.{i + 1}: Did not find {len(ids)} `tool_result` block(s) at the "
            "beginning of this message. Messages following `tool_use` blocks must begin "
            "with a matching number of `tool_result` blocks."
        )


def check_thinking(body: dict[str, Any], beta: frozenset[str]) -> None:
    """Rule 2, the request's parameters: the thinking config and what goes with it."""
    thinking = body.get("thinking")
    if thinking is None:
        return
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in ("enabled", "adaptive", "disabled"):
        raise Rejected(
            f"thinking: Input tag '{kind}' found using 'type' does not match any of the "
            "expected tags: 'adaptive', 'disabled', 'enabled'"
        )
    if "display" in thinking:
        if kind == "disabled":
            raise Rejected("thinking.disabled.display: Extra inputs are not permitted")
        if thinking["display"] not in ("summarized", "omitted"):
            raise Rejected(f"thinking.{kind}.display: Input should be 'summarized' or 'omitted'")
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if budget is None:
            raise Rejected("thinking.enabled.budget_tokens: Field required")
        if not isinstance(budget, int) or budget < 1024:
            raise Rejected(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
            )
        if budget >= body["max_tokens"] and "interleaved-thinking-2025-05-14" not in beta:
            raise Rejected(
                "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                f"documentation at {DOCS}#max-tokens-and-context-window-size"
            )
    if kind == "disabled":
        return
    if (body.get("tool_choice") or {}).get("type") in FORCED:
        raise Rejected("Thinking may not be enabled when tool_choice forces tool use.")
    if body.get("temperature", 1) != 1:
        raise Rejected(
            "`temperature` may only be set to 1 when thinking is enabled. Please consult our "
            f"documentation at {DOCS}#feature-compatibility"
        )


def check_thinking_blocks(
    messages: list[dict[str, Any]], thinking_on: bool, plain: set[str]
) -> None:
    """Rule 2, the messages the model will see: signatures, and a thinking block first in the
    tool loop.

    Args:
        messages: the messages (after a compaction block).
        thinking_on: whether the request turns thinking on.
        plain: the ids of the tool calls the simulator answered without a thinking block.
    """
    last = messages[-1]
    if not thinking_on:
        if last["role"] == "assistant" and any(t in THINKING for t in kinds(last)):
            raise Rejected(
                f"messages.{len(messages) - 1}.content.0: When thinking is disabled, an "
                "`assistant` message in the final position cannot contain `thinking`. To use "
                "thinking blocks, enable `thinking` in your request."
            )
        return
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            _check_signatures(i, message)
    if not is_tool_results(last) or len(messages) < 2:
        return
    answering = len(messages) - 2
    first = next(
        (
            i
            for i in range(turn_start(messages), len(messages))
            if messages[i]["role"] == "assistant"
        ),
        answering,
    )
    calls = {b.get("id") for b in content_of(messages[answering]) if b.get("type") == "tool_use"}
    must = [first]
    if answering != first and not (calls and calls <= plain):
        must.append(answering)
    for i in must:
        opening = [t for t in kinds(messages[i]) if t != "compaction"]
        found = opening[0] if opening else "nothing"
        if found not in THINKING:
            raise Rejected(
                f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
                f"found `{found}`. When `thinking` is enabled, a final `assistant` message must "
                "start with a thinking block (preceeding the lastmost set of `tool_use` and "
                "`tool_result` blocks). We recommend you include thinking blocks from previous "
                "turns. To avoid this requirement, disable `thinking`. Please consult our "
                f"documentation at {DOCS}"
            )


def _check_signatures(i: int, message: dict[str, Any]) -> None:
    for k, block in enumerate(content_of(message)):
        if block.get("type") == "thinking":
            signature = block.get("signature")
            text = str(block.get("thinking", ""))
            if not signature or not hmac.compare_digest(str(signature), sign(text)):
                raise Rejected(f"messages.{i}.content.{k}: Invalid `signature` in `thinking` block")
        elif block.get("type") == "redacted_thinking" and not issued_redacted(block.get("data")):
            raise Rejected(f"messages.{i}.content.{k}: Invalid `data` in `redacted_thinking` block")
