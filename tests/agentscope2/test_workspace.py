"""What a 2.x `Agent` does around its own compression, kept with agentscope_ctx attached
(`agentscope_ctx/agentscope2/_workspace.py`): the read cache, the image cap, the agent's offloader.
Each was a failure of AgentScope's own tests with a `ContextManager` attached (issue 20)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
from pathlib import Path

import pytest
from agentscope.agent import Agent
from agentscope.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    HintBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
    UserMsg,
)
from agentscope.state import AgentState
from agentscope.tool import FunctionTool, Toolkit
from agentscope.workspace import LocalWorkspace
from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.agentscope2._images import _images as _images_in
from agentscope_ctx.agentscope2._images import cap_images
from agentscope_ctx.agentscope2._workspace import read_paths_seen
from agentscope_ctx.core._failures import FailureLog
from agentscope_ctx.core.truncation._offload import cut_texts
from agentscope_ctx.stores._tool_results import ToolResultStore
from tests.support.fakes import ALLOW, FakeChatModel, tool_call


def _config(tmp_path: Path, **fields: object) -> ContextConfig:
    return ContextConfig(working_dir=str(tmp_path / "ctx"), **fields)  # type: ignore[arg-type]


def _read(call_id: str, path: str, output: str = "content\n") -> AssistantMsg:
    return AssistantMsg(
        "Friday",
        [
            ToolCallBlock(id=call_id, name="Read", input=json.dumps({"file_path": path})),
            ToolResultBlock(id=call_id, name="Read", output=output, state=ToolResultState.SUCCESS),
        ],
    )


# -- read cache --------------------------------------------------------------------------


async def test_a_read_compacted_away_leaves_the_read_cache(tmp_path: Path) -> None:
    old, kept = tmp_path / "old.txt", tmp_path / "kept.txt"
    for f in (old, kept):
        f.write_text("content\n")
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=FakeChatModel(),
        toolkit=Toolkit(),
        state=AgentState(
            context=[
                UserMsg("user", "read old.txt"),  # the bulk in the outputs: the user's
                _read("r1", str(old), "x " * 400),  # words are carried verbatim (§13)
                UserMsg("user", "and kept.txt"),
                _read("r2", str(kept), "y " * 400),
            ]
        ),
    )
    manager = ContextManager(_config(tmp_path, max_input_tokens=2_000, keep_recent_ratio=0.1))
    manager.attach(agent)
    for f in (old, kept):
        await agent.state.tool_context.cache_file(file_path=str(f), lines=["content\n"])
    # an entry no Read in the context refers to (AgentScope drops it at compaction too)
    await agent.state.tool_context.cache_file(file_path=str(tmp_path / "x"), lines=[], mtime=1.0)

    report = await manager.compact(agent)

    assert report.compacted
    remaining = json.dumps([m.model_dump() for m in agent.state.context])
    assert "r1" not in remaining and "r2" in remaining
    # Edit/Write accept an edit only to a cached file: old.txt must be read again
    assert await agent.state.tool_context.get_cache(str(old)) is None
    assert await agent.state.tool_context.get_cache(str(tmp_path / "x")) is None
    assert await agent.state.tool_context.get_cache(str(kept)) is not None


async def test_a_masked_read_is_not_seen_an_excerpt_is(tmp_path: Path) -> None:
    store = ToolResultStore(tmp_path, 7)
    text = "".join(f"line {i}\n" for i in range(2_000))
    masked = (await cut_texts([text], 4, store, FailureLog()))[0]
    excerpt = (await cut_texts([text], 2_000, store, FailureLog()))[0]
    context = [
        _read("a", "/w/masked.py", masked),
        _read("b", "/w/excerpt.py", excerpt),
        _read("c", "/w/whole.py", "x = 1\n"),
        AssistantMsg(
            "Friday", [ToolCallBlock(id="d", name="Read", input='{"file_path": "/w/running.py"}')]
        ),
    ]
    assert read_paths_seen(context) == {"/w/excerpt.py", "/w/whole.py", "/w/running.py"}


# -- image cap ---------------------------------------------------------------------------


def _images(n: int) -> list[UserMsg]:
    return [
        UserMsg(
            "user",
            [
                DataBlock(
                    name=f"img{i}",
                    source=Base64Source(
                        data=base64.b64encode(f"image {i}".encode()).decode(),
                        media_type="image/png",
                    ),
                ),
                TextBlock(text=f"picture {i}"),
            ],
        )
        for i in range(n)
    ]


def _sent_images(model: FakeChatModel) -> int:
    messages = model.calls[-1]["messages"]
    return sum(
        1
        for msg in messages
        if not isinstance(msg.content, str)
        for block in msg.content
        if isinstance(block, DataBlock)
    )


async def test_the_image_cap_holds_and_older_images_are_saved(tmp_path: Path) -> None:
    model = FakeChatModel()
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=model,
        state=AgentState(context=_images(8)),
    )
    assert agent.context_config.max_image_num == 5
    ContextManager(_config(tmp_path)).attach(agent)

    await agent.reply(UserMsg("user", "what do you see?"))

    assert _sent_images(model) == 5
    notices = [
        block.text
        for msg in agent.state.context
        for block in msg.content
        if isinstance(block, TextBlock) and "is offloaded into" in block.text
    ]
    assert len(notices) == 3
    for i, notice in enumerate(notices):
        assert f"The image named 'img{i}' is offloaded into " in notice
        path = Path(notice.split("offloaded into ")[1].split(", you can")[0])
        assert path.read_bytes() == f"image {i}".encode()  # reads back, byte for byte


async def test_the_image_cap_saves_through_the_agents_offloader(tmp_path: Path) -> None:
    model = FakeChatModel()
    workdir = tmp_path / "workspace"
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=model,
        state=AgentState(context=_images(3)),
        offloader=LocalWorkspace(workdir=str(workdir)),
    )
    agent.context_config = agent.context_config.model_copy(update={"max_image_num": 1})
    ContextManager(_config(tmp_path)).attach(agent)

    await agent.compress_context()

    data = base64.b64encode(b"image 0").decode()
    rel = f"data/{hashlib.sha256(data.encode()).hexdigest()}.png"
    assert (workdir / rel).read_bytes() == b"image 0"
    first = agent.state.context[0].content[0]
    assert isinstance(first, TextBlock)
    assert first.text == (
        f"<system-reminder>The image named 'img0' is offloaded into workspace:///{rel}, "
        "you can refer to it when needed.</system-reminder>"
    )


# -- the agent's offloader ---------------------------------------------------------------


async def test_a_cut_output_and_the_compacted_context_reach_the_offloader(
    tmp_path: Path,
) -> None:
    big = "".join(f"row {i}\n" for i in range(20_000))

    async def dump() -> str:
        """Print a large table."""
        return big

    workdir = tmp_path / "workspace"
    model = FakeChatModel([tool_call("dump", "c1"), "Done."])
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=model,
        toolkit=Toolkit(tools=[FunctionTool(dump, permission=ALLOW)]),
        offloader=LocalWorkspace(workdir=str(workdir)),
        state=AgentState(session_id="s1"),
    )
    # a small kept share: the compaction below takes the dump too (a summary of the user's
    # three words alone would not make the prompt smaller, and is not made)
    manager = ContextManager(_config(tmp_path, keep_recent_ratio=0.01))
    manager.attach(agent)

    await agent.reply(UserMsg("user", "dump the table"))

    copy = workdir / "sessions" / "s1" / "tool_result-c1.txt"
    assert copy.read_text() == big  # the whole output, in the agent's workspace
    shown = json.dumps([m.model_dump() for m in agent.state.context])
    assert "<<<TRUNCATED>>>" in shown  # the context keeps our notice (tool_result/ is the truth)

    await agent.reply(UserMsg("user", "thanks " * 50))
    report = await manager.compact(agent)
    assert report.compacted
    offloaded = workdir / "sessions" / "s1" / "context.jsonl"
    lines = offloaded.read_text().splitlines()
    assert any("dump the table" in line for line in lines)
    reminder = f"The compressed context is offloaded to '{offloaded}'"
    assert reminder in str(agent.state.summary)
    assert agent.state.middle_context["agentscope_ctx"]["offload_note"].count(reminder) == 1


async def test_a_read_masked_by_age_leaves_the_read_cache(tmp_path: Path) -> None:
    files = [tmp_path / f"f{i}.py" for i in range(4)]
    context: list[UserMsg | AssistantMsg] = []
    for i, f in enumerate(files):
        body = "".join(f"line {n} of {f.name}\n" for n in range(300))
        f.write_text(body)
        context += [UserMsg("user", f"read {f.name}"), _read(f"r{i}", str(f), body)]
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=FakeChatModel(),
        toolkit=Toolkit(),
        state=AgentState(context=context),
    )
    config = _config(tmp_path, clear_at_least=1, tool_result={"recent_n": 1, "mask_after": 2})
    ContextManager(config).attach(agent)
    for f in files:
        await agent.state.tool_context.cache_file(file_path=str(f), lines=["x\n"])

    await agent.compress_context()  # outside a reply: one run of the pipeline

    masked = read_paths_seen(agent.state.context) ^ {str(f) for f in files}
    assert masked == {str(files[0]), str(files[1])}  # older than mask_after: notice alone
    for f in files:
        cached = await agent.state.tool_context.get_cache(str(f))
        assert (cached is None) == (str(f) in masked), f


_PLACES = st.sampled_from(["user", "assistant", "result", "hint"])


def _image_context(places: list[str]) -> list[UserMsg | AssistantMsg]:
    """One message per image, at the given place (user/assistant top level, inside a tool
    result, inside a hint), each image distinct."""
    msgs: list[UserMsg | AssistantMsg] = []
    for i, place in enumerate(places):
        image = DataBlock(
            name=f"img{i}",
            source=Base64Source(
                data=base64.b64encode(f"image {i}".encode()).decode(), media_type="image/png"
            ),
        )
        if place == "user":
            msgs.append(UserMsg("user", [image, TextBlock(text=f"see {i}")]))
        elif place == "assistant":
            msgs.append(AssistantMsg("Friday", [TextBlock(text=f"drew {i}"), image]))
        elif place == "result":
            call = ToolCallBlock(id=f"c{i}", name="view", input="{}")
            result = ToolResultBlock(
                id=f"c{i}", name="view", output=[image], state=ToolResultState.SUCCESS
            )
            msgs.append(AssistantMsg("Friday", [call, result]))
        else:
            msgs.append(AssistantMsg("Friday", [HintBlock(hint=[TextBlock(text="hint"), image])]))
    return msgs


@settings(max_examples=30, deadline=None)
@given(places=st.lists(_PLACES, max_size=9), limit=st.integers(0, 6))
def test_image_cap_keeps_the_newest_and_saves_the_rest(
    tmp_path_factory: pytest.TempPathFactory, places: list[str], limit: int
) -> None:
    media = tmp_path_factory.mktemp("media")
    agent = Agent(
        name="Friday",
        system_prompt="You are Friday.",
        model=FakeChatModel(),
        state=AgentState(context=_image_context(places)),
    )
    agent.context_config = agent.context_config.model_copy(update={"max_image_num": limit})
    ids = [[b.id for b in m.content] for m in agent.state.context]

    counts: dict = {}  # kept between calls, as the manager does
    replaced = asyncio.run(cap_images(agent, media, counts))

    excess = max(len(places) - limit, 0)
    assert replaced == excess
    dump = json.dumps([m.model_dump() for m in agent.state.context])
    for i in range(len(places)):  # the oldest are notices naming a file that reads back
        if i < excess:
            assert f"image named 'img{i}' is offloaded into " in dump
            assert f'"name": "img{i}"' not in dump
        else:
            assert f'"name": "img{i}"' in dump
    for text in re.findall(r"offloaded into (\S+), you can", dump):
        assert Path(text).read_bytes().startswith(b"image ")
    assert [[b.id for b in m.content] for m in agent.state.context] == ids  # block ids kept
    assert asyncio.run(cap_images(agent, media, counts)) == 0  # idempotent
    # more images later (new messages; the live reply grows): the cap still holds
    agent.state.context += _image_context(["user", "result"])
    agent.state.context[-1].content.append(_image_context(["assistant"])[0].content[1])
    asyncio.run(cap_images(agent, media, counts))
    assert len(_images_in(agent.state.context)) == min(limit, len(places) + 3)
