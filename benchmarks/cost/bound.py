"""The append-only bound of the cost benchmarks (issue 45), defined once.

An append-only prompt of the same sizes: each call reads from the cache all of the previous
prompt that it can, and writes what the session added since (the model's last answer, the
new tool outputs or user message), which no cache holds yet. So a call's bound read is
``min(previous prompt, prompt - added)``. Until 2026-12-07 it was ``min(previous, prompt)``:
a call whose prompt did not grow by what it added (the run masked or compacted) was counted
as reading its own new messages from the cache, which no run can do.

What a call added is found from the requests (`added`): the model's last answer and what
followed it, at the end of the prompt. Used by `providers` (the table), `calls` (the
per-call diagnostic) and `meter` (the scripted cost benchmark).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any

__all__ = ["added", "added_tokens", "bound_read", "messages_of", "pieces", "plain", "reads"]

_ID_RE = re.compile(r'"(?:id|tool_call_id|tool_use_id)": "([^"]+)"')


def bound_read(previous: int, prompt: int, added_tokens: int) -> int:
    """Tokens an append-only prompt of `prompt` tokens reads after one of `previous`
    tokens, `added_tokens` of it new since then."""
    return max(min(previous, prompt - added_tokens), 0)


def added(before: Sequence[str], now: Sequence[str]) -> int:
    """How many of the last pieces of `now` (serialised messages) the session added since
    `before`: the model's answer to the previous call (the last assistant message) and what
    followed it (tool outputs, a user message). Fewer when one of them is in `before` or
    holds one of its tool call ids (a rewrite of an older message: masked, cut). A summary
    or any other rewrite before the answer is not added: an append-only prompt would not
    hold it, and the bound reads all it can of the previous prompt in its place. None when
    no answer follows what `before` held (AgentScope's own compression folds it into its
    summary): the bound then stays ``min(previous, prompt)``, an upper bound still."""
    if not before:
        return len(now)
    seen = set(before)
    ids = {i for piece in before for i in _ID_RE.findall(piece)}
    n = 0
    for piece in reversed(now):
        if piece in seen or ids.intersection(_ID_RE.findall(piece)):
            break
        n += 1
        if _role(piece) == "assistant":
            return n
    return 0  # no answer of the model's: another system folded it away; nothing counted


def _role(piece: str) -> object:
    try:
        value = json.loads(piece)
    except ValueError:
        return None
    return value.get("role") if isinstance(value, dict) else None


def plain(value: Any) -> Any:
    """`value` without its ``cache_control`` marks (what a cache hashes)."""
    if isinstance(value, dict):
        content = value.get("content")
        if (
            isinstance(content, list)
            and len(content) == 1
            and isinstance(content[0], dict)
            and content[0].get("type") == "text"
        ):  # one text part: a string content a mark made a list (chat), or one that was
            value = {**value, "content": content[0].get("text")}
        return {k: plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def messages_of(body: dict[str, Any]) -> list[Any]:
    """The request's prompt as a list: the system prompt (Anthropic's ``system``) first."""
    system = body.get("system")
    return ([{"role": "system", "content": system}] if system else []) + list(body["messages"])


def pieces(body: dict[str, Any]) -> list[str]:
    """A request as its pieces: the tool schemas, then each message, without cache marks."""
    return [
        _dumps(plain(body.get("tools") or [])),
        *[_dumps(plain(m)) for m in messages_of(body)],
    ]


def _dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def added_tokens(bodies: Sequence[dict[str, Any] | None], prompts: Sequence[int]) -> list[int]:
    """What each of a session's calls added since the one before (`added`), in the provider's
    prompt tokens (`prompts`) pro rata of its pieces' tiktoken sizes; a request not known
    (`None`) counts as adding nothing."""
    from tests.support.chat_sim import encode

    out, before = [], list[str]()
    for body, prompt in zip(bodies, prompts, strict=True):
        now = pieces(body) if body is not None else []
        n = added(before, now) if body is not None else 0
        sizes = [len(encode(p)) for p in now]
        out.append(round(prompt * sum(sizes[len(now) - n :]) / max(sum(sizes), 1)) if n else 0)
        before = now
    return out


def reads(prompts: Sequence[int], added: Sequence[int], cold: Collection[int] = ()) -> list[int]:
    """The bound read of each call of a session (`bound_read`), from its prompt tokens and
    what it added; 0 at the calls in `cold` (their indexes: the first after a pause longer
    than the cache's TTL, when no cache holds anything to read)."""
    return [
        0 if k in cold else bound_read(previous, prompt, new)
        for k, (previous, prompt, new) in enumerate(
            zip([0, *prompts], prompts, added, strict=False)
        )
    ]
