"""Trusting the provider: calibration from reported usage, and recovery from overflow errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock
from agentscope.model import ChatResponse
from agentscope.model._model_usage import ChatUsage
from agentscope.tool import Toolkit, ToolResponse

from agentscope_ctx import ContextConfig, ContextManager, ContextMemory, TokenCounter
from agentscope_ctx._guard import is_context_overflow
from tests.fakes import FakeChatModel, text, tool_call

BUDGET = 10_000
COUNTER = TokenCounter("cl100k_base")


class ReportingModel(FakeChatModel):
    """A scripted model whose provider counts `factor` times what we count."""

    def __init__(self, factor: float | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.factor = factor
        self.raw: list[int] = []
        self.reported: list[int] = []

    async def __call__(
        self, messages: list[dict[str, Any]], tools: Any = None, **kwargs: Any
    ) -> Any:
        raw = await COUNTER.count(messages, tools=tools)
        self.raw.append(raw)
        streaming, self.stream = self.stream, False
        response = await super().__call__(messages, tools=tools, **kwargs)
        self.stream = streaming
        assert isinstance(response, ChatResponse)
        if self.factor is not None:
            reported = round(raw * self.factor)
            self.reported.append(reported)
            response.usage = ChatUsage(input_tokens=reported, output_tokens=10, time=0.1)
        return self._stream(response) if streaming else response


def toolkit() -> Toolkit:
    kit = Toolkit()

    def dump(n: int) -> ToolResponse:
        """Dump a chunk of data.

        Args:
            n (int): which chunk.
        """
        body = "".join(f"record {n}-{i}: value {i * 7} status ok\n" for i in range(120))
        return ToolResponse(content=[TextBlock(type="text", text=body)])

    kit.register_tool_function(dump)
    return kit


def make_agent(
    tmp_path: Path, model: FakeChatModel, budget: int = BUDGET
) -> tuple[ReActAgent, ContextManager]:
    config = ContextConfig(
        working_dir=tmp_path,
        max_input_tokens=budget,
        compact_trigger_ratio=0.7,
        keep_recent_ratio=0.2,
        token_counter="cl100k_base",
        tool_result={"recent_n": 50, "recent_max_bytes": 8_000, "old_max_bytes": 4_000},
    )
    agent = ReActAgent(
        name="worker",
        sys_prompt="You dump data.",
        model=model,
        formatter=OpenAIChatFormatter(),
        toolkit=toolkit(),
        max_iters=100,
    )
    agent.set_console_output_enabled(False)
    manager = ContextManager(config, token_counter=COUNTER)
    manager.attach(agent)
    return agent, manager


async def run_session(
    tmp_path: Path, factor: float | None
) -> tuple[ReportingModel, ContextManager, ReActAgent]:
    model = ReportingModel(factor)
    agent, manager = make_agent(tmp_path, model)
    for i in range(40):
        model.enqueue(tool_call("dump", call_id=f"d{i}", n=i))
    model.enqueue(text("all dumped"))
    reply = await agent(Msg("user", "dump everything", "user"))
    assert reply.get_text_content() == "all dumped"
    return model, manager, agent


async def test_compaction_triggers_at_the_calibrated_threshold(tmp_path: Path) -> None:
    calibrated, manager, agent = await run_session(tmp_path / "a", 1.8)
    control, _, _ = await run_session(tmp_path / "b", None)
    threshold = 0.7 * BUDGET
    # without usage data, the raw estimate climbs to the raw threshold before compacting
    assert max(control.raw) > threshold * 0.9
    # with the provider counting 1.8x, compaction comes at about threshold / 1.8 of our count
    assert max(calibrated.raw[1:]) < threshold / 1.8 * 1.25
    # and the provider's own count stays within the budget once calibrated
    assert max(calibrated.reported[1:]) <= BUDGET
    memory = manager.memory_of(agent)
    factor = memory.calibration["fake-model"]
    assert 1.5 < factor <= 1.8
    usage = await manager.context_usage(agent)
    assert usage.calibrated_total > usage.total
    restored = ContextMemory(tmp_path)
    restored.load_state_dict(memory.state_dict())
    assert restored.calibration == memory.calibration


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


async def fill(agent: ReActAgent, model: FakeChatModel, turns: int) -> None:
    for i in range(turns):
        model.enqueue(tool_call("dump", call_id=f"f{i}", n=i))
    model.enqueue(text("filled"))
    await agent(Msg("user", "fill the context", "user"))


@pytest.mark.parametrize("provider", ["openai", "anthropic", "dashscope", "ollama"])
async def test_overflow_compacts_once_retries_once_and_succeeds(
    tmp_path: Path, provider: str
) -> None:
    model = FakeChatModel()
    agent, manager = make_agent(tmp_path, model)
    printed: list[str] = []

    async def spy_print(msg: Msg, last: bool = True, **kw: Any) -> None:
        printed.append(msg.get_text_content() or "")

    agent.print = spy_print  # type: ignore[method-assign]
    await fill(agent, model, 4)
    memory = manager.memory_of(agent)
    assert memory.compact_summary == ""  # under the threshold so far
    before = len(model.calls)
    model.enqueue(overflow_errors()[provider], text("answer after recovery"))
    reply = await agent(Msg("user", "now answer", "user"))
    assert reply.get_text_content() == "answer after recovery"
    assert len(model.calls) - before == 2  # the failing call and one retry
    first, retry = model.calls[-2]["messages"], model.calls[-1]["messages"]
    assert await COUNTER.count(retry) < await COUNTER.count(first)
    assert memory.compact_summary  # one emergency compaction
    assert sum("emergency compaction" in p for p in printed) == 1
    assert any("compacted" in p for p in printed)


async def test_a_model_that_keeps_failing_surfaces_the_original_error(tmp_path: Path) -> None:
    model = FakeChatModel()
    agent, manager = make_agent(tmp_path, model)
    added: list[str] = []
    memory = manager.memory_of(agent)
    original_add = memory.add

    async def spy_add(memories: Any, *args: Any, **kwargs: Any) -> None:
        for msg in [memories] if isinstance(memories, Msg) else memories or []:
            added.append(msg.id)
        await original_add(memories, *args, **kwargs)

    memory.add = spy_add  # type: ignore[method-assign]
    await fill(agent, model, 4)
    error = overflow_errors()["openai"]
    before = len(model.calls)
    model.enqueue(error, overflow_errors()["openai"], text("never reached"))
    with pytest.raises(openai.BadRequestError) as info:
        await agent(Msg("user", "now answer", "user"))
    assert info.value is error
    assert any(
        "still says the prompt is too long" in note for note in getattr(error, "__notes__", [])
    )
    assert len(model.calls) - before == 2  # no loop
    stored = [m.id for m in manager.dialog.read()[0]]
    live = [m.id for m in memory.messages()]
    assert sorted(stored + live) == sorted(set(added)) and len(stored + live) == len(
        set(stored + live)
    )


async def test_usage_is_read_from_streamed_responses(tmp_path: Path) -> None:
    model = ReportingModel(2.0, stream=True)
    agent, manager = make_agent(tmp_path, model)
    model.enqueue(text("hello"))
    await agent(Msg("user", "hi", "user"))
    assert manager.memory_of(agent).calibration["fake-model"] > 1.0


def test_guarded_model_copies_and_delegates() -> None:
    import copy

    from agentscope_ctx._guard import GuardedModel

    async def recover() -> None:
        return None

    inner = FakeChatModel(name="m")
    inner.extra_setting = 7  # type: ignore[attr-defined]
    guard = GuardedModel(inner, on_usage=lambda _: None, recover=recover)
    assert guard.extra_setting == 7 and guard.model_name == "m"
    assert copy.deepcopy(guard).inner.model_name == "m"


# -- issue 11, item 6: calibration from reports that cover only part of the prompt ---------


class PartialProvider(FakeChatModel):
    """A scripted provider with its own count of each prompt (the count it enforces),
    which it reports only in part, as real providers do through AgentScope.

    `mode`:
      "uncached": counts `factor` times tiktoken's count of the whole prompt, caches the
        prompt prefix shared with the previous call and reports only the uncached input
        tokens, without the cache fields (AgentScope's Anthropic model passes on
        `input_tokens` alone);
      "no_schemas": counts `factor` times the messages and does not count the tool schemas.
    """

    def __init__(self, mode: str, factor: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mode, self.factor = mode, factor
        self.counts: list[int] = []
        """The provider's own count of every prompt it received."""
        self.previous: list[dict[str, Any]] = []

    async def __call__(
        self, messages: list[dict[str, Any]], tools: Any = None, **kwargs: Any
    ) -> Any:
        if self.mode == "no_schemas":
            full = reported = round(self.factor * await COUNTER.count(messages))
        else:
            full = round(self.factor * await COUNTER.count(messages, tools=tools))
            shared = 0
            while (
                shared < min(len(messages), len(self.previous))
                and messages[shared] == self.previous[shared]
            ):
                shared += 1
            cached = (
                round(self.factor * await COUNTER.count(messages[:shared], tools=tools))
                if shared
                else 0
            )
            reported = max(full - cached, 1)
        self.previous = messages
        self.counts.append(full)
        response = await super().__call__(messages, tools=tools, **kwargs)
        assert isinstance(response, ChatResponse)
        response.usage = ChatUsage(input_tokens=reported, output_tokens=10, time=0.1)
        return response


@pytest.mark.parametrize(("mode", "factor"), [("uncached", 1.2), ("no_schemas", 1.3)])
async def test_i11_06_partial_usage_reports_never_let_the_prompt_exceed_the_budget(
    tmp_path: Path, mode: str, factor: float
) -> None:
    model = PartialProvider(mode, factor)
    agent, manager = make_agent(tmp_path, model)
    for i in range(62):
        model.enqueue(tool_call("dump", call_id=f"d{i}", n=i))
    model.enqueue(text("all dumped"))
    reply = await agent(Msg("user", "dump everything", "user"))
    assert reply.get_text_content() == "all dumped"
    assert len(model.counts) >= 61
    assert manager.memory_of(agent).compact_summary  # the session did compact
    assert max(model.counts) <= BUDGET, model.counts
