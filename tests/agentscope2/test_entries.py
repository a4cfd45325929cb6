"""2.x messages as the core's entries and back (`agentscope_ctx.agentscope2._entries`), and the
`StateMirror` that keeps a `ContextMemory` in step with an `AgentState`."""

from __future__ import annotations

import asyncio
import json

from agentscope.message import (
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from agentscope.state import AgentState
from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_ctx.agentscope2._entries import to_blocks, to_entries
from agentscope_ctx.agentscope2._mirror import STATE_KEY, StateMirror
from agentscope_ctx.core.context._memory import ContextMemory

_text = st.text(max_size=40)


@st.composite
def _blocks(draw: st.DrawFn) -> list[object]:
    blocks: list[object] = []
    for i in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["text", "thinking", "call", "result", "hint", "image"]))
        if kind == "text":
            blocks.append(TextBlock(text=draw(_text)))
        elif kind == "thinking":
            # an Anthropic block keeps its signature; a redacted one its opaque data
            extra = draw(
                st.sampled_from(
                    [
                        {},
                        {"signature": "sig-" + str(i)},
                        {"redacted_thinking_data": "enc-" + str(i)},
                    ]
                )
            )
            text = "" if "redacted_thinking_data" in extra else draw(_text)
            blocks.append(ThinkingBlock(thinking=text, **extra))
        elif kind == "call":
            args = draw(st.dictionaries(st.sampled_from("abc"), _text, max_size=2))
            blocks.append(ToolCallBlock(id=f"c{i}", name="shell", input=json.dumps(args)))
        elif kind == "result":
            output = draw(st.one_of(_text, st.lists(_text.map(lambda t: TextBlock(text=t)))))
            blocks.append(ToolResultBlock(id=f"c{i}", name="shell", output=output, state="success"))
        elif kind == "hint":
            blocks.append(HintBlock(hint=draw(_text), source="runtime"))
        else:
            source = Base64Source(data="aGVsbG8=", media_type="image/png")
            blocks.append(DataBlock(source=source))
    return blocks


def _dump(blocks: list[object]) -> list[dict[str, object]]:
    return [b.model_dump(mode="json") for b in blocks]  # type: ignore[attr-defined]


@settings(max_examples=150, deadline=None)
@given(_blocks())
def test_entries_round_trip_block_for_block(blocks: list[object]) -> None:
    """Entries → blocks gives back every block, ids, states and times included; a reply's
    tool results and hints are entries of their own, with unique ids."""
    msg = Msg(name="agent", role="assistant", content=blocks)
    pairs = to_entries(msg)
    back = [b for entry, (_, origin) in pairs for b in to_blocks(entry.content, origin)]
    assert _dump(back) == _dump(blocks)
    ids = [entry.id for entry, _ in pairs]
    assert len(set(ids)) == len(ids)
    results = [e for e, _ in pairs if e.has_content_blocks("tool_result")]
    assert all(e.role == "system" and len(e.get_content_blocks()) == 1 for e in results)
    assert sum(len(e.get_content_blocks()) for e, _ in pairs) == len(blocks)


def test_a_cut_output_keeps_the_blocks_identity() -> None:
    call = ToolCallBlock(id="c1", name="shell", input='{"command": "ls"}', state="finished")
    result = ToolResultBlock(id="c1", name="shell", output="x" * 100, state="success")
    msg = Msg(name="agent", role="assistant", content=[call, result])
    (_, _), (entry, (_, origin)) = to_entries(msg)
    entry.content = [{**entry.content[0], "output": [{"type": "text", "text": "cut"}]}]
    (block,) = to_blocks(entry.content, origin)
    assert isinstance(block, ToolResultBlock)
    assert (block.id, block.state, block.created_at) == (result.id, result.state, result.created_at)
    assert block.output[0].text == "cut"  # type: ignore[union-attr]


def _state(*msgs: Msg) -> AgentState:
    return AgentState(context=list(msgs))


def test_mirror_pull_push_without_change_keeps_every_object(tmp_path: object) -> None:
    async def main() -> None:
        user = Msg(name="user", role="user", content=[TextBlock(text="hi")])
        reply = Msg(
            name="agent",
            role="assistant",
            content=[
                ToolCallBlock(id="c1", name="shell", input="{}"),
                ToolResultBlock(id="c1", name="shell", output="ok", state="success"),
                TextBlock(text="done"),
            ],
        )
        state = _state(user, reply)
        mirror = StateMirror(ContextMemory(str(tmp_path)))
        await mirror.pull(state)
        assert [m.role for m in mirror.memory.messages()] == [
            "user",
            "assistant",
            "system",
            "assistant",
        ]
        before = list(state.context)
        mirror.push(state)
        assert all(a is b for a, b in zip(state.context, before, strict=True))
        assert state.middle_context[STATE_KEY] == {"summary": "", "calibration": {}}
        # appended blocks (the agent's next round) become new entries, nothing else moves
        reply.content.append(HintBlock(hint="runtime state", source="runtime"))
        revision = mirror.memory.revision
        await mirror.pull(state)
        assert len(mirror.memory.messages()) == 5 and mirror.memory.revision == revision
        # the one exception: the last run grows (text after text); it is replaced in place
        reply.content.append(TextBlock(text="more"))
        await mirror.pull(state)
        reply.content.append(TextBlock(text="and more"))
        await mirror.pull(state)
        last = mirror.memory.messages()[-1]
        assert last.get_text_content() == "more\nand more" and mirror.memory.revision > revision

    asyncio.run(main())


def test_mirror_writes_back_deletions_and_the_summary(tmp_path: object) -> None:
    async def main() -> None:
        first = Msg(name="user", role="user", content=[TextBlock(text="old")])
        live = Msg(
            name="agent", role="assistant", content=[TextBlock(text="a"), TextBlock(text="b")]
        )
        state = _state(first, live)
        state.reply_context.reply_id = live.id
        mirror = StateMirror(ContextMemory(str(tmp_path)))
        await mirror.pull(state)
        memory = mirror.memory
        await memory.delete([e.id for e in memory.messages()])
        await memory.update_compressed_summary("the summary")
        mirror.push(state)
        # the live reply keeps its (now empty) message, as AgentScope's compression does
        assert [m.id for m in state.context] == [live.id] and state.context[0].content == []
        assert "the summary" in str(state.summary)
        assert state.middle_context[STATE_KEY]["summary"] == "the summary"
        # a new process: the summary comes back from middle_context, not the shown text
        again = StateMirror(ContextMemory(str(tmp_path)))
        await again.pull(state)
        assert again.memory.compact_summary == "the summary"

    asyncio.run(main())


def test_someone_elses_summary_is_kept(tmp_path: object) -> None:
    async def main() -> None:
        state = AgentState(summary="written by AgentScope's compression")
        mirror = StateMirror(ContextMemory(str(tmp_path)))
        await mirror.pull(state)
        assert mirror.memory.compact_summary == "written by AgentScope's compression"

    asyncio.run(main())


@settings(max_examples=60, deadline=None)
@given(_blocks(), st.lists(st.integers(1, 3), max_size=8))
def test_a_growing_reply_converts_only_its_new_part_the_same(
    blocks: list[object], steps: list[int]
) -> None:
    """The live reply grows by appended blocks; the mirror converts from its last entry on,
    and ends with exactly the entries of a conversion from scratch."""

    async def main(tmp: str) -> None:
        reply = Msg(name="agent", role="assistant", content=[])
        state = _state(reply)
        mirror = StateMirror(ContextMemory(tmp))
        await mirror.pull(state)
        rest = list(blocks)
        for n in [*steps, len(rest)]:
            reply.content.extend(rest[:n])  # type: ignore[arg-type]
            del rest[:n]
            await mirror.pull(state)
            fresh = [(e.id, e.content) for e, _ in to_entries(reply)]
            assert [(m.id, m.content) for m in mirror.memory.messages()] == fresh

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(tmp))
