"""The Compactor's retry, on the installed line (a 1.x `ReActAgent` or a 2.x `Agent` with its
scripted model): an answer the validator rejects is asked for once more, naming why; a second
rejection falls back to the extractive summary. The rest of the Compactor:
`tests/core/test_compactor.py` (1.x) and `tests/agentscope2/test_runner.py` (2.x)."""

from __future__ import annotations

import pytest

from agentscope_ctx.core.compaction._compactor import Compactor
from agentscope_ctx.core.config._config import CompactorConfig
from agentscope_ctx.core.summary._extractive import validate_summary
from agentscope_ctx.core.tokens._tokens import TokenCounter
from tests.core.test_extractive import trajectory
from tests.support.agent_line import said
from tests.support.fakes import FakeChatModel
from tests.support.lines import IS_1X


def summary(marker: str = "fix the parser") -> str:
    """A valid model summary whose goal is `marker` (the Compactor tests of both lines)."""
    return (
        f"## Goal\n- {marker}\n## Constraints\n- keep parse_header's signature\n"
        "## Progress\n### Done\n- read src/app/parser.py\n### In progress\n- (none)\n"
        "### Blocked\n- ValueError: bad header\n## Key Decisions\n- strip CR\n"
        "## Next Steps\n- rerun pytest\n## Critical Context\n- tests/test_parser.py:42\n"
    )


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter("cl100k_base")


def compactor(model: FakeChatModel, counter: TokenCounter) -> Compactor:
    """A 1.x model is given the OpenAI formatter; a 2.x model owns its own."""
    formatter = None
    if IS_1X:
        from agentscope.formatter import OpenAIChatFormatter

        formatter = OpenAIChatFormatter()
    return Compactor(
        CompactorConfig(),
        model=model,
        formatter=formatter,
        counter=counter,
        max_input_tokens=32_000,
    )


async def test_invalid_then_retry_then_extractive(counter: TokenCounter) -> None:
    model = FakeChatModel(["Sure! The agent fixed things.", "## Goal\n- still incomplete"])
    result = await compactor(model, counter).compact("", trajectory())

    assert len(model.calls) == 2
    retry = said(model.calls[1], "user")
    assert "Your previous answer was rejected: the summary lacks the section(s)" in retry
    assert "'## Constraints'" in retry
    assert result.source == "extractive"
    assert result.reason is not None and "rejected twice" in result.reason
    assert validate_summary(result.summary) is None
    assert "src/app/parser.py" in result.summary and "ValueError: bad header" in result.summary
    assert "please fix it" in result.summary


@pytest.mark.parametrize(
    ("first", "why"),
    [("", "the summary is empty"), ("## Goal\n- only this", "the summary lacks the section(s)")],
    ids=["empty", "missing-section"],
)
async def test_invalid_then_valid_retry(counter: TokenCounter, first: str, why: str) -> None:
    model = FakeChatModel([first, summary()])
    result = await compactor(model, counter).compact("", trajectory())

    assert result.summary == summary() and result.source == "model_retry"
    assert result.reason is not None and why in result.reason
    assert why in said(model.calls[1], "user")
