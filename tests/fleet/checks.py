"""What a worker checks from where it stands (`CHECK`), on either line: the session's history
(dialog store + the live messages it loads), every notice read back byte for byte with this
worker's `read_file`, every fact found with this worker's `search_history`.

Keys: a user turn is its message id (`user-{t}`, fixed by the script: a replayed turn sends
the same one); a tool call and its result are the call id (`c{t}x{s}`). An entry in both the
dialog and the live messages (same id: compacted and saved, the state not yet saved) counts
once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tests.fleet.script import fact, file_name, parse_call_id
from tests.support.crash_checks import check_notices, duplicates


def keys(
    msgs: list[tuple[str, Any]],
) -> tuple[Counter[str], Counter[str], Counter[str], dict[str, list[str]]]:
    """User turns, tool calls and tool results in `msgs` (`(where, msg)` pairs, entries
    deduplicated by id), and where each key was seen (`where:message id`)."""
    users: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    results: Counter[str] = Counter()
    places: dict[str, list[str]] = {}
    seen: set[str] = set()
    for where, msg in msgs:
        if msg.id in seen:
            continue
        seen.add(msg.id)
        found: list[str] = []
        if msg.role == "user" and str(msg.id).startswith("user-"):
            users[str(msg.id)] += 1
            found.append(str(msg.id))
        for block in msg.get_content_blocks("tool_use"):
            calls[str(block["id"])] += 1
            found.append(f"call {block['id']}")
        for block in msg.get_content_blocks("tool_result"):
            results[str(block["id"])] += 1
            found.append(f"result {block['id']}")
        for key in found:
            places.setdefault(key, []).append(f"{where}:{msg.id}")
    return users, calls, results, places


def out_of_order(msgs: list[Any]) -> list[str]:
    """What `msgs` (deduplicated by message id, in order) hold out of the conversation's
    order: a user turn before an earlier one; within one attempt of a turn, anything before
    what it follows (step s's call, then its result, then step s+1's call)."""
    wrong: list[str] = []
    seen: set[str] = set()
    last_user = -1
    last: dict[str, tuple[int, int]] = {}
    for msg in msgs:
        if msg.id in seen:
            continue
        seen.add(msg.id)
        if msg.role == "user" and str(msg.id).startswith("user-"):
            turn = int(str(msg.id)[len("user-") :])
            if turn < last_user:
                wrong.append(str(msg.id))
            last_user = max(last_user, turn)
        events = [(0, "call", b) for b in msg.get_content_blocks("tool_use")]
        events += [(1, "result", b) for b in msg.get_content_blocks("tool_result")]
        for kind, name, block in events:
            key = str(block["id"])
            _, step, attempt = parse_call_id(key)
            if attempt in last and (step, kind) <= last[attempt]:
                wrong.append(f"{name} {key} ({msg.id})")
            last[attempt] = max(last.get(attempt, (step, kind)), (step, kind))
    return wrong


async def check_here(
    manager: Any,
    live: list[Any],
    stored: list[Any],
    files: Path,
    turns_done: int,
    steps: int,
    search: Any,
) -> dict[str, Any]:
    """Run the checks with this worker's manager; returns the counts (the driver asserts)."""
    stored_ids = [m.id for m in stored]
    live_ids = [m.id for m in live]

    def cat(path: str) -> str:
        return (files / path).read_text(encoding="utf-8")

    followed, _ = await check_notices(manager, live, stored, tools={"cat": cat})
    users, calls, results, places = keys(
        [*(("dialog", m) for m in stored), *(("live", m) for m in live)]
    )
    found = missing_facts = 0
    missing: list[str] = []
    for turn in range(turns_done):
        for step in range(steps):
            words = fact(turn, step)
            text = await search(words)
            if words in text:
                found += 1
            else:
                missing_facts += 1
                missing.append(f"{file_name(turn, step)}: {text[:300]!r}")
    from agentscope_ctx.core.context._unanswered import unanswered

    return {
        "live_unanswered": unanswered(live),
        "dialog_duplicates": duplicates(stored_ids),
        "live_duplicates": duplicates(live_ids),
        "users": dict(users),
        "calls": dict(calls),
        "results": dict(results),
        "copies": {key: where for key, where in places.items() if len(where) > 1},
        "notices": followed,
        "facts_found": found,
        "facts_missing": missing,
        "dialog_out_of_order": out_of_order(stored),
        "history_out_of_order": out_of_order([*stored, *live]),
        "in_both": len(set(stored_ids) & set(live_ids)),
        "dialog": len(stored_ids),
        "live": len(live_ids),
    }
