"""Saved calibrations no code of ours writes (issue 29, item 4), for the test that loads them
into an agent of the installed line and for the checker's own properties
(`tests/core/test_calibration_state.py`)."""

from __future__ import annotations

import math

from hypothesis import strategies as st

KEYS = ("fake-model", "fake-model#window", "fake-model#reports", "fake-model#called")
"""The fake model's factor, its learned window, its evidence count and its last call's time
(`core/tokens/_calibration.py`)."""

CORRUPT = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan, 0, 0.0, -50, -1e-9, 1e300, 10**400]),
    st.floats(max_value=0.0) | st.floats(min_value=1e9),  # negative, zero, huge (inf, NaN too)
    st.floats(min_value=1e-300, max_value=0.49),  # a factor below its bounds, a tiny window
    st.integers(min_value=-(10**30), max_value=255),  # a window no model has
    st.sampled_from(["1e400", "NaN", "6000", "", None, True, False, [], {}, [1.0]]),
)
"""Values no calibration of ours writes (a window under 256 tokens included)."""

CALIBRATION = st.one_of(
    st.dictionaries(st.sampled_from(KEYS), CORRUPT, min_size=1),
    st.sampled_from([[], "fake-model", 3.5]),  # not a mapping at all
)
"""A saved calibration with at least one corrupt value, or not a mapping."""

ISSUE_CASES: list[object] = [
    {"fake-model#window": math.inf},  # the issue's 1e400: 6,681 tokens sent against 6,000
    {"fake-model#window": math.nan},  # 6,655 tokens sent
    {"fake-model#window": 0},  # PromptTooLargeError on every turn
    {"fake-model#window": -50.0},
    {"fake-model": math.nan, "fake-model#reports": 5.0},
    {"fake-model": "1e400"},
]
"""The cases the issue reproduced, and a NaN factor and a string: pinned with `@example`."""
