"""The provider's cache figures as 1.x's `ChatUsage` passes them (`prompt_usage`): the raw usage
in ``metadata`` where AgentScope keeps it; a figure the provider did not give is `None`, never
0 (issue 45 item 3)."""

from __future__ import annotations

from types import SimpleNamespace

from agentscope_ctx.core.tokens._calibration import CacheStats, PromptUsage, prompt_usage


def _usage(input_tokens: int, metadata: object = None) -> SimpleNamespace:
    return SimpleNamespace(input_tokens=input_tokens, metadata=metadata)


def test_model_studio_reports_reads_and_writes() -> None:
    raw = {
        "prompt_tokens": 3_000,
        "prompt_tokens_details": {"cached_tokens": 2_048, "cache_creation_input_tokens": 600},
    }
    assert prompt_usage(_usage(3_000, raw)) == PromptUsage(3_000, True, 2_048, 600)


def test_openai_reports_reads_only() -> None:
    raw = {"prompt_tokens": 3_000, "prompt_tokens_details": {"cached_tokens": 1_024}}
    usage = prompt_usage(_usage(3_000, raw))
    assert usage == PromptUsage(3_000, True, 1_024, None)
    assert usage.prompt == 3_000


def test_anthropic_all_of_it_cached_is_a_report() -> None:
    raw = {"input_tokens": 0, "cache_read_input_tokens": 2_500, "cache_creation_input_tokens": 40}
    assert prompt_usage(_usage(0, raw)) == PromptUsage(2_540, True, 2_500, 40)


def test_no_raw_usage_no_cache_figures() -> None:
    usage = prompt_usage(_usage(700))  # 1.x's AnthropicChatModel: the uncached part only
    assert usage == PromptUsage(700, False, None, None)
    assert usage.prompt is None  # a lower bound, not the prompt
    assert prompt_usage(_usage(0)) is None


def test_the_session_totals() -> None:
    stats = CacheStats()
    for usage in (
        PromptUsage(1_000, True, 0, 1_000),
        PromptUsage(1_200, True, 1_000, 200),
        PromptUsage(800, False),
    ):
        stats.observe(usage)
    assert (stats.calls, stats.reports, stats.creation_reports) == (3, 2, 2)
    assert (stats.prompt_tokens, stats.cached_tokens, stats.created_tokens) == (2_200, 1_000, 1_200)
    assert stats.reuse == 1_000 / 2_200
