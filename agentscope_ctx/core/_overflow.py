"""`is_context_overflow`: whether a provider's error says the prompt is too long (any of the
four providers). The model guard (`models/_guard.py`, 2.x `agentscope2/_calls.py`) retries
after one; the Compactor turns from its prefix request to the plain one.
"""

from __future__ import annotations

import re

__all__ = ["is_context_overflow"]

# How each provider says "the prompt is too long", in one place:
#  OpenAI-compatible (OpenAI, vLLM, llama.cpp server): code context_length_exceeded,
#    "This model's maximum context length is 8192 tokens ...", "... exceeds the context window"
#  Anthropic: "prompt is too long: 210000 tokens > 200000 maximum",
#    "input length and `max_tokens` exceed context limit"
#  DashScope: InvalidParameter "Range of input length should be [1, 30720]",
#    "Input tokens exceed max input length"
#  Ollama: "input length exceeds the context length", "context length exceeded"
_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length|context (?:window|limit)|"
    r"context length|prompt is too long|range of input length|"
    r"input tokens? exceeds?|exceeds? (?:the )?max(?:imum)? input length|"
    r"too many (?:input )?tokens",
    re.IGNORECASE,
)


def is_context_overflow(exc: BaseException) -> bool:
    """Whether `exc` is a provider's "prompt too long" error (any of the four providers)."""
    parts = [str(exc), repr(getattr(exc, "body", "") or ""), str(getattr(exc, "code", "") or "")]
    return any(_OVERFLOW.search(part) for part in parts)
