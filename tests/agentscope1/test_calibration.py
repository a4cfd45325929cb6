"""Trusting the provider through the 1.x adapter: calibration from reported usage, and recovery
from overflow errors, on a ReActAgent. The line-neutral part is `test_calibration_math.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("calibration and overflow recovery around a ReActAgent's model"),
        allow_module_level=True,
    )

import anthropic
import openai
from agentscope.agent import ReActAgent
from agentscope.message import Msg, TextBlock
from agentscope.model import ChatResponse
from agentscope.model._model_usage import ChatUsage
from dashscope.api_entities.dashscope_response import GenerationUsage
from openai.types.completion_usage import CompletionUsage

from agentscope_ctx import ContextConfig, ContextManager, ContextMemory, TokenCounter
from agentscope_ctx.cli import main as cli_main
from agentscope_ctx.core.tokens._calibration import Calibration, PromptUsage
from agentscope_ctx.stores._steps_file import read_steps
from tests.core.test_calibration_math import http_response, overflow_errors
from tests.support.crash_session import spy_on_add
from tests.support.fakes import FakeChatModel, text, tool_call
from tests.support.react1 import react, text_tools

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


def dump(n: int) -> str:
    """Dump a chunk of data.

    Args:
        n (int): which chunk.
    """
    return "".join(f"record {n}-{i}: value {i * 7} status ok\n" for i in range(120))


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
    agent = react(model, text_tools(dump), sys_prompt="You dump data.", max_iters=100)
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
    # in the steps record, for the viewer and export (it was left out)
    steps = [r for p in (tmp_path / "usage" / "steps").rglob("*.jsonl") for r in read_steps(p)]
    assert [r["call"] for r in steps if r["compacted"]] == [False]
    assert any("compacted" in p for p in printed)


async def test_a_model_that_keeps_failing_surfaces_the_original_error(tmp_path: Path) -> None:
    model = FakeChatModel()
    agent, manager = make_agent(tmp_path, model)
    added: list[str] = []
    memory = manager.memory_of(agent)
    spy_on_add(memory, added.append)
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

    from agentscope_ctx.models._guard import GuardedModel

    async def recover(error: Exception) -> None:
        return None

    inner = FakeChatModel(name="m")
    inner.extra_setting = 7  # type: ignore[attr-defined]
    guard = GuardedModel(inner, on_usage=lambda _: None, recover=recover)
    assert guard.extra_setting == 7 and guard.model_name == "m"
    assert copy.deepcopy(guard).inner.model_name == "m"


# -- issue 11, item 6: calibration from reports that cover only part of the prompt ---------


class PartialProvider(FakeChatModel):
    """A scripted provider with its own count of each prompt (the count it enforces),
    reported the way AgentScope's model classes pass it on.

    `mode`:
      "uncached": counts `factor` times tiktoken's count of the whole prompt, caches the
        prompt prefix shared with the previous call and reports only the uncached input
        tokens in `ChatUsage.input_tokens`, without the raw usage (what AgentScope's
        Anthropic model passes on);
      "cache_fields": the same, with the raw Anthropic usage in `ChatUsage.metadata`
        (`cache_read_input_tokens`);
      "no_schemas": counts `factor` times the messages and not the tool schemas.
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
        metadata: object = None
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
            if self.mode == "cache_fields":
                metadata = anthropic.types.Usage(
                    input_tokens=reported,
                    output_tokens=10,
                    cache_read_input_tokens=full - reported,
                    cache_creation_input_tokens=0,
                )
        self.previous = messages
        self.counts.append(full)
        response = await super().__call__(messages, tools=tools, **kwargs)
        assert isinstance(response, ChatResponse)
        response.usage = ChatUsage(
            input_tokens=reported, output_tokens=10, time=0.1, metadata=metadata
        )
        return response


async def dump_session(agent: ReActAgent, model: FakeChatModel, calls: int, tag: str) -> None:
    for i in range(calls):
        model.enqueue(tool_call("dump", call_id=f"{tag}{i}", n=i))
    model.enqueue(text("all dumped"))
    reply = await agent(Msg("user", "dump everything", "user"))
    assert reply.get_text_content() == "all dumped"


@pytest.mark.parametrize(
    ("mode", "factor"), [("uncached", 1.2), ("cache_fields", 1.2), ("no_schemas", 1.3)]
)
async def test_i11_06_partial_usage_reports_never_let_the_prompt_exceed_the_budget(
    tmp_path: Path, mode: str, factor: float
) -> None:
    model = PartialProvider(mode, factor)
    agent, manager = make_agent(tmp_path, model)
    await dump_session(agent, model, 62, "d")
    assert len(model.counts) >= 61
    memory = manager.memory_of(agent)
    assert memory.compact_summary  # the session did compact
    assert max(model.counts) <= BUDGET, model.counts
    learned = memory.calibration["fake-model"]
    if mode == "cache_fields":  # complete reports: the provider's factor is learned
        assert factor * 0.9 < learned < factor * 1.1
    else:  # lower bounds only: never below 1.0
        assert learned >= 1.0


# -- issue 11, item 7: the window a context-length error states ----------------------------

WINDOW = 8192


def window_error(style: str, prompt: int) -> Exception:
    if style == "openai":
        message = (
            f"This model's maximum context length is {WINDOW} tokens. However, your "
            f"messages resulted in {prompt} tokens. Please reduce the length of the messages."
        )
        return openai.BadRequestError(
            f"Error code: 400 - {message}",
            response=http_response(),
            body={"error": {"message": message, "code": "context_length_exceeded"}},
        )
    if style == "anthropic":
        return anthropic.BadRequestError(
            f"Error code: 400 - prompt is too long: {prompt} tokens > {WINDOW} maximum",
            response=http_response(),
            body={"type": "error", "error": {"type": "invalid_request_error"}},
        )
    return RuntimeError(
        '{"status_code": 400, "code": "InvalidParameter", "message": "<400> '
        f'InternalError.Algo.InvalidParameter: Range of input length should be [1, {WINDOW}]"}}'
    )


class WindowProvider(FakeChatModel):
    """A provider with a window of `WINDOW` tokens (tiktoken's count here), whatever the
    config says: it refuses a longer prompt with its own error, and reports usage as
    AgentScope's model class for it passes it on."""

    def __init__(self, style: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.style = style
        self.counts: list[int] = []
        self.overflows = 0

    async def __call__(
        self, messages: list[dict[str, Any]], tools: Any = None, **kwargs: Any
    ) -> Any:
        count = await COUNTER.count(messages, tools=tools)
        self.counts.append(count)
        if count > WINDOW:
            self.overflows += 1
            raise window_error(self.style, count)
        response = await super().__call__(messages, tools=tools, **kwargs)
        assert isinstance(response, ChatResponse)
        metadata: object = {
            "openai": CompletionUsage(
                prompt_tokens=count, completion_tokens=10, total_tokens=count + 10
            ),
            "anthropic": None,
            "dashscope": GenerationUsage(input_tokens=count, output_tokens=10),
        }[self.style]
        response.usage = ChatUsage(
            input_tokens=count, output_tokens=10, time=0.1, metadata=metadata
        )
        return response


@pytest.mark.parametrize("style", ["openai", "anthropic", "dashscope"])
async def test_i11_07_a_stated_window_lowers_the_budget_for_the_session(
    tmp_path: Path, style: str
) -> None:
    model = WindowProvider(style)
    agent, manager = make_agent(tmp_path, model, budget=16_000)
    await dump_session(agent, model, 45, "a")
    assert model.overflows == 1, model.counts  # the first, then never again
    memory = manager.memory_of(agent)
    assert Calibration(memory, "fake-model", 16_000).budget <= WINDOW * 0.95
    usage = await manager.context_usage(agent)
    assert usage.max_input_tokens <= WINDOW * 0.95

    # persisted with the calibration: a resumed session does not overflow at all
    state = memory.state_dict()
    model2 = WindowProvider(style)
    agent2, manager2 = make_agent(tmp_path / "resumed", model2, budget=16_000)
    manager2.memory_of(agent2).load_state_dict(state)
    await dump_session(agent2, model2, 15, "b")
    assert model2.overflows == 0, model2.counts


async def test_a_failing_usage_callback_does_not_fail_the_call() -> None:
    from agentscope_ctx.models._guard import GuardedModel

    async def recover(error: Exception) -> None:
        return None

    def broken(usage: PromptUsage) -> None:
        raise ValueError("calibration broke")

    inner = ReportingModel(1.5)
    inner.enqueue(text("fine"))
    guard = GuardedModel(inner, on_usage=broken, recover=recover)
    response = await guard([{"role": "user", "content": "hi"}])
    assert isinstance(response, ChatResponse) and response.content[0].get("text") == "fine"


# -- issue 12, item 5: cache visibility -------------------------------------------------


def _answer_with_usage(metadata: dict[str, Any], tokens: int) -> ChatResponse:
    usage = ChatUsage(input_tokens=tokens, output_tokens=3, time=0.1, metadata=metadata)
    return ChatResponse(content=[TextBlock(type="text", text="ok")], usage=usage)


@pytest.mark.parametrize(
    ("metadata", "prompt", "cached"),
    [
        # OpenAI / DashScope: prompt_tokens includes the cached part
        ({"prompt_tokens": 900, "prompt_tokens_details": {"cached_tokens": 600}}, 900, 600),
        # Anthropic: input_tokens excludes the cache reads and writes
        (
            {
                "input_tokens": 100,
                "cache_read_input_tokens": 700,
                "cache_creation_input_tokens": 50,
            },
            850,
            700,
        ),
    ],
    ids=["openai", "anthropic"],
)
async def test_i12_05_cache_reads_reach_context_usage_and_inspect(
    tmp_path: Path,
    metadata: dict[str, Any],
    prompt: int,
    cached: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = FakeChatModel()
    agent, manager = make_agent(tmp_path, model)
    usage = await manager.context_usage(agent)
    assert usage.provider_prompt_tokens is None and usage.cache_reuse is None
    for _ in range(2):
        model.enqueue(_answer_with_usage(metadata, int(metadata.get("input_tokens", prompt))))
        await agent(Msg("user", "hello", "user"))
    usage = await manager.context_usage(agent)
    assert usage.provider_prompt_tokens == prompt
    assert usage.provider_cached_tokens == cached
    assert usage.cache_reuse == pytest.approx(cached / prompt)
    capsys.readouterr()
    assert cli_main(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"; last prompt sent {prompt:,} tokens by the provider's count; " in out
    assert f"count; {cached / prompt:.0%} of the provider's" in out


async def test_a_task_after_the_cache_expired_gets_the_cuts_due(tmp_path: Path) -> None:
    """Issue 45 item 3 on 1.x: a ReActAgent whose provider reports usage; the outputs of the
    first task out of the newest one wait under the trigger while the cache is warm, and go
    into the first call of a task begun after the cache's TTL (`ContextPipeline.cold`)."""
    model = ReportingModel(1.0)
    config = ContextConfig(
        working_dir=tmp_path,
        max_input_tokens=BUDGET * 10,
        token_counter="cl100k_base",
        tool_result={"recent_n": 1, "recent_max_bytes": 8_000, "old_max_bytes": 2_048},
    )
    agent = react(model, text_tools(dump), sys_prompt="You dump data.", max_iters=10)
    manager = ContextManager(config, token_counter=COUNTER)
    manager.attach(agent)
    now = [1_000.0]
    pipeline = manager._bindings[agent.id].pipeline
    assert pipeline.cache_life is None  # a scripted model: no provider, no known cache
    pipeline.clock, pipeline.cache_life = (lambda: now[0]), 300.0  # as Anthropic's

    def sizes() -> list[int]:
        memory = manager.memory_of(agent)
        return [
            len(str(b["output"]))
            for m in memory.messages()
            for b in m.get_content_blocks("tool_result")
        ]

    for task, idle in enumerate((0, 60, 400)):
        now[0] += idle
        for i in range(3):
            model.enqueue(tool_call("dump", call_id=f"t{task}-{i}", n=i))
        model.enqueue(text("dumped"))
        await agent(Msg("user", f"task {task}: dump three", "user"))
        now[0] += 5
        cut = [size < 3_000 for size in sizes()]
        if task < 2:  # warm: the outputs out of the newest one wait, whole
            assert cut == [False] * len(cut), task
        else:  # cold at this task's first call: the 5 outputs then out of the newest one
            assert cut == [True] * 5 + [False] * 4, cut  # were cut there; the rest waits


@pytest.mark.parametrize(
    ("kwargs", "cache", "life"),
    [
        ({}, {}, 600.0),  # OpenAI's automatic cache: 10 minutes
        ({"prompt_cache_retention": "24h"}, {}, 86_400.0),
        ({"extra_body": {"prompt_cache_retention": "24h"}}, {}, 86_400.0),
        ({"prompt_cache_retention": "24h"}, {"cut_when_expired": False}, None),
    ],
)
async def test_the_cache_life_follows_the_models_retention_and_the_switch(
    tmp_path: Path, kwargs: dict[str, Any], cache: dict[str, Any], life: float | None
) -> None:
    """A 1.x `ReActAgent` on AgentScope's real `OpenAIChatModel` (no request made): its
    cache counts as expired after 10 minutes, or after 24 hours where the model's
    `generate_kwargs` ask for `prompt_cache_retention: 24h`; never with
    `cache.cut_when_expired: false` (`ContextPipeline.cache_life`; the cuts it lets go are
    `test_a_task_after_the_cache_expired_gets_the_cuts_due`'s)."""
    from agentscope.model import OpenAIChatModel

    model = OpenAIChatModel("gpt-5", api_key="k", generate_kwargs=kwargs)
    agent = react(model)
    manager = ContextManager(ContextConfig(working_dir=tmp_path, cache=cache))
    manager.attach(agent)
    assert manager._bindings[agent.id].pipeline.cache_life == life
    await manager.close()
