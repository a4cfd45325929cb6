"""The rules of the offline Anthropic simulator (`tests/support/anthropic_sim.py`), one test each,
through the ``anthropic`` SDK's own client; and sessions of AgentScope's real
`AnthropicChatModel` on the installed line (a two-step tool loop with thinking, streamed and
not) that it accepts. No sleeps: the cache's TTLs run on a virtual clock."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import pytest

from agentscope_ctx._line import AGENTSCOPE_VERSION
from tests.support.anthropic_sim import (
    MODELS,
    PRICES,
    AnthropicSim,
    Price,
    Turn,
    serve,
    spec_of,
)
from tests.support.lines import IS_1X, requires_1x
from tests.support.thinking_session import anthropic_model

MODEL = "claude-sonnet-4-5"
LONG = " ".join(f"rule{n} says keep the prefix stable." for n in range(220))
"""A system prompt well over Sonnet 4.5's 1,024-token cache minimum (and under Haiku's 4,096)."""
TOOLS = [
    {
        "name": "lookup",
        "description": "Look a word up.",
        "input_schema": {"type": "object", "properties": {"arg": {"type": "string"}}},
    }
]


class Clock:
    """A virtual clock in seconds, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Api:
    sim: AnthropicSim
    client: anthropic.Anthropic
    clock: Clock

    def create(self, **kwargs: Any) -> Any:
        """A ``messages.create`` with the usual model and length."""
        return self.client.messages.create(**{"model": MODEL, "max_tokens": 4096, **kwargs})

    def reject(self, body: dict[str, Any]) -> str:
        """The message of the 400 the simulator answers to the raw request `body`."""
        with pytest.raises(anthropic.BadRequestError) as info:
            self.client.post("/v1/messages", cast_to=object, body=body)
        error = info.value.body
        assert isinstance(error, dict) and error["type"] == "error"
        assert error["error"]["type"] == "invalid_request_error"
        assert self.sim.calls[-1].status == 400
        return str(error["error"]["message"])


@pytest.fixture
def api() -> Iterator[Api]:
    clock = Clock()
    sim = AnthropicSim(lambda body: Turn(text="ok"), clock=clock)
    with serve(sim) as url:
        yield Api(sim, anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0), clock)


def body(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 4096, "messages": list(messages), **fields}


def user(*content: Any) -> dict[str, Any]:
    """A user message: one string, or blocks."""
    if len(content) == 1 and isinstance(content[0], str):
        return {"role": "user", "content": content[0]}
    return {"role": "user", "content": list(content)}


def assistant(*content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content)}


def text(words: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": words, **extra}


def use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "lookup", "input": {"arg": "x"}}


def result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "x means y"}


def blocks(message: Any) -> list[dict[str, Any]]:
    """A response's content as request blocks."""
    return [block.model_dump(exclude_none=True) for block in message.content]


EPHEMERAL = {"type": "ephemeral"}
CACHED_SYSTEM = [text(LONG, cache_control=EPHEMERAL)]

# --------------------------------------------------------------------------------------------
# Rule 1: validation
# --------------------------------------------------------------------------------------------

LOOP = (user("hi"), assistant(use("toolu_a")))
REFUSED = {
    "no model": ({"max_tokens": 10, "messages": [user("hi")]}, "model: Field required"),
    "no max_tokens": ({"model": MODEL, "messages": [user("hi")]}, "max_tokens: Field required"),
    "negative max_tokens": (body(user("hi"), max_tokens=-1), "greater than or equal to 1"),
    "pre-warm streamed": (body(user("hi"), max_tokens=0, stream=True), "max_tokens: 0"),
    "no messages": (body(), "at least 1 item"),
    "a system role": (body(user("hi"), {"role": "system", "content": "x"}), "messages.1.role"),
    "assistant first": (body(assistant(text("hi"))), 'first message must use the "user" role'),
    "an empty text": (body(user(text(""))), "text content blocks must be non-empty"),
    "empty content": (body(user("")), "messages.0: all messages must have non-empty content"),
    "unanswered tool_use": (
        body(*LOOP, user("and?")),
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_a.",
    ),
    "tool_result not first": (
        body(*LOOP, user(text("here"), result("toolu_a"))),
        "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message.",
    ),
    "a tool_result for no tool_use": (
        body(user(result("toolu_x"))),
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_x.",
    ),
    "answered a message late": (
        body(*LOOP, user("wait"), assistant(text("ok")), user(result("toolu_a"))),
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after",
    ),
    "duplicate tool_use ids": (
        body(*LOOP, user(result("toolu_a")), assistant(use("toolu_a"))),
        "messages.3.content.0: `tool_use` ids must be unique",
    ),
    "duplicate tool names": (body(user("hi"), tools=TOOLS * 2), "Tool names must be unique."),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_validation_refuses_what_the_api_refuses(api: Api, case: str) -> None:
    request, expected = REFUSED[case]
    assert expected in api.reject(request)
    assert api.sim.requests[-1] == request


def test_validation_accepts_a_tool_loop_and_a_cache_pre_warm(api: Api) -> None:
    api.sim.responder = lambda body: Turn(text="done")
    loop = [*LOOP, user(result("toolu_a"), text("also this")), user("and more")]
    reply = api.create(messages=loop, tools=TOOLS)
    assert reply.stop_reason == "end_turn" and blocks(reply) == [text("done")]
    warm = api.create(max_tokens=0, system=CACHED_SYSTEM, messages=[user("warmup")])
    assert warm.content == [] and warm.stop_reason == "max_tokens"
    assert warm.usage.output_tokens == 0 and warm.usage.cache_creation_input_tokens > 1024


# --------------------------------------------------------------------------------------------
# Rule 2: extended thinking
# --------------------------------------------------------------------------------------------

BUDGET = {"type": "enabled", "budget_tokens": 1024}
THINKING_REFUSED = {
    "budget under 1024": (
        {"thinking": {"type": "enabled", "budget_tokens": 512}},
        "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
    ),
    "budget not under max_tokens": (
        {"thinking": {"type": "enabled", "budget_tokens": 4096}},
        "`max_tokens` must be greater than `thinking.budget_tokens`",
    ),
    "tool_choice any": (
        {"thinking": BUDGET, "tools": TOOLS, "tool_choice": {"type": "any"}},
        "Thinking may not be enabled when tool_choice forces tool use.",
    ),
    "tool_choice tool": (
        {
            "thinking": {"type": "adaptive"},
            "tools": TOOLS,
            "tool_choice": {"type": "tool", "name": "lookup"},
        },
        "Thinking may not be enabled when tool_choice forces tool use.",
    ),
    "temperature": ({"thinking": BUDGET, "temperature": 0.2}, "`temperature` may only be set"),
    "unknown mode": ({"thinking": {"type": "deep"}}, "Input tag 'deep' found using 'type'"),
    "display when disabled": (
        {"thinking": {"type": "disabled", "display": "omitted"}},
        "thinking.disabled.display: Extra inputs are not permitted",
    ),
}


@pytest.mark.parametrize("case", list(THINKING_REFUSED))
def test_thinking_parameters(api: Api, case: str) -> None:
    fields, expected = THINKING_REFUSED[case]
    assert expected in api.reject(body(user("hi"), **fields))


def test_thinking_modes_agentscope_sends_are_accepted(api: Api) -> None:
    api.sim.responder = lambda body: Turn(thinking="hmm", text="ok")
    adaptive = api.create(messages=[user("hi")], thinking={"type": "adaptive"})
    assert [b["type"] for b in blocks(adaptive)] == ["thinking", "text"]
    omitted = api.create(messages=[user("hi")], thinking={"type": "adaptive", "display": "omitted"})
    assert blocks(omitted)[0]["thinking"] == "" and blocks(omitted)[0]["signature"]
    disabled = api.create(messages=[user("hi")], thinking={"type": "disabled"})
    assert [b["type"] for b in blocks(disabled)] == ["text"]
    interleaved = api.client.messages.create(
        model=MODEL,
        max_tokens=2048,
        messages=[user("hi")],
        thinking={"type": "enabled", "budget_tokens": 8000},
        extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"},
    )
    assert interleaved.stop_reason == "end_turn"


def test_thinking_blocks_must_come_back_as_issued(api: Api) -> None:
    api.sim.responder = lambda body: Turn(thinking="Look x up.", tool_calls=[("lookup", {})])
    thought, call = blocks(api.create(messages=[user("hi")], tools=TOOLS, thinking=BUDGET))
    answer = user({"type": "tool_result", "tool_use_id": call["id"], "content": "found"})

    def send(*content: dict[str, Any]) -> dict[str, Any]:
        return body(user("hi"), assistant(*content), answer, tools=TOOLS, thinking=BUDGET)

    api.sim.responder = lambda body: Turn(text="done")
    as_issued = api.create(messages=send(thought, call)["messages"], tools=TOOLS, thinking=BUDGET)
    assert as_issued.stop_reason == "end_turn"
    edited = {**thought, "thinking": "Look y up."}
    message = api.reject(send(edited, call))
    assert message == "messages.1.content.0: Invalid `signature` in `thinking` block"
    unsigned = {k: v for k, v in thought.items() if k != "signature"}
    assert "Invalid `signature`" in api.reject(send(unsigned, call))
    forged = {"type": "redacted_thinking", "data": "RU5DUllQVEVE"}
    assert "Invalid `data` in `redacted_thinking`" in api.reject(send(forged, call))

    api.sim.responder = lambda body: Turn(
        thinking="secret", redacted=True, tool_calls=[("lookup", {})]
    )
    redacted, call = blocks(api.create(messages=[user("hi")], tools=TOOLS, thinking=BUDGET))
    assert redacted["type"] == "redacted_thinking" and "thinking" not in redacted
    answer = user({"type": "tool_result", "tool_use_id": call["id"], "content": "found"})
    api.sim.responder = lambda body: Turn(text="done")
    messages = [user("hi"), assistant(redacted, call), answer]
    assert api.create(messages=messages, tools=TOOLS, thinking=BUDGET).stop_reason == "end_turn"


def test_thinking_must_open_the_tool_loop(api: Api) -> None:
    """The tool loop's first assistant message starts with its thinking, and so does the one
    answered when the model thought in it (interleaved); earlier turns' thinking may go; with
    thinking off, thinking blocks are ignored."""
    steps = iter(
        [
            Turn(thinking="one", text="Hello."),
            Turn(thinking="two", tool_calls=[("lookup", {"arg": "a"})]),
            Turn(thinking="three", tool_calls=[("lookup", {"arg": "b"})]),  # interleaved
            Turn(tool_calls=[("lookup", {"arg": "c"})]),  # no thinking: accepted so
        ]
    )
    api.sim.responder = lambda body: next(steps)
    history = [user("hi")]
    for follow in ("look them up", None, None, None):
        reply = blocks(api.create(messages=history, tools=TOOLS, thinking=BUDGET))
        history += [assistant(*reply), user(follow) if follow else user(result(reply[-1]["id"]))]
    # u0 a1(one, text) u2 a3(two, use a) r4 a5(three, use b) r6 a7(use c) r8
    assert [c.status for c in api.sim.calls] == [200] * 4

    def without_thinking(n: int, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept = [b for b in messages[n]["content"] if b["type"] != "thinking"]
        return [*messages[:n], assistant(*kept), *messages[n + 1 :]]

    api.sim.responder = lambda body: Turn(text="done")
    assert api.create(messages=history, tools=TOOLS, thinking=BUDGET).stop_reason == "end_turn"
    earlier = without_thinking(1, history)
    assert api.create(messages=earlier, tools=TOOLS, thinking=BUDGET).stop_reason == "end_turn"
    message = api.reject(body(*without_thinking(3, history), tools=TOOLS, thinking=BUDGET))
    assert message.startswith(
        "messages.3.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`tool_use`. When `thinking` is enabled, a final `assistant` message must start with a "
        "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)."
    )
    interleaved = without_thinking(5, history[:7])
    assert api.reject(body(*interleaved, tools=TOOLS, thinking=BUDGET)).startswith(
        "messages.5.content.0.type: Expected `thinking`"
    )

    off = api.create(messages=history, tools=TOOLS).usage.input_tokens
    bare = without_thinking(1, without_thinking(3, without_thinking(5, history)))
    assert off == api.create(messages=bare, tools=TOOLS).usage.input_tokens


@pytest.mark.filterwarnings("ignore:The model 'claude-opus:DeprecationWarning")
def test_previous_turns_thinking_leaves_the_context_where_the_model_strips_it(api: Api) -> None:
    api.sim.responder = lambda body: Turn(thinking="a long thought " * 50, text="Hello.")
    first = api.create(messages=[user("hi")], thinking=BUDGET)
    with_thinking = [user("hi"), assistant(*blocks(first)), user("and now?")]
    without = [user("hi"), assistant(text("Hello.")), user("and now?")]
    api.sim.responder = lambda body: Turn(text="ok")

    def size(model: str, messages: list[dict[str, Any]]) -> int:
        return api.create(model=model, messages=messages, thinking=BUDGET).usage.input_tokens

    assert not spec_of(MODEL).keeps_thinking and spec_of("claude-opus-4-5-20251101").keeps_thinking
    assert size(MODEL, with_thinking) == size(MODEL, without)
    assert size("claude-opus-4-5", with_thinking) > size("claude-opus-4-5", without) + 100


# --------------------------------------------------------------------------------------------
# Rule 3: prompt caching
# --------------------------------------------------------------------------------------------


def test_cache_second_call_reads_the_stable_prefix(api: Api) -> None:
    first = api.create(system=CACHED_SYSTEM, tools=TOOLS, messages=[user("What is rule 7?")])
    second = api.create(system=CACHED_SYSTEM, tools=TOOLS, messages=[user("And rule 9?")])
    prefix = first.usage.cache_creation_input_tokens
    assert prefix > 1024 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == prefix
    assert second.usage.cache_creation_input_tokens == 0
    one, two = api.sim.calls
    assert one.prompt_tokens == prefix + one.input_tokens and 0 < one.input_tokens < 20
    assert two.prompt_tokens == prefix + two.input_tokens and 0 < two.input_tokens < 20
    assert one.breakpoints == two.breakpoints == 1
    price = PRICES[MODEL]
    assert two.cost_usd == pytest.approx(
        (prefix * 0.1 * price.input + two.input_tokens * price.input + two.output_tokens * 15) / 1e6
    )
    read_ratio = prefix / (one.prompt_tokens + two.prompt_tokens)
    assert api.sim.summary()["read_ratio"] == pytest.approx(read_ratio)


def test_cache_automatic_breakpoint_moves_with_the_conversation(api: Api) -> None:
    api.sim.responder = lambda body: Turn(text="Rule 7 says keep the prefix stable.")
    history = [
        user(text(LONG)),
    ]
    first = api.create(messages=history, cache_control=EPHEMERAL)
    assert first.usage.input_tokens == 0 and first.usage.cache_creation_input_tokens > 1024
    history += [assistant(*blocks(first)), user("And rule 9?")]
    second = api.create(messages=history, cache_control=EPHEMERAL)
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert 0 < second.usage.cache_creation_input_tokens < 40 and second.usage.input_tokens == 0


CACHE_REFUSED = {
    "five breakpoints": (
        body(user(*[text(f"part {n}", cache_control=EPHEMERAL) for n in range(5)])),
        "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    ),
    "four explicit and the automatic one": (
        body(
            user(*[text(f"part {n}", cache_control=EPHEMERAL) for n in range(4)], text("end")),
            cache_control=EPHEMERAL,
        ),
        "Found 5.",
    ),
    "a marked thinking block": (
        body(
            user("hi"),
            assistant(
                {"type": "thinking", "thinking": "t", "signature": "s", "cache_control": EPHEMERAL},
                text("ok"),
            ),
            user("go"),
        ),
        "messages.1.content.0.thinking.cache_control: Extra inputs are not permitted",
    ),
    "1h after 5m": (
        body(
            user(
                text("a", cache_control=EPHEMERAL),
                text("b", cache_control={"type": "ephemeral", "ttl": "1h"}),
            )
        ),
        "cannot come after a ttl='5m'",
    ),
    "a ttl of a day": (
        body(user(text("a", cache_control={"type": "ephemeral", "ttl": "1d"}))),
        "ttl: Input should be '5m' or '1h'",
    ),
    "automatic ttl against the last block's": (
        body(
            user(text("a", cache_control=EPHEMERAL)),
            cache_control={"type": "ephemeral", "ttl": "1h"},
        ),
        "the automatic breakpoint's ttl differs",
    ),
}


@pytest.mark.parametrize("case", list(CACHE_REFUSED))
def test_cache_breakpoints_are_checked(api: Api, case: str) -> None:
    request, expected = CACHE_REFUSED[case]
    assert expected in api.reject(request)


def test_cache_writes_only_a_prefix_over_the_model_minimum(api: Api) -> None:
    short = [text("A short prompt.", cache_control=EPHEMERAL)]
    usage = api.create(system=short, messages=[user("hi")]).usage
    assert usage.cache_creation_input_tokens == 0 and usage.cache_read_input_tokens == 0
    assert spec_of("claude-haiku-4-5-20251001").min_cache_tokens == 4096
    haiku = api.create(model="claude-haiku-4-5", system=CACHED_SYSTEM, messages=[user("hi")])
    assert haiku.usage.cache_creation_input_tokens == 0  # ~1,500 tokens: under Haiku's minimum
    sonnet = api.create(system=CACHED_SYSTEM, messages=[user("hi")])
    assert sonnet.usage.cache_creation_input_tokens > 1024
    api.sim.min_cache_tokens = 1
    assert api.create(system=short, messages=[user("hi")]).usage.cache_creation_input_tokens > 0


def test_a_short_breakpoint_makes_no_entry_even_inside_what_was_read(api: Api) -> None:
    """A breakpoint on a prefix under the model's minimum makes no entry, also when the
    request reads a longer prefix through another breakpoint: a later request that keeps
    only that short prefix reads nothing. (The simulator kept one at no charge, and the cost
    benchmark's compactions read the 572 tokens of tools and system prompt they could not.)"""
    short = [text("A short prompt.", cache_control=EPHEMERAL)]
    history = user({**text(LONG + " (history)"), "cache_control": EPHEMERAL})
    written = api.create(system=short, messages=[history]).usage
    assert written.cache_creation_input_tokens > 1024 and written.cache_read_input_tokens == 0
    read = api.create(system=short, messages=[history, assistant("ok"), user("more")]).usage
    assert read.cache_read_input_tokens == written.cache_creation_input_tokens
    alone = api.create(system=short, messages=[user("something new")]).usage
    assert alone.cache_read_input_tokens == 0 and alone.cache_creation_input_tokens == 0


def test_cache_reads_look_back_20_blocks_at_most(api: Api) -> None:
    history = text(LONG + " (history)")
    conversation = api.create(
        system=CACHED_SYSTEM, messages=[user({**history, "cache_control": EPHEMERAL})]
    ).usage.cache_creation_input_tokens
    system = api.create(system=CACHED_SYSTEM, messages=[user("x")]).usage.cache_read_input_tokens
    assert conversation > system > 1024

    def ask(added: int) -> int:
        """The tokens read by a request `added` + 1 blocks past the history's entry."""
        notes = [text(f"note {n}") for n in range(added - 1)]
        tail = user(*notes, text("the question", cache_control=EPHEMERAL))
        messages = [user(history), assistant(text("ok")), tail]
        return int(
            api.create(system=CACHED_SYSTEM, messages=messages).usage.cache_read_input_tokens
        )

    assert ask(20) == system  # 21 blocks back: out of reach, the system's entry is read
    assert ask(19) == conversation


def test_cache_lives_5_minutes_refreshed_on_each_hit(api: Api) -> None:
    def call(**kwargs: Any) -> Any:
        return api.create(
            system=kwargs.pop("system", CACHED_SYSTEM), messages=[user("hi")], **kwargs
        ).usage

    written = call().cache_creation_input_tokens
    api.clock.now += 299
    assert call().cache_read_input_tokens == written
    api.clock.now += 299  # alive: the hit refreshed it
    assert call().cache_read_input_tokens == written
    api.clock.now += 300
    expired = call()
    assert expired.cache_read_input_tokens == 0 and expired.cache_creation_input_tokens == written

    hour = [text(LONG + " (hourly)", cache_control={"type": "ephemeral", "ttl": "1h"})]
    first = call(system=hour)
    assert first.cache_creation.ephemeral_1h_input_tokens == first.cache_creation_input_tokens
    api.clock.now += 3_000
    assert call(system=hour).cache_read_input_tokens == first.cache_creation_input_tokens
    cost = (
        api.sim.calls[-2].cost_usd - first.input_tokens * 3 / 1e6 - first.output_tokens * 15 / 1e6
    )
    assert cost == pytest.approx(first.cache_creation_input_tokens * 3 * 2.0 / 1e6)


@pytest.mark.filterwarnings("ignore:The model 'claude-opus:DeprecationWarning")
def test_cache_invalidation_follows_the_hierarchy(api: Api) -> None:
    """tool_choice and thinking changes lose the messages' entries, not tools' and system's;
    a tools change loses all; caches are per model."""
    conversation = [
        user(text(LONG + " (history)")),
        assistant(text("ok")),
        user(text("go", cache_control=EPHEMERAL)),
    ]

    def call(**kwargs: Any) -> Any:
        fields = {"system": CACHED_SYSTEM, "tools": TOOLS, "messages": conversation, **kwargs}
        return api.create(**fields).usage

    total = call().cache_creation_input_tokens
    system = api.create(
        system=CACHED_SYSTEM, tools=TOOLS, messages=[user("x")]
    ).usage.cache_read_input_tokens
    assert call().cache_read_input_tokens == total > system > 1024
    assert call(tool_choice={"type": "auto"}).cache_read_input_tokens == system
    assert call(tool_choice={"type": "auto"}).cache_read_input_tokens == total
    assert call(thinking=BUDGET).cache_read_input_tokens == system
    other_tools = [{**TOOLS[0], "description": "Look a word up, fast."}]
    assert call(tools=other_tools).cache_read_input_tokens == 0
    assert call(model="claude-opus-4-5").cache_read_input_tokens == 0


# --------------------------------------------------------------------------------------------
# Rule 4: the context window
# --------------------------------------------------------------------------------------------


def test_context_window_refuses_a_prompt_too_long(api: Api) -> None:
    request = body(user(LONG), system=CACHED_SYSTEM)
    size = api.client.messages.count_tokens(
        model=MODEL, system=CACHED_SYSTEM, messages=[user(LONG)]
    )
    api.sim.model_window = size.input_tokens - 1
    assert (
        api.reject(request)
        == f"prompt is too long: {size.input_tokens} tokens > {size.input_tokens - 1} maximum"
    )
    api.sim.model_window = size.input_tokens
    assert api.create(system=CACHED_SYSTEM, messages=[user(LONG)]).usage.input_tokens == (
        size.input_tokens - api.sim.calls[-1].cache_creation_input_tokens
    )


# --------------------------------------------------------------------------------------------
# Rule 5: responses, plain and streamed
# --------------------------------------------------------------------------------------------


def test_stream_events_as_the_sdk_reads_them(api: Api) -> None:
    turn = Turn(
        text="Looking both words up now.",
        thinking="Two lookups, then answer.",
        tool_calls=[("lookup", {"arg": "quokka"}), ("lookup", {"arg": "numbat"})],
    )
    api.sim.responder = lambda body: turn
    request = {
        "system": CACHED_SYSTEM,
        "tools": TOOLS,
        "messages": [user("Look up two words.")],
        "thinking": BUDGET,
    }
    plain = api.create(**request)
    events = list(api.create(**request, stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    start = events[0].message
    assert start.content == [] and start.stop_reason is None
    assert start.usage.cache_read_input_tokens == plain.usage.cache_creation_input_tokens > 0
    deltas = [e.delta.type for e in events if e.type == "content_block_delta"]
    assert {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"} <= set(deltas)
    assert deltas.count("signature_delta") == 1
    pieces = [
        e.delta.partial_json for e in events if e.type == "content_block_delta" and e.index == 2
    ]
    assert len(pieces) > 2 and json.loads("".join(pieces)) == {"arg": "quokka"}
    assert events[-2].delta.stop_reason == "tool_use"
    assert events[-2].usage.output_tokens == plain.usage.output_tokens

    with api.client.messages.stream(model=MODEL, max_tokens=4096, **request) as stream:
        final = stream.get_final_message()
    issued = [b["id"] for b in blocks(final) if b["type"] == "tool_use"]
    same = [
        {**b, "id": issued[n - 2]} if b["type"] == "tool_use" else b
        for n, b in enumerate(blocks(plain))
    ]
    assert blocks(final) == same
    assert final.usage.cache_read_input_tokens == plain.usage.cache_creation_input_tokens


def test_summary_totals_and_prices(api: Api) -> None:
    assert PRICES["claude-haiku-4-5"] == Price(1.0, 5.0) and PRICES["claude-opus-4-5"] == Price(
        5.0, 25.0
    )
    assert spec_of("claude-unknown-9") == MODELS["claude-sonnet-4-5"]
    api.create(system=CACHED_SYSTEM, messages=[user("hi")])
    api.create(system=CACHED_SYSTEM, messages=[user("hi")])
    api.reject(body(user("")))
    summary = api.sim.summary()
    calls = api.sim.calls
    assert summary["calls"] == 3 and summary["rejected"] == 1
    assert summary["prompt_tokens"] == calls[0].prompt_tokens + calls[1].prompt_tokens
    assert (
        summary["cache_read"] == summary["cache_creation"] == calls[0].cache_creation_input_tokens
    )
    assert summary["cost_usd"] == pytest.approx(calls[0].cost_usd + calls[1].cost_usd)
    assert calls[0].cost_usd > calls[1].cost_usd
    flat = AnthropicSim(lambda body: Turn(text="ok"), prices=Price(10.0, 10.0))
    assert flat.prices is not None and flat.prices.cost(
        {
            "input_tokens": 10,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 5,
        }
    ) == pytest.approx(150 / 1e6)


# --------------------------------------------------------------------------------------------
# AgentScope's real AnthropicChatModel against the simulator
# --------------------------------------------------------------------------------------------

WORDS = ("quokka", "numbat")


def two_lookups(body: dict[str, Any]) -> Turn:
    """Look up each word (thinking first each time), then answer."""
    done = sum(
        block.get("type") == "tool_result"
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
    )
    if done < len(WORDS):
        return Turn(thinking=f"Next: {WORDS[done]}.", tool_calls=[("lookup", {"arg": WORDS[done]})])
    return Turn(thinking="Both found.", text="A quokka and a numbat are marsupials.")


def lookup_text(arg: str) -> str:
    return f"{arg}: a marsupial"


def check_session(sim: AnthropicSim, reply: str | None, stream: bool) -> None:
    assert reply == "A quokka and a numbat are marsupials."
    assert [(c.status, c.error) for c in sim.calls] == [(200, None)] * 3
    assert all(request.get("stream", False) is stream for request in sim.requests)
    last = sim.requests[-1]
    assert last["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    steps = [m for m in last["messages"] if m["role"] == "assistant"]
    assert [[b["type"] for b in m["content"]] for m in steps] == [["thinking", "tool_use"]] * 2
    assert all(m["content"][0]["signature"] for m in steps)


def model_factory(url: str, stream: bool) -> Any:
    return anthropic_model(url, stream, MODEL)


@pytest.mark.skipif(
    IS_1X,
    reason=f"AgentScope 2.x only: drives a 2.x Agent; AgentScope {AGENTSCOPE_VERSION} is installed",
)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_agentscope2_tool_loop_with_thinking_is_accepted(stream: bool) -> None:
    from agentscope.agent import Agent
    from agentscope.message import UserMsg
    from agentscope.tool import FunctionTool, Toolkit

    from tests.support.fakes import ALLOW

    def lookup(arg: str) -> str:
        """Look a word up.

        Args:
            arg (str): the word.
        """
        return lookup_text(arg)

    sim = AnthropicSim(two_lookups)
    with serve(sim) as url:
        agent = Agent(
            name="zoologist",
            system_prompt="You look words up.",
            model=model_factory(url, stream),
            toolkit=Toolkit(tools=[FunctionTool(lookup, permission=ALLOW, is_read_only=True)]),
        )
        reply = await agent.reply(UserMsg(name="user", content="What are a quokka and a numbat?"))
    check_session(sim, reply.get_text_content(), stream)


@requires_1x("drives a 1.x ReActAgent with AnthropicChatModel")
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_agentscope1_tool_loop_with_thinking_is_accepted(stream: bool) -> None:
    from agentscope.agent import ReActAgent
    from agentscope.formatter import AnthropicChatFormatter
    from agentscope.message import Msg, TextBlock
    from agentscope.tool import Toolkit, ToolResponse

    def lookup(arg: str) -> ToolResponse:
        """Look a word up.

        Args:
            arg (str): the word.
        """
        return ToolResponse(content=[TextBlock(type="text", text=lookup_text(arg))])

    toolkit = Toolkit()
    toolkit.register_tool_function(lookup)
    sim = AnthropicSim(two_lookups)
    with serve(sim) as url:
        agent = ReActAgent(
            name="zoologist",
            sys_prompt="You look words up.",
            model=model_factory(url, stream),
            formatter=AnthropicChatFormatter(),
            toolkit=toolkit,
        )
        agent.set_console_output_enabled(False)
        reply = await agent(Msg("user", "What are a quokka and a numbat?", "user"))
    check_session(sim, reply.get_text_content(), stream)
