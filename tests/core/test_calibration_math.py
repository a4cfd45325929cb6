"""Trusting the provider, line-neutral part: what a context-length error says (overflow or
not, the window and prompt it states), the prompt size a usage report gives, and the bounded
steps of the calibration factor. The agent-driven part is `test_calibration.py` (1.x)."""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from agentscope.model._model_usage import ChatUsage
from dashscope.api_entities.dashscope_response import GenerationUsage
from openai.types.completion_usage import CompletionUsage, PromptTokensDetails

from agentscope_ctx.core.context._memory import ContextMemory
from agentscope_ctx.core.tokens._calibration import (
    Calibration,
    PromptUsage,
    StatedLimits,
    prompt_usage,
    stated_limits,
)
from agentscope_ctx.models._guard import is_context_overflow


def http_response(status: int = 400) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("POST", "http://127.0.0.1/v1/chat"))


class OllamaResponseError(Exception):
    """Shaped like `ollama.ResponseError` (the SDK is optional and not installed here)."""

    def __init__(self, error: str, status_code: int = 400) -> None:
        super().__init__(error)
        self.error, self.status_code = error, status_code


def overflow_errors() -> dict[str, Exception]:
    return {
        "openai": openai.BadRequestError(
            "Error code: 400 - This model's maximum context length is 8192 tokens. However, "
            "your messages resulted in 9120 tokens.",
            response=http_response(),
            body={"error": {"code": "context_length_exceeded"}},
        ),
        "anthropic": anthropic.BadRequestError(
            "prompt is too long: 210345 tokens > 200000 maximum",
            response=http_response(),
            body={"type": "error", "error": {"type": "invalid_request_error"}},
        ),
        "dashscope": RuntimeError(
            '{"status_code": 400, "code": "InvalidParameter", "message": "Range of input '
            'length should be [1, 30720]"}'
        ),
        "ollama": OllamaResponseError("the input length exceeds the context length"),
    }


@pytest.mark.parametrize("provider", ["openai", "anthropic", "dashscope", "ollama"])
def test_each_providers_overflow_is_recognised(provider: str) -> None:
    assert is_context_overflow(overflow_errors()[provider])


def test_other_errors_are_not_overflow() -> None:
    assert not is_context_overflow(RuntimeError("connection reset by peer"))
    assert not is_context_overflow(
        openai.RateLimitError("rate limit", response=http_response(429), body=None)
    )


def test_i11_06_usage_reads_the_cache_fields_agentscope_passes_on() -> None:
    openai_usage = CompletionUsage(
        prompt_tokens=900,
        completion_tokens=5,
        total_tokens=905,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=800),
    )
    anthropic_usage = anthropic.types.Usage(
        input_tokens=100,
        output_tokens=5,
        cache_read_input_tokens=800,
        cache_creation_input_tokens=50,
    )
    dashscope_usage = GenerationUsage(
        input_tokens=900, output_tokens=5, prompt_tokens_details={"cached_tokens": 800}
    )

    def usage(tokens: int, metadata: object = None) -> PromptUsage | None:
        return prompt_usage(
            ChatUsage(input_tokens=tokens, output_tokens=5, time=0.1, metadata=metadata)
        )

    # cached included; and the cache reads (issue 12, item 5) read off each SDK's own object
    assert usage(900, openai_usage) == PromptUsage(900, complete=True, cached=800)
    assert usage(100, anthropic_usage) == PromptUsage(950, complete=True, cached=800, created=50)
    assert usage(900, dashscope_usage) == PromptUsage(900, complete=True, cached=800)
    assert usage(100) == PromptUsage(100, complete=False)  # Anthropic/Ollama via AgentScope
    assert usage(0) is None and prompt_usage(None) is None


def test_i11_06_factor_starts_conservative_and_moves_in_bounded_steps(tmp_path: Path) -> None:
    memory = ContextMemory(tmp_path)
    calibration = Calibration(memory, "m", 10_000)
    assert calibration.factor == 1.0 and calibration.budget == 10_000
    # a report smaller than our estimate, coverage unknown: a lower bound, ignored
    assert calibration.observe(300, 5_000) == 1.0
    # complete but on a small prompt: no evidence to go below 1.0
    assert calibration.observe(300, 1_000, complete=True) == 1.0
    # complete reports on big prompts: below 1.0 only from the third, 10% per report
    factors = [calibration.observe(3_000, 5_000, complete=True) for _ in range(8)]
    assert factors[:2] == [1.0, 1.0]
    assert factors[2] == pytest.approx(0.9) and factors[3] == pytest.approx(0.81)
    assert factors[-1] == pytest.approx(0.6)
    # upward at most doubling per report
    assert calibration.observe(15_000, 5_000) == pytest.approx(1.2)
    assert calibration.observe(15_000, 5_000) == pytest.approx(2.4)
    assert calibration.observe(15_000, 5_000) == pytest.approx(3.0)
    assert calibration.observe(50_000, 5_000) == 4.0  # bounded
    # a factor stored below 1.0 without evidence (an older version's) reads as 1.0
    memory.calibration = {"m": 0.5}
    assert calibration.factor == 1.0


@pytest.mark.parametrize(
    ("message", "window", "prompt"),
    [
        (overflow_errors()["openai"], 8192, 9120),
        (overflow_errors()["anthropic"], 200_000, 210_345),
        (overflow_errors()["dashscope"], 30_720, None),
        (overflow_errors()["ollama"], None, None),
        (
            RuntimeError(
                "This model's maximum context length is 8192 tokens. However, you requested "
                "9120 tokens (5024 in the messages, 4096 in the completion)."
            ),
            8192 - 4096,
            5024,
        ),
        (
            RuntimeError(
                "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, "
                "decrease input length or `max_tokens` and try again"
            ),
            200_000 - 21_333,
            188_240,
        ),
    ],
)
def test_i11_07_the_numbers_in_each_providers_error_are_read(
    message: Exception, window: int | None, prompt: int | None
) -> None:
    assert stated_limits(message) == StatedLimits(window=window, prompt=prompt)
