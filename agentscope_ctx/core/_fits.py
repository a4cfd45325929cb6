"""`ensure_fits`: the last check of a pipeline run, before the model call.

When even the parts nothing may take out of the prompt are over the budget: the system
prompt, the tool schemas, the summary message (with the long-term memory note) and the
current user turn (which never leaves the prompt, DESIGN.md §13), no compaction or cut can
help, and sending the prompt would only earn a context-length error from the provider (or a
silently truncated prompt). That is a setup problem (a window too small for the system prompt
and tools, or a user message larger than the window), so it is raised as a
`PromptTooLargeError` (a `ContextUsageError`) naming each part and its size, before any model call.
"""

from __future__ import annotations

import math

from ._accountant import Accountant
from ._compaction import current_turn
from ._errors import PromptTooLargeError

__all__ = ["ensure_fits"]


async def ensure_fits(accountant: Accountant, budget: int) -> None:
    """Raise when the parts that cannot leave the prompt are over `budget` (calibrated).

    Raises:
        PromptTooLargeError: the system prompt, tool schemas, summary and current user turn
            alone exceed the budget; the message gives each part's size.
    """
    parts = await accountant.breakdown()
    memory = accountant.memory
    turn_id = current_turn(memory.content)
    turn = 0 if turn_id is None else accountant.ledger.counts.get(turn_id, 0)
    sizes = {
        "system prompt": parts["system_prompt"],
        "tool schemas": parts["tool_schemas"],
        "summary": parts["summary"],
        "current user turn": turn,
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
        "before any other message; these parts never leave the prompt. Use a model with a "
        "larger window, or shorten the system prompt, the tools or the user's message",
        parts=sizes,
        total=total,
        budget=budget,
    )
