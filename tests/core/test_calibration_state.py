"""Checking a saved calibration as it is loaded (`core/tokens/_calibration_state.py`, issue 29 item
4), on both lines: what comes out is always usable, and what our code writes comes out as it
went in. Through a real agent: `tests/agentscope1/test_calibration.py` (1.x) and
`tests/agentscope2/test_calibration_state.py` (2.x)."""

from __future__ import annotations

import logging
import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentscope_ctx.core.context._memory import ContextMemory
from agentscope_ctx.core.tokens._calibration import BOUNDS, Calibration
from agentscope_ctx.core.tokens._calibration_state import MIN_WINDOW, checked_calibration
from tests.support.corrupt_calibration import CALIBRATION, CORRUPT, ISSUE_CASES, KEYS

ANY_VALUE = CORRUPT | st.floats() | st.integers() | st.text(max_size=5)


def _usable(checked: dict[str, float]) -> None:
    for key, value in checked.items():
        assert type(value) is float and math.isfinite(value), (key, value)
        if key.endswith("#window"):
            assert value >= MIN_WINDOW
        elif key.endswith("#reports"):
            assert value >= 0
        else:
            assert "#" not in key and BOUNDS[0] <= value <= BOUNDS[1]


@given(raw=st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=12), ANY_VALUE) | CALIBRATION)
@example(raw=ISSUE_CASES[0])
@example(raw={"fake-model": 10**400, "fake-model#window": 10**400})  # ints no float holds
def test_i29_04_a_checked_calibration_is_always_usable(raw: object) -> None:
    checked = checked_calibration(raw)
    _usable(checked)
    holder = ContextMemory()
    holder.calibration = checked
    calibration = Calibration(holder, "fake-model", 6_000)
    assert 1 <= calibration.budget <= 6_000
    assert BOUNDS[0] <= calibration.scale / 1.03 <= BOUNDS[1]


@given(
    factor=st.floats(*BOUNDS),
    reports=st.integers(0, 10**6),
    window=st.integers(MIN_WINDOW, 10**7),
)
def test_a_calibration_we_wrote_loads_as_it_was(factor: float, reports: int, window: int) -> None:
    saved = {"m": factor, "m#reports": float(reports), "m#window": float(window)}
    memory = ContextMemory()
    memory.load_state_dict({"content": [], "calibration": saved})
    assert memory.calibration == saved


@pytest.mark.parametrize(
    ("raw", "logged"),
    [
        ({"m#window": math.inf}, "'m#window' is not finite: inf; dropped"),
        ({"m#window": -50}, "'m#window' is a window of -50.0 tokens (at least 256); dropped"),
        ({"m": 9.0}, "'m' is a factor of 9.0, clamped to 4.0; used"),
        ({"m": 0.25}, "'m' is a factor of 0.25 (at least 0.5); dropped"),
        ({"m": "1e400"}, "'m' is not a number: '1e400'; dropped"),
        ({"m#bogus": 1.0}, "'m#bogus' is not a calibration key; dropped"),
        ([1.0], "the saved calibration of a memory is not a mapping (list); not used"),
    ],
)
def test_what_is_dropped_or_clamped_is_logged(
    raw: object, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="agentscope_ctx"):
        ContextMemory().load_state_dict({"content": [], "calibration": raw})
    assert logged in caplog.text
