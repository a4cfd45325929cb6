"""The Compactor: model summaries, chunking, validation, retry and extractive fallback."""

from __future__ import annotations

import asyncio
import re
from typing import Any, Literal

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(reason_1x("the Compactor runs as a 1.x ReActAgent"), allow_module_level=True)

from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_ctx.core.compaction._compactor import CompactionResult, Compactor
from agentscope_ctx.core.config._config import CompactorConfig
from agentscope_ctx.core.summary._extractive import validate_summary
from agentscope_ctx.core.tokens._tokens import TokenCounter
from tests.core.test_compactor_retry import summary
from tests.core.test_extractive import trajectory
from tests.support.agent_line import said
from tests.support.fakes import FakeChatModel, tool_call


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter("cl100k_base")


def make(
    model: FakeChatModel | None,
    counter: TokenCounter,
    budget: int = 32_000,
    **config: Any,
) -> Compactor:
    return Compactor(
        CompactorConfig(**config),
        model=model,
        formatter=OpenAIChatFormatter() if model is not None else None,
        counter=counter,
        max_input_tokens=budget,
    )


def long_history(n: int, words: int = 120) -> list[Msg]:
    """`n` messages of about `words` tokens, each tagged msg-NN."""
    out = []
    for i in range(n):
        role: Literal["user", "assistant"] = "user" if i % 2 == 0 else "assistant"
        out.append(Msg(role, f"msg-{i:02d} " + " ".join(["context"] * words), role))
    return out


async def test_initial_summary(counter: TokenCounter) -> None:
    model = FakeChatModel([summary()])
    result = await make(model, counter).compact("", trajectory())

    assert result == CompactionResult(summary(), "model", None, 1)
    assert len(model.calls) == 1
    system, user = said(model.calls[0], "system"), said(model.calls[0], "user")
    assert "context compactor" in system and "## Critical Context" in system
    assert "(none: this is the first summary)" in user
    # a compact transcript of the messages: text, calls with JSON input, results
    assert "You must not change the signature of parse_header" in user
    assert '-> call read_file {"file_path": "src/app/parser.py"}' in user
    assert "E   ValueError: bad header" in user
    assert model.calls[0]["tools"] == []  # a tool-less agent


async def test_update_puts_previous_summary_in_the_prompt(counter: TokenCounter) -> None:
    model = FakeChatModel([summary("updated")])
    previous = summary("the previous goal")
    result = await make(model, counter).compact(previous, trajectory()[:2])

    assert result.summary == summary("updated") and result.source == "model"
    user = said(model.calls[0], "user")
    assert previous.strip() in user
    assert user.index("the previous goal") < user.index("<messages>")


async def test_answer_is_cleaned_of_fences_and_preamble(counter: TokenCounter) -> None:
    model = FakeChatModel([f"Here is the summary:\n```markdown\n{summary()}```"])
    result = await make(model, counter).compact("", trajectory())
    assert result.summary == summary() and result.source == "model"


async def test_extra_instruction_reaches_the_prompt(counter: TokenCounter) -> None:
    model = FakeChatModel([summary()])
    await make(model, counter).compact(
        "", trajectory(), extra_instruction="focus on the failing test"
    )
    assert "focus on the failing test" in said(model.calls[0], "user")


async def test_chinese_prompt_for_zh(counter: TokenCounter) -> None:
    model = FakeChatModel([summary()])
    result = await make(model, counter, language="zh").compact("", trajectory())

    system, user = said(model.calls[0], "system"), said(model.calls[0], "user")
    assert "上下文压缩器" in system and "## Goal" in system  # headings stay English
    assert "之前的摘要" in user and "现在写出更新后的摘要" in user
    assert result.source == "model"


async def test_chunked_compaction_folds_oldest_first(counter: TokenCounter) -> None:
    seen: list[str] = []

    def answer(messages: list[dict[str, Any]]) -> str:
        user = said({"messages": messages}, "user")
        seen.append(user)
        transcript = user.split("<messages>")[1].split("</messages>")[0]
        return summary(f"chunk {len(seen)} up to " + re.findall(r"msg-\d+", transcript)[-1])

    model = FakeChatModel(default=answer)
    compactor = make(model, counter, budget=1_000, max_input_tokens=1_000)
    history = long_history(12)
    result = await compactor.compact("", history)

    assert result.source == "model" and result.chunks == len(model.calls) >= 3
    tags = [re.findall(r"msg-(\d+)", prompt.split("<messages>")[1]) for prompt in seen]
    flat = [int(tag) for chunk in tags for tag in chunk]
    assert flat == list(range(12))  # every message once, oldest first
    for i in range(1, len(seen)):  # the running summary is folded into the next chunk
        assert f"chunk {i} up to msg-" in seen[i].split("<messages>")[0]
        assert f", part {i + 1};" in seen[i]
    assert "More messages follow" in seen[0] and "More messages follow" not in seen[-1]
    assert result.summary.startswith(f"## Goal\n- chunk {len(seen)} up to msg-11")
    for call in model.calls:  # every prompt within the compactor's budget
        assert await counter.count(call["messages"]) <= 1_000


async def test_single_oversized_message_is_cut_to_fit(counter: TokenCounter) -> None:
    model = FakeChatModel([summary(), summary()])
    history = [Msg("user", "\n".join(f"line {i} " + "word " * 10 for i in range(400)), "user")]
    result = await make(model, counter, budget=1_000).compact("", history)

    assert result.source == "model" and result.chunks == 1
    assert "cut to fit the compactor's input budget" in said(model.calls[0], "user")
    assert await counter.count(model.calls[0]["messages"]) <= 1_000


async def test_main_budget_is_used_without_compactor_budget(counter: TokenCounter) -> None:
    assert make(None, counter, budget=5_000).budget == 5_000
    assert make(None, counter, budget=5_000, max_input_tokens=2_000).budget == 2_000


async def test_summary_longer_than_its_input_is_rejected(counter: TokenCounter) -> None:
    bloated = summary() + "\n".join(f"- detail {i} " + "blah " * 20 for i in range(200))
    model = FakeChatModel([bloated, summary()])
    result = await make(model, counter).compact("", trajectory())

    assert result.source == "model_retry"
    assert re.search(r"the summary has \d+ tokens, more than the \d+ allowed", result.reason or "")
    assert "tokens, more than the" in said(model.calls[1], "user")


async def test_model_exception_falls_back_without_retry(counter: TokenCounter) -> None:
    model = FakeChatModel([RuntimeError("rate limited")])
    result = await make(model, counter).compact(summary("old goal"), trajectory())

    assert len(model.calls) == 1
    assert result.source == "extractive" and result.chunks == 1
    assert "rate limited" in (result.reason or "")
    assert "- old goal" in result.summary and "src/app/parser.py" in result.summary


class SlowModel(FakeChatModel):
    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append({"messages": args[0] if args else kwargs.get("messages")})
        await asyncio.sleep(30)
        raise AssertionError("not reached")


async def test_timeout_falls_back(counter: TokenCounter) -> None:
    model = SlowModel()
    result = await make(model, counter, timeout_seconds=0.05).compact("", trajectory())

    assert result.source == "extractive"
    assert "timed out after 0.05 s" in (result.reason or "")
    assert validate_summary(result.summary) is None


async def test_cancellation_propagates(counter: TokenCounter) -> None:
    task = asyncio.ensure_future(make(SlowModel(), counter).compact("", trajectory()))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_failure_in_a_later_chunk_keeps_the_earlier_summary(counter: TokenCounter) -> None:
    model = FakeChatModel([summary("from chunk one")], default=RuntimeError("down"))
    result = await make(model, counter, budget=1_000).compact("", long_history(12))

    assert len(model.calls) == 2 and result.chunks == 2
    assert result.source == "extractive" and (result.reason or "").startswith("chunk 2:")
    assert "- from chunk one" in result.summary  # chunk 1's summary merged
    assert "msg-11" in result.summary  # the rest summarised extractively


@pytest.mark.parametrize("config", [{"enabled": False}, {}])
async def test_no_model_or_disabled_is_extractive(
    counter: TokenCounter, config: dict[str, Any]
) -> None:
    model = FakeChatModel([summary()]) if config else None
    result = await make(model, counter, **config).compact("", trajectory())

    assert result.source == "extractive" and result.chunks == 0
    assert result.reason in ("compactor disabled", "no model configured")
    assert model is None or model.calls == []
    assert "ValueError: bad header" in result.summary


async def test_no_messages_keeps_a_valid_previous_summary(counter: TokenCounter) -> None:
    model = FakeChatModel([summary("unused")])
    result = await make(model, counter).compact(summary(), [])
    assert result.summary == summary() and model.calls == []


async def test_streaming_model_and_stray_tool_call(counter: TokenCounter) -> None:
    # A model that calls a tool anyway: the one-iteration agent then asks for a text answer.
    model = FakeChatModel([tool_call("bash", cmd="ls"), summary()], stream=True)
    result = await make(model, counter).compact("", trajectory())
    assert result.summary == summary() and result.source == "model"


async def test_fallback_summary_fits_a_small_budget(counter: TokenCounter) -> None:
    compactor = make(None, counter, budget=1_000)
    history = [Msg("user", f"You must keep rule {i}. " + "x " * 200, "user") for i in range(40)]
    result = await compactor.compact("", history)
    assert await counter.count_text(result.summary) <= max(compactor.max_summary_tokens, 400)
    assert validate_summary(result.summary) is None


_COUNTER = TokenCounter("cl100k_base")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.integers(1_000, 4_000),
    sizes=st.lists(st.integers(1, 3_000), min_size=1, max_size=12),
    word=st.sampled_from(["context ", "上下文", "{'k': 1} ", "😀"]),
    previous=st.sampled_from(["", summary("an earlier goal " * 20)]),
)
def test_every_compactor_prompt_fits_its_budget(
    budget: int, sizes: list[int], word: str, previous: str
) -> None:
    model = FakeChatModel(default=summary())
    compactor = make(model, _COUNTER, budget=budget)
    history = [Msg("user", f"msg-{i:02d} " + word * n, "user") for i, n in enumerate(sizes)]

    result = asyncio.run(compactor.compact(previous, history))

    assert result.source == "model" and result.chunks == len(model.calls)
    seen = []
    for call in model.calls:
        assert asyncio.run(_COUNTER.count(call["messages"])) <= budget
        seen += re.findall(r"msg-(\d+)", said(call, "user").split("<messages>")[1])
    assert [int(tag) for tag in seen] == list(range(len(sizes)))  # each once, oldest first


async def test_oversized_previous_summary_is_condensed_first(counter: TokenCounter) -> None:
    previous = summary("the first goal") + "\n".join(f"- fact {i} " + "y " * 40 for i in range(80))
    model = FakeChatModel(default=summary())
    result = await make(model, counter, budget=1_000).compact(previous, trajectory())

    assert result.source == "model"
    for call in model.calls:
        assert await counter.count(call["messages"]) <= 1_000
    assert "- the first goal" in said(model.calls[0], "user")  # condensed, not dropped
