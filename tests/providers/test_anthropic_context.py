"""Native context management in the offline Anthropic simulator
(`tests/support/anthropic_context.py`): context editing (``clear_tool_uses_20250919``,
``clear_thinking_20251015``) and server-side compaction (``compact_20260112``), through the
``anthropic`` SDK's beta client, one rule a test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from tests.support.anthropic_context import CLEARED
from tests.support.anthropic_sim import AnthropicSim, Turn, serve, spec_of
from tests.support.anthropic_wire import sign

EDITING = "context-management-2025-06-27"
COMPACT = "compact-2026-01-12"
SONNET = "claude-sonnet-4-5"
OPUS = "claude-opus-4-6"
EPHEMERAL = {"type": "ephemeral"}
BUDGET = {"type": "enabled", "budget_tokens": 1024}
TOOLS = [
    {"name": "read_log", "description": "Read a log.", "input_schema": {"type": "object"}},
    {"name": "note", "description": "Keep a note.", "input_schema": {"type": "object"}},
]


@pytest.fixture
def sim() -> AnthropicSim:
    return AnthropicSim(lambda body: Turn(text="Noted."), min_cache_tokens=1024)


@pytest.fixture
def client(sim: AnthropicSim) -> Iterator[anthropic.Anthropic]:
    with serve(sim) as url:
        yield anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0)


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content if isinstance(content, str) else [content]}


def assistant(*content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content)}


def log_session(pairs: int, size: int, tool: str = "read_log") -> list[dict[str, Any]]:
    """A tool loop of `pairs` calls of `tool`, each result about `size` tokens long."""
    messages = [user("Read the logs.")]
    for n in range(pairs):
        call = {
            "type": "tool_use",
            "id": f"toolu_{tool}_{n:02d}",
            "name": tool,
            "input": {"part": n},
        }
        output = f"part {n}: " + "service ok, latency nominal; " * (size // 6)
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": output}
        messages += [assistant(call), user(result)]
    return messages


def create(client: anthropic.Anthropic, *betas: str, **fields: Any) -> Any:
    request = {"model": SONNET, "max_tokens": 4096, "tools": TOOLS, **fields}
    return client.beta.messages.create(betas=list(betas), **request)


def clear(**edit: Any) -> dict[str, Any]:
    return {"edits": [{"type": "clear_tool_uses_20250919", **edit}]}


def refused(
    client: anthropic.Anthropic, body: dict[str, Any], *betas: str
) -> anthropic.APIStatusError:
    headers = {"anthropic-beta": ",".join(betas)} if betas else {}
    request = {"model": SONNET, "max_tokens": 4096, "messages": [user("hi")], **body}
    with pytest.raises(anthropic.BadRequestError) as info:
        client.post("/v1/messages", cast_to=object, body=request, options={"headers": headers})
    return info.value


REFUSED = {
    "without its beta": (
        {"context_management": clear()},
        (),
        "context_management: Extra inputs are not permitted",
    ),
    "an edit of the other beta": (
        {"context_management": clear()},
        (COMPACT,),
        "requires the `context-management-2025-06-27` beta header",
    ),
    "an unknown edit": (
        {"context_management": {"edits": [{"type": "clear_everything"}]}},
        (EDITING,),
        "Input tag 'clear_everything'",
    ),
    "clear_thinking second": (
        {
            "thinking": BUDGET,
            "context_management": {
                "edits": [
                    {"type": "clear_tool_uses_20250919"},
                    {"type": "clear_thinking_20251015"},
                ]
            },
        },
        (EDITING,),
        "the `clear_thinking_20251015` strategy must be listed first",
    ),
    "clear_thinking without thinking": (
        {"context_management": {"edits": [{"type": "clear_thinking_20251015"}]}},
        (EDITING,),
        "requires `thinking` enabled",
    ),
    "keeping no thinking turn": (
        {
            "thinking": BUDGET,
            "context_management": {
                "edits": [
                    {
                        "type": "clear_thinking_20251015",
                        "keep": {"type": "thinking_turns", "value": 0},
                    }
                ]
            },
        },
        (EDITING,),
        "keep.value: Input should be greater than or equal to 1",
    ),
    "compaction on Sonnet 4.5": (
        {"context_management": {"edits": [{"type": "compact_20260112"}]}},
        (COMPACT,),
        "`compact_20260112` is not supported for model 'claude-sonnet-4-5'",
    ),
    "a compaction trigger under 50,000": (
        {
            "model": OPUS,
            "context_management": {
                "edits": [
                    {
                        "type": "compact_20260112",
                        "trigger": {"type": "input_tokens", "value": 20_000},
                    }
                ]
            },
        },
        (COMPACT,),
        "trigger.value: Input should be greater than or equal to 50000",
    ),
    "a compaction block without the edit": (
        {
            "model": OPUS,
            "messages": [
                assistant({"type": "compaction", "content": "<summary>s</summary>"}),
                user("go"),
            ],
        },
        (COMPACT,),
        "a `compaction` block needs the `compact_20260112` edit",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_context_management_is_checked(client: anthropic.Anthropic, case: str) -> None:
    body, betas, expected = REFUSED[case]
    assert expected in refused(client, body, *betas).message


def test_clear_tool_uses_clears_the_oldest_results(
    client: anthropic.Anthropic, sim: AnthropicSim
) -> None:
    history = log_session(6, 400)
    trigger = {"type": "input_tokens", "value": 1_000}
    keep_two = clear(trigger=trigger, keep={"type": "tool_uses", "value": 2})
    count = client.beta.messages.count_tokens(
        model=SONNET, tools=TOOLS, messages=history, context_management=keep_two, betas=[EDITING]
    )
    reply = create(client, EDITING, messages=history, context_management=keep_two)
    (applied,) = reply.context_management.applied_edits
    assert applied.type == "clear_tool_uses_20250919" and applied.cleared_tool_uses == 4
    original = count.context_management.original_input_tokens
    assert applied.cleared_input_tokens == original - count.input_tokens > 1_000
    assert reply.usage.input_tokens == count.input_tokens
    assert sim.requests[-1]["messages"] == history  # the client keeps its full history
    assert sim.calls[-1].context_management == reply.context_management.model_dump()

    def cleared(messages: list[dict[str, Any]], **edit: Any) -> list[Any]:
        reply = create(client, EDITING, messages=messages, context_management=clear(**edit))
        return list(reply.context_management.applied_edits)

    two = {"trigger": trigger, "keep": {"type": "tool_uses", "value": 2}}
    with_inputs = cleared(history, **two, clear_tool_inputs=True)[0]
    assert with_inputs.cleared_input_tokens > applied.cleared_input_tokens
    notes = log_session(3, 400, tool="note") + log_session(3, 400)[1:]
    assert cleared(notes, **two, exclude_tools=["note"])[0].cleared_tool_uses == 1
    assert cleared(history, trigger={"type": "tool_uses", "value": 5})[0].cleared_tool_uses == 3
    assert cleared(history) == []  # under the default trigger, 100,000 tokens
    assert (
        cleared(history, trigger=trigger, clear_at_least={"type": "input_tokens", "value": 50_000})
        == []
    )


def test_cleared_results_read_as_a_placeholder(
    client: anthropic.Anthropic, sim: AnthropicSim
) -> None:
    """What the model sees: the cleared result's content is the placeholder; its size is the
    count of that prompt."""
    history = log_session(2, 400)
    cleared = [*history]
    cleared[2] = user({**history[2]["content"][0], "content": CLEARED})
    edit = clear(
        trigger={"type": "input_tokens", "value": 100}, keep={"type": "tool_uses", "value": 1}
    )
    reply = create(client, EDITING, messages=history, context_management=edit)
    plain = create(client, messages=cleared)
    assert reply.usage.input_tokens == plain.usage.input_tokens


def test_clearing_breaks_the_cache_where_it_clears(client: anthropic.Anthropic) -> None:
    """The same history clears the same way (its cache holds); once clearing starts, the cache
    is read up to the first cleared result only."""
    system = [{"type": "text", "text": "You read logs. " * 400, "cache_control": EPHEMERAL}]
    edit = clear(
        trigger={"type": "input_tokens", "value": 5_000}, keep={"type": "tool_uses", "value": 3}
    )

    def ask(history: list[dict[str, Any]]) -> Any:
        fields = {"system": system, "messages": history, "context_management": edit}
        return create(client, EDITING, cache_control=EPHEMERAL, **fields)

    short = ask(log_session(4, 500))
    assert short.context_management.applied_edits == [] and short.usage.cache_creation_input_tokens
    again = ask(log_session(4, 500))
    assert again.usage.cache_read_input_tokens == short.usage.cache_creation_input_tokens
    longer = ask(log_session(8, 500))
    assert longer.context_management.applied_edits[0].cleared_tool_uses == 5
    system_only = longer.usage.cache_read_input_tokens
    assert 0 < system_only < short.usage.cache_creation_input_tokens
    assert ask(log_session(8, 500)).usage.cache_read_input_tokens > system_only


@pytest.mark.filterwarnings("ignore:The model 'claude-opus:DeprecationWarning")
def test_clear_thinking_keeps_the_last_turns(
    client: anthropic.Anthropic, sim: AnthropicSim
) -> None:
    sim.responder = lambda body: Turn(thinking="Let me think this through. " * 30, text="Done.")
    history: list[dict[str, Any]] = []
    for words in ("one", "two", "three"):
        history.append(user(f"Task {words}."))
        reply = create(client, messages=history, thinking=BUDGET, model="claude-opus-4-5")
        history.append(assistant(*[b.model_dump(exclude_none=True) for b in reply.content]))
    history.append(user("Task four."))

    def ask(model: str, keep: Any = None) -> Any:
        edits = [] if keep is None else [{"type": "clear_thinking_20251015", "keep": keep}]
        management = {"edits": edits} if edits else None
        fields = {"messages": history, "thinking": BUDGET, "model": model}
        return create(
            client, EDITING, **fields, **({"context_management": management} if management else {})
        )

    opus_all = ask("claude-opus-4-5")  # Opus 4.5 keeps every turn's thinking
    opus_two = ask("claude-opus-4-5", {"type": "thinking_turns", "value": 2})
    (applied,) = opus_two.context_management.applied_edits
    assert applied.type == "clear_thinking_20251015" and applied.cleared_thinking_turns == 1
    assert (
        opus_all.usage.input_tokens - opus_two.usage.input_tokens
        == applied.cleared_input_tokens
        > 0
    )
    sonnet = ask(SONNET)  # Sonnet 4.5 keeps the ongoing turn's only: none here
    sonnet_all = ask(SONNET, "all")
    assert sonnet_all.context_management.applied_edits == []
    assert sonnet_all.usage.input_tokens == opus_all.usage.input_tokens > sonnet.usage.input_tokens


def test_compaction_answers_a_block_that_replaces_the_history(
    client: anthropic.Anthropic, sim: AnthropicSim
) -> None:
    history = log_session(12, 5_000)  # over 50,000 tokens
    management = {
        "edits": [
            {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
        ]
    }
    fields = {"model": OPUS, "context_management": management}
    first = create(client, COMPACT, messages=history, **fields)
    compaction, answer = first.content
    assert compaction.type == "compaction" and compaction.content.startswith("<summary>")
    assert compaction.signature and answer.text == "Noted." and first.stop_reason == "end_turn"
    summarizing, continuing = first.usage.iterations
    assert summarizing.type == "compaction" and summarizing.input_tokens > 50_000
    assert (
        continuing.type == "message" and continuing.input_tokens == first.usage.input_tokens < 1_000
    )
    call = sim.calls[-1]
    assert (
        call.prompt_tokens == first.usage.input_tokens
        and call.iterations[0]["type"] == "compaction"
    )
    assert sim.summary()["compactions"] == 1
    opus = spec_of(OPUS).price  # the summarizing sampling is billed too
    assert call.cost_usd == pytest.approx(sum(opus.cost(it) for it in call.iterations))
    assert call.cost_usd > 10 * opus.cost(call.iterations[-1])

    later = [
        *history,
        assistant(*[b.model_dump(exclude_none=True) for b in first.content]),
        user("Go on."),
    ]
    second = create(client, COMPACT, messages=later, **fields)
    assert [b.type for b in second.content] == ["text"] and len(second.usage.iterations) == 1
    assert second.usage.input_tokens < 1_000
    count = client.beta.messages.count_tokens(
        model=OPUS, tools=TOOLS, messages=later, context_management=management, betas=[COMPACT]
    )
    assert count.input_tokens == second.usage.input_tokens
    assert count.context_management.original_input_tokens > 50_000

    block = later[-2]["content"][0]
    edited = [
        *later[:-2],
        assistant({**block, "content": block["content"] + " (edited)"}),
        later[-1],
    ]
    error = refused(client, {"messages": edited, "tools": TOOLS, **fields}, COMPACT)
    assert error.error_code == "compaction_content_mismatch"
    forged = [*later[:-2], assistant({**block, "signature": sign("x")}), later[-1]]
    assert (
        refused(client, {"messages": forged, "tools": TOOLS, **fields}, COMPACT).error_code
        == "compaction_signature_invalid"
    )
    failed = [
        *later[:-2],
        assistant({"type": "compaction", "content": None}, {"type": "text", "text": "ok"}),
        later[-1],
    ]
    high = {
        "edits": [
            {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 190_000}}
        ]
    }
    kept = create(client, COMPACT, messages=failed, model=OPUS, context_management=high)
    assert kept.usage.input_tokens > 50_000  # a null compaction is a no-op


def test_pause_after_compaction_answers_the_block_alone(
    client: anthropic.Anthropic, sim: AnthropicSim
) -> None:
    history = [
        *log_session(12, 5_000),
        assistant({"type": "text", "text": "All read."}),
        user("Summarize them."),
    ]
    edit = {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": 50_000},
        "pause_after_compaction": True,
    }
    calls = []
    sim.responder = lambda body: calls.append(body) or Turn(text="Here is the digest.")
    paused = create(
        client, COMPACT, messages=history, model=OPUS, context_management={"edits": [edit]}
    )
    assert paused.stop_reason == "compaction" and [b.type for b in paused.content] == ["compaction"]
    assert paused.usage.input_tokens == paused.usage.output_tokens == 0 and calls == []
    assert [it.type for it in paused.usage.iterations] == ["compaction"]
    kept = [
        assistant(paused.content[0].model_dump(exclude_none=True)),
        *history[-2:],
    ]  # the docs' recipe
    resumed = create(
        client, COMPACT, messages=kept, model=OPUS, context_management={"edits": [edit]}
    )
    assert resumed.content[0].text == "Here is the digest." and len(calls) == 1


def test_compaction_streams_one_delta_and_keeps_the_system_cache(
    client: anthropic.Anthropic,
) -> None:
    system = [{"type": "text", "text": "You read logs. " * 400, "cache_control": EPHEMERAL}]
    management = {
        "edits": [
            {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
        ]
    }
    request = {"model": OPUS, "max_tokens": 4096, "tools": TOOLS, "system": system,
               "messages": log_session(12, 5_000), "context_management": management}  # fmt: skip
    with client.beta.messages.stream(betas=[COMPACT], **request) as stream:
        events = list(stream)
        final = stream.get_final_message()
    deltas = [e.delta.type for e in events if e.type == "content_block_delta" and e.index == 0]
    assert deltas == ["compaction_delta"]
    assert final.content[0].type == "compaction" and final.content[0].signature
    assert final.content[0].content.startswith("<summary>")
    summarizing, continuing = final.usage.iterations
    assert summarizing.cache_creation_input_tokens > 0  # the system prompt, written
    assert continuing.cache_read_input_tokens == summarizing.cache_creation_input_tokens
