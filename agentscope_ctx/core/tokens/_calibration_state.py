"""A saved calibration checked as it is loaded (`checked_calibration`).

The calibration (`_calibration`) lives in the agent's saved state: the 1.x memory's
`state_dict`, the 2.x `AgentState.middle_context`. A state is a file or a database row that
anything may have edited, and a wrong number there is worse than none: a window of ``inf`` or
NaN makes every run of the pipeline fail (the prompt is then sent unchecked, over the
budget), a window of 0 or below makes every turn raise `PromptTooLargeError` (a learned
window is only ever lowered), and a NaN factor breaks every count. So every value is checked
when a state is loaded, and what is out of range is dropped or clamped, and logged:

- the **factor** (``<model>``): a finite number in `BOUNDS`; above them it is clamped to the
  largest (a large factor stays the largest one, safety first), anything else is dropped (the
  prior, 1.0, applies): a factor below them, trusted even as the smallest, would let every
  prompt go over the budget by the provider's count;
- the **evidence count** (``<model>#reports``): a finite number, 0 or more; else dropped;
- the **window** (``<model>#window``): a finite number of at least `MIN_WINDOW` tokens (no
  chat model accepts less); else dropped (the configured `max_input_tokens` applies, and a
  provider's next context-length error teaches the window again);
- the **last call's time** (``<model>#called``): a finite number, 0 or more; else dropped
  (the cache then counts as warm until the next call);
- anything else (another ``#`` suffix, a value that is not a number: a string, a bool,
  ``None``, a list) is dropped; a calibration that is not a mapping is dropped whole.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

from ._calibration import _CALLED, _REPORTS, _WINDOW, BOUNDS

__all__ = ["MIN_WINDOW", "checked_calibration"]

logger = logging.getLogger("agentscope_ctx")

MIN_WINDOW = 256
"""The smallest window a saved calibration may state (tokens); a smaller one is corrupt."""


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return math.inf
    return number


def _checked(key: str, value: object) -> tuple[float | None, str]:
    """The value to keep for `key` (`None`: drop it) and what was wrong ("" when nothing)."""
    number = _number(value)
    if number is None:
        return None, f"not a number: {value!r:.60}"
    if not math.isfinite(number):
        return None, f"not finite: {number!r}"
    if key.endswith(_WINDOW):
        if number < MIN_WINDOW:
            return None, f"a window of {number!r} tokens (at least {MIN_WINDOW})"
        return number, ""
    if key.endswith(_REPORTS):
        return (number, "") if number >= 0 else (None, f"a negative count: {number!r}")
    if key.endswith(_CALLED):
        return (number, "") if number >= 0 else (None, f"a negative time: {number!r}")
    if "#" in key:
        return None, "not a calibration key"
    if number <= 0:
        return None, f"a factor of {number!r} (above 0)"
    if number < BOUNDS[0]:  # trusted, even clamped, it would let prompts over the budget
        return None, f"a factor of {number!r} (at least {BOUNDS[0]})"
    clamped = min(number, BOUNDS[1])
    return clamped, "" if clamped == number else f"a factor of {number!r}, clamped to {clamped}"


def checked_calibration(raw: object, *, owner: str = "") -> dict[str, float]:
    """The calibration to use from `raw`, a saved one: each value checked (see the module
    docstring); what was dropped or clamped is logged as a warning naming `owner` (where it
    was loaded from)."""
    if raw is None:
        return {}
    where = f" of {owner}" if owner else ""
    if not isinstance(raw, Mapping):
        logger.warning(
            "agentscope_ctx: the saved calibration%s is not a mapping (%s); not used",
            where,
            type(raw).__name__,
        )
        return {}
    checked: dict[str, float] = {}
    for key, value in raw.items():
        name = str(key)
        kept, wrong = _checked(name, value)
        if kept is not None:
            checked[name] = kept
        if wrong:
            logger.warning(
                "agentscope_ctx: the saved calibration%s: %r is %s; %s",
                where,
                name,
                wrong,
                "used" if kept is not None else "dropped",
            )
    return checked
