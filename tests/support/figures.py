"""Checks on the figures a benchmark returns (the smoke tests of both lines)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["positive"]


def positive(value: Any) -> bool:
    """Whether `value` is a finite number above zero (a bool is not a number here)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and value > 0
        and math.isfinite(value)
    )
