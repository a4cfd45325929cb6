"""`answer_compactor`: the demo's scripted compactor model, so that an offline demo's
compaction is a *model* compaction: it answers the Compactor's prompt with the summary
`agentscope_ctx.testing.write_summary` writes from it (the public scripted model's), counts
the call in the demo's `PromptStats` and says so in the progress output. A prompt that is not
a compactor's (the Summarizer's, when a config enables it) gets a short text saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..testing._summary import NOT_A_SUMMARY, compactor_request, write_summary
from ._stats import PromptStats

__all__ = ["NOT_A_SUMMARY", "answer_compactor", "write_summary"]


async def answer_compactor(
    stats: PromptStats,
    messages: Sequence[Mapping[str, Any]],
    on_step: Callable[[str], None] | None = None,
) -> str:
    """The scripted compactor model's answer to a formatted prompt (OpenAI style): the
    summary of its last user message, with the call counted in `stats.compactor_calls`."""
    prompt = compactor_request(messages)
    summary = NOT_A_SUMMARY if prompt is None else write_summary(prompt)
    tokens = await stats.counter.count(list(messages))
    written = await stats.counter.count_text(summary)
    if summary != NOT_A_SUMMARY:
        stats.compactor_calls.append((tokens, written))
        if on_step is not None:
            on_step(
                f"  compactor | prompt {tokens:6,d} tok | summary: {written:,} tokens, five "
                "sections (scripted compactor model)"
            )
    return summary
