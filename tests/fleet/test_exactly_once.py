"""The harness's exactly-once check (`_assert_exactly_once`) on made-up session results: it
accepts a killed attempt's calls kept once beside the replay's, and refuses a copy, a lost
result of the attempt that counts, a call of an attempt that never ran, a result without its
call. (The two-worker trials feed it real sessions: tests/fleet/test_workers.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fleet.harness import _assert_exactly_once
from tests.fleet.script import call_id

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
