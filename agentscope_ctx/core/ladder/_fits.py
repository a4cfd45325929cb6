"""`ensure_fits`: the last check of a pipeline run, before the model call.

When the prompt is still over the budget after every rung (the fit, the compaction of all but
the current user turn, the summary out of view), what is left is what nothing may take out of
the prompt: the system prompt, the tool schemas and the current user turn (which never leaves
the prompt, DESIGN.md §13; cut to its head and a notice when huge), and pinned messages
(within `pin_max_share`). No compaction or cut can help, and sending the prompt would only
earn a context-length error from the provider (or a silently truncated prompt). That is a
setup problem (a window too small for the system prompt and tools, or a user message larger
than the window), so it is raised as a `PromptTooLargeError` (a `ContextUsageError`) naming
each part and its size, before any model call: a prompt over the budget is never sent.
"""

from __future__ import annotations

import math

from .._errors import PromptTooLargeError
from ..context._turns import current_turn, turn_ids
from ._accountant import Accountant

__all__ = ["ensure_fits", "floor_fits"]


async def floor_fits(accountant: Accountant, budget: int) -> bool:
    """Whether the system prompt, the tool schemas and the current user turn (as they are
    now, with the tool calls after it still waiting for their results: `turn_ids`) fit
    `budget` together (calibrated): if not, nothing can make the prompt fit."""
    parts = await accountant.breakdown()
    counts = accountant.ledger.counts
    turn = sum(counts.get(i, 0) for i in turn_ids(accountant.memory.content))
    floor = parts["system_prompt"] + parts["tool_schemas"] + turn
    return math.ceil(floor * accountant.calibration.scale) <= budget


async def ensure_fits(accountant: Accountant, budget: int) -> None:
    """Raise when the prompt is over `budget` (calibrated).

    Raises:
        PromptTooLargeError: the prompt, at its least, exceeds the budget; the message gives
            each part's size (the other messages: pins, or what a failed compaction kept).
    """
    parts = await accountant.breakdown()
    memory = accountant.memory
    turn_id = current_turn(memory.content)
    turn = (
        0
        if turn_id is None or turn_id in memory.hidden
        else accountant.ledger.counts.get(turn_id, 0)
    )
    sizes = {
        "system prompt": parts["system_prompt"],
        "tool schemas": parts["tool_schemas"],
        "summary": parts["summary"],
        "current user turn": turn,
        "other messages": parts["messages"] - turn,
    }
    scale = accountant.calibration.scale
    total = math.ceil(sum(sizes.values()) * scale)
    if total <= budget:
        return
    listed = " + ".join(f"{name} {tokens}" for name, tokens in sizes.items())
    scaled = "" if scale == 1.0 else f" (x{scale:.2f}: the provider's count of our estimates)"
    raise PromptTooLargeError(
        f"the prompt cannot fit its budget of {budget} tokens (max_input_tokens, lowered to "
        f"the model's window when that is smaller): {listed} = {total} tokens{scaled}, "
        "each part at its least; the system prompt, the tool schemas, the current user turn "
        "and pinned messages never leave the prompt. Use a model with a larger window, or "
        "shorten the system prompt, the tools or the user's message",
        parts=sizes,
        total=total,
        budget=budget,
        scale=scale,
    )
