"""What a 2.x `Agent` does around its own compression, kept with agentscope_ctx attached
(`agentscope_ctx/_v2/_workspace.py`): the read cache, the image cap, the agent's offloader.
Each was a failure of AgentScope's own tests with a `ContextManager` attached (issue 20)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from agentscope.agent import Agent
from agentscope.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
    UserMsg,
)
from agentscope.state import AgentState
from agentscope.tool import FunctionTool, Toolkit
from agentscope.workspace import LocalWorkspace

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx._failures import FailureLog
from agentscope_ctx._offload import cut_texts
from agentscope_ctx._tool_results import ToolResultStore
from agentscope_ctx._v2._workspace import read_paths_seen
from tests.v2.fakes import ALLOW, FakeChatModel, tool_call

PNG = base64.b64encode(b"\x89PNG fake image bytes").decode()


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
                UserMsg("user", "read old.txt " + "x " * 400),
                _read("r1", str(old)),
                UserMsg("user", "and kept.txt " + "y " * 400),
                _read("r2", str(kept)),
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
    manager = ContextManager(_config(tmp_path))
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
