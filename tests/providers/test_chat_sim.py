"""The rules of the offline Chat Completions simulator (`tests/support/chat_sim.py`), one test each,
through the ``openai`` SDK's own client (and raw HTTP for the event stream); then AgentScope's
real model classes on it, a two-step tool loop each: 2.x `OpenAIChatModel`, `DashScopeChatModel`
(built as the project builds them), `DeepSeekChatModel` with thinking, `OpenAIChatModel` reading
``reasoning_content``, and 1.x `OpenAIChatModel`. No sleeps: the caches' lifetimes run on a
`ManualClock`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from tests.support.chat_sim import (
    ChatSim,
    ManualClock,
    Price,
    Turn,
    encode,
    message_blocks,
    price_for,
    serve,
)
from tests.support.lines import IS_1X, requires_1x

LONG = " ".join(
    f"rule {i}: keep the invoices of tenant {i % 7} for {i % 11} years." for i in range(120)
)
"""A system prompt of some 1,800 tokens: over OpenAI's and DashScope's 1,024-token minimum."""
SHORT = " ".join(f"note {i} on tenant {i % 5}." for i in range(60))
"""Some 400 tokens: under 1,024, over DashScope's implicit 256."""
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a word up.",
            "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
        },
    }
]
requires_2x = pytest.mark.skipif(IS_1X, reason="AgentScope 2.x only: its model classes")


def ok(body: dict[str, Any]) -> Turn:
    return Turn(text="ok")


@dataclass
class Refusal:
    """The ``error`` object of a 400."""

    message: str
    type: str
    param: str | None
    code: str | None


@dataclass
class Api:
    sim: ChatSim
    client: openai.OpenAI
    clock: ManualClock
    model: str

    def create(self, **kwargs: Any) -> Any:
        """A ``chat.completions.create`` with the usual model."""
        return self.client.chat.completions.create(**{"model": self.model, **kwargs})

    def reject(self, **kwargs: Any) -> Refusal:
        """The 400 a request gets."""
        with pytest.raises(openai.BadRequestError) as info:
            self.create(**kwargs)
        return Refusal(**info.value.body)  # type: ignore[arg-type]

    def details(self, response: Any) -> dict[str, Any]:
        """The response's ``usage.prompt_tokens_details`` as the wire had it."""
        return dict(response.usage.to_dict()["prompt_tokens_details"])


@contextmanager
def running(
    profile: str, responder: Callable[[dict[str, Any]], Turn] = ok, model: str = "", **kw: Any
) -> Iterator[Api]:
    clock = ManualClock(1_000.0)
    default = {"openai": "gpt-5", "dashscope": "qwen-plus", "deepseek": "deepseek-reasoner"}
    sim = ChatSim(responder, profile=profile, clock=clock, **kw)  # type: ignore[arg-type]
    with serve(sim) as url:
        client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0, timeout=20)
        yield Api(sim, client, clock, model or default[profile])


def conv(*more: dict[str, Any], system: str = LONG) -> list[dict[str, Any]]:
    """A system prompt, a question, and `more`."""
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "Look up 'cache'."},
        *more,
    ]


def marked(text: str, role: str = "user") -> dict[str, Any]:
    """A message whose one text part carries a cache marker."""
    part = {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}
    return {"role": role, "content": [part]}


def cached(response: Any) -> int:
    return int(response.usage.prompt_tokens_details.cached_tokens)


# -- counting and validation (every profile) ------------------------------------------------------


@pytest.mark.parametrize("profile", ["openai", "dashscope", "deepseek"])
def test_tokens_are_cl100k_over_the_canonical_blocks(profile: str) -> None:
    with running(profile) as api:
        plain = api.create(messages=[{"role": "user", "content": "hello world"}])
        parts = api.create(messages=[marked("hello world")])
        again = api.create(messages=[{"role": "user", "content": "hello world"}])
    assert plain.usage.prompt_tokens == len(encode('{"role": "user"}\nhello world'))
    assert parts.usage.prompt_tokens == again.usage.prompt_tokens == plain.usage.prompt_tokens


def test_messages_must_not_be_empty() -> None:
    with running("openai") as api:
        error = api.reject(messages=[])
    assert error.param == "messages" and "too short" in error.message
    assert api.sim.summary()["rejected"] == 1


def test_a_tool_call_is_answered_before_the_next_message() -> None:
    call = {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    asked = {"role": "assistant", "content": None, "tool_calls": [call]}
    with running("openai") as api:
        error = api.reject(messages=conv(asked, {"role": "user", "content": "well?"}))
        unanswered = api.reject(messages=conv(asked))
        answered = api.create(
            messages=conv(asked, {"role": "tool", "tool_call_id": "call_a", "content": "a cache"})
        )
    assert "did not have response messages: call_a" in error.message
    assert "call_a" in unanswered.message
    assert answered.choices[0].message.content == "ok"


def test_a_tool_message_answers_a_pending_call() -> None:
    with running("dashscope") as api:
        error = api.reject(
            messages=conv({"role": "tool", "tool_call_id": "call_x", "content": "?"})
        )
    assert "must be a response to a preceeding message with 'tool_calls'" in error.message


def test_the_context_window_is_context_length_exceeded() -> None:
    with running("openai", model_window=2_100) as api:
        reserved = api.reject(messages=conv(), max_tokens=500)
        prompt = api.reject(messages=conv(system=LONG + LONG))
        fits = api.create(messages=conv(), max_tokens=100)
    assert reserved.code == "context_length_exceeded" and reserved.type == "invalid_request_error"
    assert reserved.message.startswith("This model's maximum context length is 2100 tokens.")
    assert "in the messages, 500 in the completion" in reserved.message
    assert "your messages resulted in" in prompt.message
    assert fits.usage.prompt_tokens + 100 <= 2_100


def test_dashscope_says_the_range_of_input_length() -> None:
    with running("dashscope", model_window=1_000) as api:
        error = api.reject(messages=conv())
    assert error.code == "invalid_parameter_error"
    assert error.message == (
        "<400> InternalError.Algo.InvalidParameter: Range of input length should be [1, 1000]"
    )


# -- OpenAI's automatic prompt cache --------------------------------------------------------------


def test_openai_caches_prefixes_of_1024_tokens_in_128_steps() -> None:
    with running("openai") as api:
        first = api.create(messages=conv())
        second = api.create(
            messages=conv(
                {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}
            )
        )
    assert cached(first) == 0
    assert cached(second) == first.usage.prompt_tokens // 128 * 128
    assert cached(second) >= 1_024 and cached(second) % 128 == 0


def test_openai_never_caches_a_prompt_under_1024_tokens() -> None:
    with running("openai") as api:
        replies = [api.create(messages=conv(system=SHORT)) for _ in range(3)]
    assert replies[0].usage.prompt_tokens < 1_024
    assert [cached(r) for r in replies] == [0, 0, 0]


def test_openai_caches_the_tools_first() -> None:
    other = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "description": "Changed."}}]
    with running("openai") as api:
        api.create(messages=conv(), tools=TOOLS)
        changed = api.create(messages=conv(), tools=other)
        same = api.create(messages=conv(), tools=other)
    assert cached(changed) == 0  # the tools lead the prefix: a change there misses it all
    assert cached(same) > 1_024


def test_openai_prompt_cache_key_routes_to_its_own_machine() -> None:
    with running("openai") as api:
        a = api.create(messages=conv(), extra_body={"prompt_cache_key": "tenant-a"})
        b = api.create(messages=conv(), extra_body={"prompt_cache_key": "tenant-b"})
        none = api.create(messages=conv())
        a_again = api.create(messages=conv(), extra_body={"prompt_cache_key": "tenant-a"})
    assert [cached(r) for r in (a, b, none)] == [0, 0, 0]
    assert cached(a_again) == a.usage.prompt_tokens // 128 * 128


def test_openai_in_memory_retention_is_5_minutes_of_inactivity() -> None:
    with running("openai") as api:
        api.create(messages=conv())
        api.clock.advance(299)
        kept = api.create(messages=conv())
        api.clock.advance(299)  # the hit above refreshed it
        refreshed = api.create(messages=conv())
        api.clock.advance(301)
        gone = api.create(messages=conv())
    assert cached(kept) > 0 and cached(refreshed) > 0 and cached(gone) == 0


def test_openai_24h_retention_keeps_a_prefix_for_a_day() -> None:
    day = {"prompt_cache_retention": "24h"}
    with running("openai") as api:
        api.create(messages=conv(), extra_body=day)
        api.clock.advance(6 * 3_600)
        kept = api.create(messages=conv())
        api.clock.advance(24 * 3_600 + 1)
        gone = api.create(messages=conv())
        error = api.reject(messages=conv(), extra_body={"prompt_cache_retention": "1h"})
    assert cached(kept) > 0 and cached(gone) == 0
    assert error.param == "prompt_cache_retention"


def test_openai_overflow_spreads_a_busy_prefix_over_machines() -> None:
    with running("openai", overflow_rpm=2) as api:
        hits = [cached(api.create(messages=conv())) for _ in range(5)]
        api.clock.advance(61)
        quiet = cached(api.create(messages=conv()))
    full = hits[1]
    assert hits == [0, full, 0, full, 0]  # machines 0, 0, 1, 1, 2
    assert quiet == full  # the minute passed: machine 0 again


def test_openai_cached_tokens_cost_the_models_cached_price() -> None:
    with running("openai") as api:
        api.create(messages=conv())
        second = api.create(messages=conv())
    with running("openai", model="my-local-model") as guess:
        guess.create(messages=conv())
        guessed = guess.create(messages=conv())
    call = api.sim.calls[1]
    fresh = second.usage.prompt_tokens - cached(second)
    expected = (1.25 * fresh + 0.125 * cached(second) + 10.0 * call.completion_tokens) / 1e6
    assert call.cost_usd == pytest.approx(expected) and call.price_known
    assert price_for("openai", "gpt-5.2-pro") == price_for("openai", "gpt-5")
    unknown = guess.sim.calls[1]
    assert not unknown.price_known and not guess.sim.summary()["price_known"]
    fresh = guessed.usage.prompt_tokens - cached(guessed)
    assert unknown.cost_usd == pytest.approx((fresh + 0.1 * cached(guessed) + 4 * 1) / 1e6)


def test_prices_replace_the_table() -> None:
    with running("openai", prices=Price(input=2.0, output=3.0, cache_read=0.5)) as api:
        reply = api.create(messages=[{"role": "user", "content": "hello world"}])
    call = api.sim.calls[0]
    assert call.cost_usd == pytest.approx((2.0 * reply.usage.prompt_tokens + 3.0 * 1) / 1e6)


def test_summary_adds_up_the_calls() -> None:
    with running("openai") as api:
        api.create(messages=conv())
        api.create(messages=conv())
        api.reject(messages=[])
    summary = api.sim.summary()
    calls = api.sim.calls
    assert summary["calls"] == 3 and summary["rejected"] == 1
    assert summary["prompt_tokens"] == calls[0].prompt_tokens + calls[1].prompt_tokens
    assert summary["cache_read"] == calls[1].cached_tokens
    assert summary["read_ratio"] == pytest.approx(calls[1].cached_tokens / summary["prompt_tokens"])
    assert summary["cost_usd"] == pytest.approx(calls[0].cost_usd + calls[1].cost_usd)
    assert summary["cache_creation"] == 0 and len(api.sim.requests) == 3


# -- Model Studio's explicit and implicit caches --------------------------------------------------


def test_dashscope_explicit_cache_creates_at_a_marker_then_hits() -> None:
    with running("dashscope") as api:
        first = api.create(messages=[marked(LONG, "system"), {"role": "user", "content": "q1"}])
        second = api.create(
            messages=[{"role": "system", "content": LONG}, marked("q2 " + SHORT + SHORT)]
        )
    system = api.sim.calls[0].breakpoints[0].prefix_tokens
    d1, d2 = api.details(first), api.details(second)
    assert d1 == {
        "cached_tokens": 0,
        "cache_creation_input_tokens": system,
        "cache_creation": {"ephemeral_5m_input_tokens": system},
        "cache_type": "ephemeral",
    }
    assert d2["cached_tokens"] == system  # a string content is the same text: the same prefix
    whole = api.sim.calls[1].breakpoints[0].prefix_tokens
    assert d2["cache_creation_input_tokens"] == whole - system  # only the increment is billed


def test_dashscope_explicit_cache_needs_1024_tokens() -> None:
    with running("dashscope") as api:
        first = api.create(messages=[marked(SHORT, "system"), {"role": "user", "content": "q"}])
        second = api.create(messages=[marked(SHORT, "system"), {"role": "user", "content": "q"}])
    assert api.details(first)["cache_creation_input_tokens"] == 0
    assert api.details(second)["cached_tokens"] == 0


@pytest.mark.parametrize(("between", "hit"), [(20, True), (21, False)])
def test_dashscope_looks_back_20_blocks_from_a_marker(between: int, hit: bool) -> None:
    filler = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"}
        for i in range(between - 1)
    ]
    with running("dashscope") as api:
        api.create(messages=[marked(LONG, "system"), {"role": "user", "content": "q"}])
        later = api.create(
            messages=[
                {"role": "system", "content": LONG},
                {"role": "user", "content": "q"},
                *filler,
                marked("and now?"),
            ]
        )
    system = api.sim.calls[0].breakpoints[0].prefix_tokens
    whole = later.usage.prompt_tokens
    assert api.details(later)["cached_tokens"] == (system if hit else 0)
    assert api.details(later)["cache_creation_input_tokens"] == whole - (system if hit else 0)


def test_dashscope_only_the_last_four_markers_take_effect() -> None:
    five = [marked(f"part {i}: " + SHORT) for i in range(5)]
    with running("dashscope") as api:
        api.create(messages=five)
    with running("dashscope", too_many_markers="reject") as strict:
        error = strict.reject(messages=five)
    assert [b.effective for b in api.sim.calls[0].breakpoints] == [False, True, True, True, True]
    assert [b.message for b in api.sim.calls[0].breakpoints] == [0, 1, 2, 3, 4]
    assert "at most 4 cache_control markers" in error.message


def test_dashscope_explicit_cache_lives_5_minutes_reset_on_a_hit() -> None:
    messages = [marked(LONG, "system"), {"role": "user", "content": "q"}]
    with running("dashscope") as api:
        api.create(messages=messages)
        api.clock.advance(299)
        kept = api.create(messages=messages)
        api.clock.advance(299)
        reset = api.create(messages=messages)
        api.clock.advance(301)
        gone = api.create(messages=messages)
    assert api.details(kept)["cached_tokens"] > 0 and api.details(reset)["cached_tokens"] > 0
    assert api.details(gone)["cached_tokens"] == 0
    assert api.details(gone)["cache_creation_input_tokens"] > 0  # made again


def test_dashscope_explicit_billing_is_125_percent_to_create_10_percent_to_hit() -> None:
    with running("dashscope") as api:
        api.create(messages=[marked(LONG, "system"), {"role": "user", "content": "q"}])
        api.create(messages=[{"role": "system", "content": LONG}, marked("q2 " + SHORT + SHORT)])
    call = api.sim.calls[1]
    fresh = call.prompt_tokens - call.cached_tokens - call.cache_creation_tokens
    price = price_for("dashscope", "qwen-plus")
    expected = (
        price.input * (fresh + 0.1 * call.cached_tokens + 1.25 * call.cache_creation_tokens)
        + price.output * call.completion_tokens
    ) / 1e6
    assert call.cost_usd == pytest.approx(expected) and call.cache_creation_tokens > 0


def test_dashscope_implicit_cache_without_markers() -> None:
    with running("dashscope") as api:
        first = api.create(messages=conv(system=SHORT))
        second = api.create(messages=conv({"role": "assistant", "content": "ok"}, system=SHORT))
        tiny = [api.create(messages=[{"role": "user", "content": "hi"}]) for _ in range(2)]
    assert api.details(first) == {"cached_tokens": 0}  # no creation charge, no cache_type
    assert api.details(second) == {"cached_tokens": first.usage.prompt_tokens // 128 * 128}
    assert 256 <= api.details(second)["cached_tokens"] < 1_024
    assert api.details(tiny[1])["cached_tokens"] == 0  # under 256 tokens
    call, price = api.sim.calls[1], price_for("dashscope", "qwen-plus")
    fresh = call.prompt_tokens - call.cached_tokens
    expected = price.input * (fresh + 0.2 * call.cached_tokens) + 1.2 * call.completion_tokens
    assert call.cost_usd == pytest.approx(expected / 1e6)


def test_dashscope_explicit_and_implicit_caches_are_exclusive() -> None:
    with running("dashscope") as api:
        api.create(messages=conv())  # fills the implicit cache
        explicit = api.create(messages=[*conv()[:1], marked("Look up 'cache'.")])
    assert api.details(explicit)["cached_tokens"] == 0
    assert api.details(explicit)["cache_creation_input_tokens"] == explicit.usage.prompt_tokens


def test_dashscope_a_marker_caches_the_tools_too() -> None:
    messages = [marked(LONG, "system"), {"role": "user", "content": "q"}]
    other = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "name": "find"}}]
    with running("dashscope") as api:
        api.create(messages=messages, tools=TOOLS)
        same = api.create(messages=messages, tools=TOOLS)
        changed = api.create(messages=messages, tools=other)
    with_tools = api.sim.calls[0].breakpoints[0].prefix_tokens
    assert with_tools > len(encode('{"role": "system"}\n' + LONG))  # the tools lead the prefix
    assert api.details(same)["cached_tokens"] == with_tools
    assert api.details(changed)["cached_tokens"] == 0


def test_dashscope_only_ephemeral_markers() -> None:
    part = {"type": "text", "text": "q", "cache_control": {"type": "persistent"}}
    with running("dashscope") as api:
        error = api.reject(messages=[{"role": "user", "content": [part]}])
    assert error.code == "invalid_parameter_error" and "only 'ephemeral'" in error.message


def test_openai_ignores_markers() -> None:
    with running("openai") as api:
        api.create(messages=[marked(LONG, "system"), {"role": "user", "content": "q"}])
    (mark,) = api.sim.calls[0].breakpoints
    assert not mark.effective and api.sim.calls[0].cache_creation_tokens == 0


# -- DeepSeek's reasoning_content -----------------------------------------------------------------


def thinking(body: dict[str, Any]) -> Turn:
    return Turn(text="It is a cache.", reasoning="The user wants a definition.")


def test_deepseek_answers_carry_reasoning_content() -> None:
    with running("deepseek", thinking) as api:
        reply = api.create(messages=conv())
    assert reply.choices[0].message.reasoning_content == "The user wants a definition."
    assert reply.usage.completion_tokens_details.reasoning_tokens == len(
        encode("The user wants a definition.")
    )


def test_deepseek_r1_rejects_reasoning_content_sent_back() -> None:
    sent = {"role": "assistant", "content": "It is a cache.", "reasoning_content": "The user..."}
    with running("deepseek", thinking) as api:
        error = api.reject(messages=conv(sent, {"role": "user", "content": "more"}))
        stripped = {k: v for k, v in sent.items() if k != "reasoning_content"}
        fine = api.create(messages=conv(stripped, {"role": "user", "content": "more"}))
    assert "reasoning_content" in error.message and error.param == "messages[2].reasoning_content"
    assert fine.choices[0].message.content == "It is a cache."


def test_deepseek_thinking_mode_needs_reasoning_content_in_a_tool_loop() -> None:
    call = {"id": "call_a", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    result = {"role": "tool", "tool_call_id": "call_a", "content": "a cache"}
    asked = {"role": "assistant", "content": None, "tool_calls": [call]}
    chat = {"role": "assistant", "content": "Hello."}
    with running("deepseek", thinking, reasoning_rule="tool_loop") as api:
        error = api.reject(messages=conv(asked, result))
        empty = api.create(messages=conv({**asked, "reasoning_content": ""}, result))
        full = api.create(messages=conv({**asked, "reasoning_content": "Look it up."}, result))
        plain = api.create(messages=conv(chat, {"role": "user", "content": "more"}))
        ignored = api.create(
            messages=conv(
                {**chat, "reasoning_content": "Greet."}, {"role": "user", "content": "more"}
            )
        )
    assert error.message == (
        "The `reasoning_content` in the thinking mode must be passed back to the API."
    )
    assert full.usage.prompt_tokens > empty.usage.prompt_tokens  # counted in a tool loop
    assert ignored.usage.prompt_tokens == plain.usage.prompt_tokens  # ignored outside one


def test_deepseek_disk_cache_hits_whole_units() -> None:
    turns = iter(
        [
            Turn(tool_calls=[("lookup", {"word": "cache"})], reasoning="Look it up."),
            Turn(text="A cache."),
        ]
    )
    with running("deepseek", lambda body: next(turns, Turn(text="?"))) as api:
        first = api.create(messages=conv(), tools=TOOLS)
        echo = first.choices[0].message.model_dump(exclude_none=True)
        echo.pop("reasoning_content")  # R1: never sent back
        result = {"role": "tool", "tool_call_id": echo["tool_calls"][0]["id"], "content": "a cache"}
        second = api.create(messages=conv(echo, result), tools=TOOLS)
        other = api.create(
            messages=[{"role": "system", "content": LONG}, {"role": "user", "content": "Other."}],
            tools=TOOLS,
        )
    wire = second.usage.model_dump()
    tool = sum(len(b.tokens) for b in message_blocks(3, result, False))
    assert first.usage.model_dump()["prompt_cache_hit_tokens"] == 0
    assert wire["prompt_cache_hit_tokens"] == second.usage.prompt_tokens - tool  # input + output
    assert (
        wire["prompt_cache_miss_tokens"] == tool
        and cached(second) == wire["prompt_cache_hit_tokens"]
    )
    assert other.usage.model_dump()["prompt_cache_hit_tokens"] == 0  # no whole unit matches


# -- server-sent events ---------------------------------------------------------------------------


def test_a_stream_sends_deltas_in_pieces_then_usage_then_done() -> None:
    def answer(body: dict[str, Any]) -> Turn:
        return Turn(
            text="A cache keeps things.",
            tool_calls=[("lookup", {"word": "cache"})],
            reasoning="Hm, think.",
        )

    with running("deepseek", answer) as api:
        body = {
            "model": "deepseek-reasoner",
            "messages": conv(),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        with httpx.stream("POST", f"{api.client.base_url}chat/completions", json=body) as response:
            lines = [line for line in response.iter_lines() if line]
        stream = api.create(messages=conv(), stream=True, stream_options={"include_usage": True})
        chunks = list(stream)
    data = [line.removeprefix("data: ") for line in lines]
    assert response.headers["content-type"] == "text/event-stream" and data[-1] == "[DONE]"
    events = [json.loads(d) for d in data[:-1]]
    usage = events[-1]
    assert usage["choices"] == [] and usage["usage"]["prompt_tokens"] > 0
    assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"
    deltas = [e["choices"][0]["delta"] for e in events[:-2]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert sum("reasoning_content" in d for d in deltas) == 2
    assert sum("content" in d for d in deltas[1:]) == 3  # "A cache keeps things." in 7s
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join(
        getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices
    )
    arguments = "".join(
        c.choices[0].delta.tool_calls[0].function.arguments or ""
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls
    )
    assert (text, reasoning, json.loads(arguments)) == (
        "A cache keeps things.",
        "Hm, think.",
        {"word": "cache"},
    )
    assert (
        chunks[-1].usage is not None
        and chunks[-1].usage.prompt_tokens == usage["usage"]["prompt_tokens"]
    )


def test_a_stream_without_include_usage_has_no_usage_chunk() -> None:
    with running("openai") as api:
        chunks = list(api.create(messages=conv(), stream=True))
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)


# -- AgentScope's real models ---------------------------------------------------------------------


async def _final(result: Any) -> Any:
    """The whole answer: the response, or a stream's last (accumulated) chunk."""
    if not isinstance(result, AsyncIterator):
        return result
    last = None
    async for chunk in result:
        last = chunk
    return last


def loop_turns(reasoning: str | None = None) -> Callable[[dict[str, Any]], Turn]:
    """Call `lookup`, then answer from its result."""

    def respond(body: dict[str, Any]) -> Turn:
        if body["messages"][-1]["role"] == "tool":
            return Turn(text="A cache is a store of answers.", reasoning=reasoning)
        return Turn(tool_calls=[("lookup", {"word": "cache"})], reasoning=reasoning)

    return respond


async def two_step_v2(model: Any, system: str = LONG) -> tuple[Any, Any]:
    """A 2.x model's tool loop: it calls `lookup`, gets its result, answers."""
    from agentscope.message import AssistantMsg, SystemMsg, ToolCallBlock, ToolResultBlock, UserMsg

    history = [SystemMsg("system", system), UserMsg("user", "What is a cache?")]
    first = await _final(await model(history, tools=TOOLS))
    (call,) = [b for b in first.content if isinstance(b, ToolCallBlock)]
    assert call.name == "lookup" and json.loads(call.input) == {"word": "cache"}
    result = ToolResultBlock(
        id=call.id, name=call.name, output="a store of answers", state="success"
    )
    history.append(AssistantMsg("assistant", [*first.content, result]))
    second = await _final(await model(history, tools=TOOLS))
    return first, second


def _fields(provider: str, url: str, stream: bool, model: str) -> dict[str, Any]:
    return {
        "provider": provider,
        "model_name": model,
        "base_url": url,
        "api_key_env": "SIM_API_KEY" if provider == "dashscope" else None,
        "stream": stream,
        "client_kwargs": {"max_retries": 0, "timeout": 20},
    }


@requires_2x
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_agentscope2_openai_model_reads_cached_tokens(stream: bool) -> None:
    from agentscope.model import OpenAIChatModel

    from agentscope_ctx._providers import build_model

    sim = ChatSim(loop_turns(), profile="openai", clock=ManualClock())
    with serve(sim) as url:
        model, _ = build_model(_fields("openai", url, stream, "gpt-5"))
        assert isinstance(model, OpenAIChatModel)
        first, second = await two_step_v2(model)
    assert second.content[-1].text == "A cache is a store of answers."
    assert first.usage.cache_input_tokens == 0
    assert second.usage.cache_input_tokens == sim.calls[1].cached_tokens > 1_024
    assert second.usage.input_tokens == sim.calls[1].prompt_tokens
    assert [m["role"] for m in sim.requests[1]["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
    ]


@requires_2x
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_agentscope2_dashscope_model_on_the_compatible_mode(
    stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentscope.model import DashScopeChatModel

    from agentscope_ctx._providers import build_model

    monkeypatch.setenv("SIM_API_KEY", "sk-test")
    sim = ChatSim(loop_turns(), profile="dashscope", clock=ManualClock())
    with serve(sim) as url:
        native = url.removesuffix("/v1") + "/api/v1"  # the 1.x form: turned into compatible-mode
        model, _ = build_model(_fields("dashscope", native, stream, "qwen-plus"))
        assert isinstance(model, DashScopeChatModel)
        assert str(model.client.base_url).endswith("/compatible-mode/v1/")
        first, second = await two_step_v2(model)
    assert second.content[-1].text == "A cache is a store of answers."
    # AgentScope places no markers: the implicit cache, billed 0.2x, read into the usage
    assert all(call.breakpoints == [] for call in sim.calls)
    assert second.usage.cache_input_tokens == sim.calls[1].cached_tokens > 1_024
    assert sim.calls[1].cache_creation_tokens == 0


@requires_2x
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_agentscope2_deepseek_model_sends_reasoning_back_in_a_tool_loop(stream: bool) -> None:
    from agentscope.credential import DeepSeekCredential
    from agentscope.message import ThinkingBlock
    from agentscope.model import DeepSeekChatModel

    sim = ChatSim(
        loop_turns("Look the word up first."),
        profile="deepseek",
        clock=ManualClock(),
        reasoning_rule="tool_loop",
    )
    with serve(sim) as url:
        model = DeepSeekChatModel(
            credential=DeepSeekCredential(api_key="sk-test", base_url=url),
            model="deepseek-reasoner",
            parameters=DeepSeekChatModel.Parameters(thinking_enable=True),
            stream=stream,
            max_retries=0,
        )
        first, second = await two_step_v2(model)
    (thought,) = [b for b in first.content if isinstance(b, ThinkingBlock)]
    assert thought.thinking == "Look the word up first."
    assert sim.requests[1]["messages"][2]["reasoning_content"] == "Look the word up first."
    assert second.usage.cache_input_tokens == sim.calls[1].cached_tokens > 0  # the disk cache


@requires_2x
async def test_agentscope2_deepseek_model_breaks_the_r1_rule() -> None:
    """AgentScope 2.x's DeepSeek formatter always sends ``reasoning_content`` back: under R1's
    rule the second step is a 400, so stripping it is the package's job there."""
    from agentscope.credential import DeepSeekCredential
    from agentscope.model import DeepSeekChatModel

    sim = ChatSim(loop_turns("Look the word up first."), profile="deepseek", clock=ManualClock())
    with serve(sim) as url:
        model = DeepSeekChatModel(
            credential=DeepSeekCredential(api_key="sk-test", base_url=url),
            model="deepseek-reasoner",
            stream=False,
            max_retries=0,
        )
        with pytest.raises(openai.BadRequestError, match="reasoning_content"):
            await two_step_v2(model)
    assert [c.status for c in sim.calls] == [200, 400]


@requires_2x
async def test_agentscope2_openai_model_reads_and_drops_reasoning_content() -> None:
    from agentscope.message import ThinkingBlock
    from agentscope.model import OpenAIChatModel

    from agentscope_ctx._providers import build_model

    sim = ChatSim(loop_turns("Look the word up first."), profile="deepseek", clock=ManualClock())
    with serve(sim) as url:
        model, _ = build_model(_fields("openai", url, True, "deepseek-reasoner"))
        assert isinstance(model, OpenAIChatModel)
        first, second = await two_step_v2(model)
    assert [b.thinking for b in first.content if isinstance(b, ThinkingBlock)] == [
        "Look the word up first."
    ]
    assert all("reasoning_content" not in m for m in sim.requests[1]["messages"])
    assert second.content[-1].text == "A cache is a store of answers."
    assert [c.status for c in sim.calls] == [200, 200]


@requires_1x("AgentScope 1.x's OpenAIChatModel in a tool loop")
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_agentscope1_openai_model_reads_cached_tokens(stream: bool) -> None:
    from agentscope.formatter import OpenAIChatFormatter
    from agentscope.message import Msg, ToolResultBlock
    from agentscope.model import OpenAIChatModel

    sim = ChatSim(loop_turns(), profile="openai", clock=ManualClock())
    with serve(sim) as url:
        model = OpenAIChatModel(
            "gpt-5",
            api_key="sk-test",
            client_kwargs={"base_url": url, "max_retries": 0},
            stream=stream,
        )
        formatter = OpenAIChatFormatter()
        history = [Msg("system", LONG, "system"), Msg("user", "What is a cache?", "user")]
        first = await _final(await model(await formatter.format(history), tools=TOOLS))
        (call,) = [b for b in first.content if b["type"] == "tool_use"]
        assert call["name"] == "lookup" and call["input"] == {"word": "cache"}
        history.append(Msg("assistant", [call], "assistant"))
        result = ToolResultBlock(
            type="tool_result", id=call["id"], name="lookup", output="a store of answers"
        )
        history.append(Msg("system", [result], "system"))
        second = await _final(await model(await formatter.format(history), tools=TOOLS))
    assert second.content[-1]["text"] == "A cache is a store of answers."
    details = second.usage.metadata.prompt_tokens_details
    assert details.cached_tokens == sim.calls[1].cached_tokens > 1_024
    assert second.usage.input_tokens == sim.calls[1].prompt_tokens
