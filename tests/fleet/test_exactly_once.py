"""The harness's exactly-once check (`_assert_exactly_once`) on made-up session results: it
accepts a killed attempt's calls kept once beside the replay's, and refuses a copy, a lost
result of the attempt that counts, a call of an attempt that never ran, a result without its
call; and what the workers count (`checks.keys`): the session's history, the dialog store
then the state, a message in both (the same id) once. (The two-worker trials feed them real
sessions: tests/fleet/test_workers.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fleet.checks import keys
from tests.fleet.harness import _assert_exactly_once
from tests.fleet.script import call_id, user_id

TURNS, STEPS = 2, 3
ATTEMPTS = {0: ["a0"], 1: ["k1", "a1"]}  # turn 1: killed once (k1), then replayed (a1)


def _result(extra_calls: dict[str, int], extra_results: dict[str, int]) -> dict[str, Any]:
    calls = {call_id(t, s, ATTEMPTS[t][-1]): 1 for t in range(TURNS) for s in range(STEPS)}
    calls[call_id(1, 0, "k1")] = 1  # the killed attempt's first call, answered
    calls[call_id(1, 1, "k1")] = 1  # and its second, killed before the result
    results = {key: 1 for key in calls if key != call_id(1, 1, "k1")}
    calls.update(extra_calls)
    results.update(extra_results)
    return {"calls": calls, "results": results, "copies": {}}


def test_a_killed_attempts_part_kept_once_beside_the_replay_passes() -> None:
    _assert_exactly_once(_result({}, {}), ATTEMPTS, TURNS, STEPS)


@pytest.mark.parametrize(
    ("calls", "results", "message"),
    [
        ({call_id(1, 0, "k1"): 2}, {}, "call c1x0-k1 2 times"),
        ({}, {call_id(0, 2, "a0"): 2}, "result c0x2-a0 2 times"),
        ({call_id(1, 0, "zz"): 1}, {}, "of no attempt"),
        ({}, {call_id(1, 1, "k1"): 1, "c9x9-a0": 1}, "of no attempt"),
        ({}, {call_id(1, 2, "a1"): 0}, "lost"),
    ],
)
def test_a_copy_a_loss_or_a_stray_is_refused(
    calls: dict[str, int], results: dict[str, int], message: str
) -> None:
    result = _result(calls, results)
    result["results"] = {k: v for k, v in result["results"].items() if v}
    with pytest.raises(AssertionError, match=message):
        _assert_exactly_once(result, ATTEMPTS, TURNS, STEPS)


def test_a_result_without_its_call_is_refused() -> None:
    result = _result({}, {})
    del result["calls"][call_id(1, 0, "k1")]
    with pytest.raises(AssertionError, match="results without calls"):
        _assert_exactly_once(result, ATTEMPTS, TURNS, STEPS)


# -- what the workers count (`checks.keys`): the history, a message in both places once ------


def _msg(msg_id: str, role: str, content: Any) -> Any:
    from agentscope_ctx.core._entry import Msg

    msg = Msg(role, content, role)
    msg.id = msg_id
    return msg


def _turn(attempt: str = "a0") -> list[Any]:
    """Turn 0: the user's message, one call and its result, the answer."""
    key = call_id(0, 0, attempt)
    call = {"type": "tool_use", "id": key, "name": "cat", "input": {"path": "f0"}}
    result = {"type": "tool_result", "id": key, "name": "cat", "output": "text"}
    return [
        _msg(user_id(0), "user", "read f0"),
        _msg("m-call", "assistant", [call]),
        _msg("m-result", "user", [result]),
        _msg("m-answer", "assistant", "done"),
    ]


def test_the_current_turn_in_the_dialog_and_in_the_state_counts_once() -> None:
    """What the docs promise (docs/fleet.md, "exactly once"): a compaction writes the current
    user turn (and the work it folded) to the dialog store while the turn stays in the state;
    the history counts each message id once, so the session still passes."""
    stored = _turn()[:3]  # compacted: the turn, the call, the result, saved first
    live = [_turn()[0], _turn()[3]]  # the turn never leaves the prompt; then the answer
    users, calls, results, places = keys(
        [*(("dialog", m) for m in stored), *(("live", m) for m in live)]
    )
    assert users == {user_id(0): 1}
    assert calls == {call_id(0, 0, "a0"): 1} and results == {call_id(0, 0, "a0"): 1}
    assert places[user_id(0)] == [f"dialog:{user_id(0)}"]
    copies = {key: where for key, where in places.items() if len(where) > 1}
    _assert_exactly_once(
        {"calls": dict(calls), "results": dict(results), "copies": copies}, {0: ["a0"]}, 1, 1
    )


def test_a_call_kept_under_another_message_id_is_a_copy() -> None:
    """The count is by message id, so a copy under a new id (a write-through that made a new
    message) is seen twice and refused, wherever it is."""
    stored = _turn()
    copy = _msg("m-call-copy", "assistant", stored[1].content)
    users, calls, results, places = keys([*(("dialog", m) for m in stored), ("live", copy)])
    assert calls[call_id(0, 0, "a0")] == 2
    copies = {key: where for key, where in places.items() if len(where) > 1}
    with pytest.raises(AssertionError, match="call c0x0-a0 2 times"):
        _assert_exactly_once(
            {"calls": dict(calls), "results": dict(results), "copies": copies},
            {0: ["a0"]},
            1,
            1,
        )
