"""The rules of the offline Responses API simulator (`tests/support/responses_sim.py`), one test
each, through the ``openai`` SDK's own client (and raw HTTP for the event stream); then AgentScope
2.x's real `OpenAIResponseModel` on it in a two-step tool loop, with the prompt cache and with
server-side compaction. No sleeps: the cache runs on a `ManualClock`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
import pytest

from tests.support.chat_sim import ManualClock, encode
from tests.support.lines import IS_1X
from tests.support.responses_sim import ResponsesSim, Turn, render, serve

MODEL = "gpt-5"
LONG = " ".join(
    f"rule {i}: keep the invoices of tenant {i % 7} for {i % 11} years." for i in range(120)
)
"""Some 1,800 tokens: over the prompt cache's 1,024."""
TOOLS = [
    {
        "type": "function",
        "name": "lookup",
        "description": "Look a word up.",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
    }
]
COMPACT_AT = [{"type": "compaction", "compact_threshold": 1_000}]
requires_2x = pytest.mark.skipif(IS_1X, reason="AgentScope 2.x only: OpenAIResponseModel")


@dataclass
class Refusal:
    """The ``error`` object of a 400."""

    message: str
    type: str
    param: str | None
    code: str | None


@dataclass
class Api:
    sim: ResponsesSim
    client: openai.OpenAI
    clock: ManualClock
    url: str
    seen: list[list[dict[str, Any]]] = field(default_factory=list)
    """The ``input`` the responder got, per call."""

    def create(self, **kwargs: Any) -> Any:
        """A ``responses.create`` with the usual model."""
        return self.client.responses.create(**{"model": MODEL, **kwargs})

    def reject(self, **kwargs: Any) -> Refusal:
        """The 400 a request gets."""
        with pytest.raises(openai.BadRequestError) as info:
            self.create(**kwargs)
        return Refusal(**info.value.body)  # type: ignore[arg-type]


def loop(body: dict[str, Any]) -> Turn:
    """Call `lookup`, then answer from its result."""
    if body["input"][-1].get("type") == "function_call_output":
        return Turn(text="A cache is a store of answers.")
    return Turn(tool_calls=[("lookup", {"word": "cache"})], reasoning="Look it up.")


@contextmanager
def running(responder: Callable[[dict[str, Any]], Turn] = loop, **kw: Any) -> Iterator[Api]:
    clock = ManualClock(1_000.0)
    seen: list[list[dict[str, Any]]] = []

    def recording(body: dict[str, Any]) -> Turn:
        seen.append(body["input"])
        return responder(body)

    sim = ResponsesSim(recording, clock=clock, **kw)
    with serve(sim) as url:
        client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0, timeout=20)
        yield Api(sim, client, clock, url, seen)


def start() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": LONG},
        {"type": "message", "role": "user", "content": "What is a cache?"},
    ]


def as_input(output: list[Any]) -> list[dict[str, Any]]:
    """Output items to send back (as the guide's loop does)."""
    return [item.model_dump(exclude_none=True) for item in output]


def answered(
    items: list[dict[str, Any]], output: str = "a store of answers"
) -> list[dict[str, Any]]:
    """`items` and the output of their last function call."""
    call = [i for i in items if i.get("type") == "function_call"][-1]
    return [*items, {"type": "function_call_output", "call_id": call["call_id"], "output": output}]


# -- input and validation -------------------------------------------------------------------------


def test_a_string_input_is_one_user_message() -> None:
    with running(lambda body: Turn(text="hi")) as api:
        reply = api.create(input="hello world")
    assert api.seen[0] == [{"type": "message", "role": "user", "content": "hello world"}]
    assert reply.usage.input_tokens == len(encode("<user>\nhello world"))
    assert reply.output_text == "hi"


def test_previous_response_id_is_not_supported() -> None:
    with running() as api:
        error = api.reject(input="more", previous_response_id="resp_123")
    assert error.code == "unsupported_parameter" and error.param == "previous_response_id"


def test_other_item_types_are_not_supported() -> None:
    with running() as api:
        error = api.reject(input=[{"type": "item_reference", "id": "msg_1"}])
    assert error.param == "input[0]" and "'item_reference'" in error.message


def test_a_function_call_output_needs_its_call() -> None:
    orphan = {"type": "function_call_output", "call_id": "call_x", "output": "?"}
    with running() as api:
        error = api.reject(input=[*start(), orphan])
    assert error.message == "No tool call found for function call output with call_id call_x."


def test_a_function_call_needs_its_output() -> None:
    call = {"type": "function_call", "call_id": "call_y", "name": "lookup", "arguments": "{}"}
    with running() as api:
        error = api.reject(input=[*start(), call, {"role": "user", "content": "and?"}])
    assert error.message == "No tool output found for function call call_y."


def test_the_context_window_is_context_length_exceeded() -> None:
    with running(model_window=2_000) as api:
        error = api.reject(input=start(), max_output_tokens=500)
        fits = api.create(input=start(), max_output_tokens=16)
    assert error.code == "context_length_exceeded" and error.param == "input"
    assert error.message.startswith("Your input exceeds the context window of this model.")
    assert fits.usage.input_tokens + 500 > 2_000


def test_context_management_takes_compaction_entries_only() -> None:
    with running() as api:
        kind = api.reject(input="hi", context_management=[{"type": "truncation"}])
        value = api.reject(
            input="hi", context_management=[{"type": "compaction", "compact_threshold": "big"}]
        )
    assert kind.param == "context_management[0].type"
    assert value.param == "context_management[0].compact_threshold"


# -- the prompt cache -----------------------------------------------------------------------------


def test_the_prompt_cache_applies_openais_rules() -> None:
    with running() as api:
        first = api.create(input=start(), tools=TOOLS)
        second = api.create(input=answered([*start(), *as_input(first.output)]), tools=TOOLS)
        keyed = api.create(input=start(), tools=TOOLS, extra_body={"prompt_cache_key": "t-1"})
        api.clock.advance(301)
        expired = api.create(input=start(), tools=TOOLS)
    hit = second.usage.input_tokens_details.cached_tokens
    assert first.usage.input_tokens_details.cached_tokens == 0
    assert hit == first.usage.input_tokens // 128 * 128 and hit >= 1_024
    assert keyed.usage.input_tokens_details.cached_tokens == 0  # another machine
    assert expired.usage.input_tokens_details.cached_tokens == 0
    call = api.sim.calls[1]
    fresh = call.prompt_tokens - call.cached_tokens
    assert call.cost_usd == pytest.approx(
        (1.25 * fresh + 0.125 * hit + 10 * call.completion_tokens) / 1e6
    )


# -- server-side compaction -----------------------------------------------------------------------


def test_compaction_runs_when_the_input_exceeds_the_threshold() -> None:
    with running() as api:
        under = api.create(
            input="What is a cache?",
            context_management=[{"type": "compaction", "compact_threshold": 100}],
        )
        over = api.create(input=start(), context_management=COMPACT_AT)
    assert [item.type for item in under.output] == ["reasoning", "function_call"]
    assert [item.type for item in over.output] == ["compaction", "reasoning", "function_call"]
    sealed = over.output[0].encrypted_content
    assert sealed.startswith("sim1.") and "invoices" not in sealed  # opaque
    made = api.sim.calls[1].compaction_tokens
    assert made == max(32, over.usage.input_tokens // 10)
    assert (
        over.usage.output_tokens
        == Turn(tool_calls=[("lookup", {"word": "cache"})], reasoning="Look it up.").output_tokens()
        + made
    )
    assert api.sim.summary()["compactions"] == 1


def test_a_compaction_item_sent_back_stands_for_what_it_replaced() -> None:
    with running() as api:
        first = api.create(input=start(), context_management=COMPACT_AT)
        kept = answered([*start(), *as_input(first.output)])  # the guide's loop: append output
        second = api.create(input=kept, context_management=COMPACT_AT)
        pruned = kept[kept.index(as_input(first.output)[0]) :]  # the latency tip: drop before it
        third = api.create(input=pruned)
    compacted = api.sim.calls[0].compaction_tokens
    after = sum(len(encode(render(item))) for item in kept[3:])
    assert second.usage.input_tokens == third.usage.input_tokens == compacted + after
    assert api.sim.calls[1].dropped_items == 2 and api.sim.calls[2].dropped_items == 0
    assert api.sim.calls[1].compaction_tokens == 0  # under the threshold now
    assert api.seen[1] == api.seen[2] == [*start(), *kept[3:]]  # the model sees the originals
    assert second.output_text == "A cache is a store of answers."


def test_a_tampered_compaction_item_is_refused() -> None:
    with running() as api:
        first = api.create(input=start(), context_management=COMPACT_AT)
        item = as_input(first.output)[0]
        body = item["encrypted_content"]
        flipped = body[:10] + ("A" if body[10] != "A" else "B") + body[11:]
        error = api.reject(
            input=answered([{**item, "encrypted_content": flipped}, *as_input(first.output)[1:]])
        )
    with running(secret=b"another key") as other:
        foreign = other.reject(input=answered(as_input(first.output)))
    assert error.code == foreign.code == "invalid_encrypted_content"
    assert error.message == f"The encrypted content for item {item['id']} could not be verified."


def test_a_compaction_item_verifies_in_another_simulator() -> None:
    with running() as api:
        first = api.create(input=start(), context_management=COMPACT_AT)
    with running() as replay:
        again = replay.create(input=answered(as_input(first.output)))
    assert again.output_text == "A cache is a store of answers."
    assert replay.seen[0][:2] == start()


def test_the_compact_endpoint_returns_the_user_messages_then_a_compaction_item() -> None:
    with running() as api:
        first = api.create(input=start())
        history = answered([*start(), *as_input(first.output)])
        raw = api.client.responses.with_raw_response.compact(model=MODEL, input=history)
        compacted = raw.parse()
        # sent back as the wire had it: the SDK's output types know no user message
        window = [*raw.http_response.json()["output"], {"role": "user", "content": "Thanks."}]
        follow = api.create(input=window)
    assert compacted.object == "response.compaction"
    assert [(i.type, getattr(i, "role", None)) for i in compacted.output] == [
        ("message", "user"),
        ("compaction", None),
    ]
    call = api.sim.calls[1]
    assert (
        call.endpoint == "responses/compact"
        and compacted.usage.output_tokens == call.compaction_tokens
    )
    user = len(encode(render(start()[1])))
    thanks = len(encode(render(window[-1])))
    assert follow.usage.input_tokens == user + call.compaction_tokens + thanks  # kept, not dropped
    assert api.sim.calls[2].dropped_items == 0
    assert api.seen[-1] == [*history, window[-1]]


# -- server-sent events ---------------------------------------------------------------------------


def test_a_stream_sends_the_documented_events_in_order() -> None:
    def answer(body: dict[str, Any]) -> Turn:
        return Turn(text="A cache.", tool_calls=[("lookup", {"word": "cache"})], reasoning="Hm.")

    body = {"model": MODEL, "input": start(), "stream": True, "context_management": COMPACT_AT}
    with running(answer) as api:
        with httpx.stream("POST", f"{api.client.base_url}responses", json=body) as response:
            lines = [line for line in response.iter_lines() if line]
        with api.client.responses.stream(
            model=MODEL, input=start(), context_management=COMPACT_AT
        ) as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_response()
        plain = api.create(input=start(), context_management=COMPACT_AT)
    names = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    data = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    assert names == [d["type"] for d in data] == kinds
    assert [d["sequence_number"] for d in data] == list(range(len(data)))
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    items = [d["item"]["type"] for d in data if d["type"] == "response.output_item.done"]
    assert items == ["compaction", "reasoning", "message", "function_call"]
    assert "response.compaction.compacting" in kinds
    for kind in (
        "response.reasoning_summary_text.delta",
        "response.output_text.delta",
        "response.function_call_arguments.delta",
    ):
        assert kind in kinds
    assert final.output_text == plain.output_text == "A cache."
    assert final.usage.input_tokens == plain.usage.input_tokens
    assert [i.type for i in final.output] == [i.type for i in plain.output]


# -- AgentScope 2.x's OpenAIResponseModel ---------------------------------------------------------


async def _final(result: Any) -> Any:
    if not isinstance(result, AsyncIterator):
        return result
    last = None
    async for chunk in result:
        last = chunk
    return last


async def two_step(model: Any, **kwargs: Any) -> tuple[Any, Any]:
    """The model's tool loop: it calls `lookup`, gets its result, answers."""
    from agentscope.message import AssistantMsg, SystemMsg, ToolCallBlock, ToolResultBlock, UserMsg

    history = [SystemMsg("system", LONG), UserMsg("user", "What is a cache?")]
    tools = [{"type": "function", "function": {k: v for k, v in TOOLS[0].items() if k != "type"}}]
    first = await _final(await model(history, tools=tools, **kwargs))
    (call,) = [b for b in first.content if isinstance(b, ToolCallBlock)]
    assert call.name == "lookup" and json.loads(call.input) == {"word": "cache"}
    result = ToolResultBlock(
        id=call.id, name=call.name, output="a store of answers", state="success"
    )
    history.append(AssistantMsg("assistant", [*first.content, result]))
    second = await _final(await model(history, tools=tools, **kwargs))
    return first, second


def _model(url: str, stream: bool) -> Any:
    from agentscope.credential import OpenAICredential
    from agentscope.model import OpenAIResponseModel

    return OpenAIResponseModel(
        credential=OpenAICredential(api_key="sk-test", base_url=url),
        model=MODEL,
        stream=stream,
        max_retries=0,
    )


@requires_2x
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_agentscope2_response_model_reads_cached_tokens(stream: bool) -> None:
    from agentscope.message import ThinkingBlock

    with running() as api:
        first, second = await two_step(_model(api.url, stream))
    assert second.content[-1].text == "A cache is a store of answers."
    (thought,) = [b for b in first.content if isinstance(b, ThinkingBlock)]
    assert thought.thinking == "Look it up."
    sent = api.sim.requests[1]["input"]
    assert [i.get("type", "message") for i in sent][2:] == [
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert second.usage.cache_input_tokens == api.sim.calls[1].cached_tokens > 1_024
    assert second.usage.input_tokens == api.sim.calls[1].prompt_tokens


@requires_2x
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_agentscope2_response_model_drops_the_compaction_item(stream: bool) -> None:
    """AgentScope 2.0.11 keeps no ``compaction`` output item: the server compacts, yet the next
    request sends the whole history again (keeping the item is the package's job)."""
    with running() as api:
        first, second = await two_step(_model(api.url, stream), context_management=COMPACT_AT)
    assert api.sim.calls[0].compaction_tokens > 0
    assert second.content[-1].text == "A cache is a store of answers."
    sent = api.sim.requests[1]["input"]
    assert all(item.get("type") != "compaction" for item in sent)
    assert api.sim.calls[1].compaction_tokens > 0  # so it compacts again
    assert second.usage.input_tokens == api.sim.calls[1].prompt_tokens > 1_000
