"""The 2.x adapter's first truncation, in a real AgentScope 2.x `Agent` with a real `Toolkit`
(only the model is scripted): cut, saved, and followed back through `read_file`."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from agentscope.agent import Agent
from agentscope.agent import ContextConfig as AgentContextConfig
from agentscope.event import ToolResultTextDeltaEvent
from agentscope.message import Msg, TextBlock, ToolResultBlock, UserMsg
from agentscope.tool import FunctionTool, Toolkit

from agentscope_ctx import ContextConfig, ContextUsageError
from agentscope_ctx.agentscope2 import READ_FILE, ContextMiddleware, ReadFileTool
from agentscope_ctx.core.truncation._truncation import parse_notice, utf8_len
from tests.support.chain import HTML, browse, follow_chain
from tests.support.fakes import ALLOW, FakeChatModel, Reply, text, tool_call


def fetch(url: str) -> str:
    """Fetch a document.

    Args:
        url (str): the document.
    """
    return HTML[:100_000]


def echo(word: str) -> str:
    """Say a word back.

    Args:
        word (str): the word.
    """
    return word


def output_text(block: ToolResultBlock) -> str:
    if isinstance(block.output, str):
        return block.output
    return "".join(item.text for item in block.output if isinstance(item, TextBlock))


def results(agent: Agent) -> list[ToolResultBlock]:
    """The tool results in the agent's context, oldest first."""
    return [
        block
        for msg in agent.state.context
        for block in msg.content
        if isinstance(block, ToolResultBlock)
    ]


def follow_notices(messages: list[Msg]) -> Reply:
    """The model's policy: read on from the notice of the newest tool result, until none."""
    newest = [b for b in messages[-1].content if isinstance(b, ToolResultBlock)][-1]
    parsed = parse_notice(output_text(newest))
    if parsed is None:
        return text("I have read it all.")
    notice = parsed[1]
    return tool_call(
        READ_FILE,
        file_path=notice.file_path,
        start_line=notice.next.line,
        line_offset=notice.next.offset,
    )


def make_agent(
    tmp_path: Path,
    model: FakeChatModel,
    *tools: FunctionTool,
    middleware: ContextMiddleware | None = None,
    toolkit: Toolkit | None = None,
    context_config: AgentContextConfig | None = None,
) -> tuple[Agent, ContextMiddleware]:
    middleware = middleware or ContextMiddleware(ContextConfig(working_dir=tmp_path))
    agent = Agent(
        name="assistant",
        system_prompt="You are a helpful assistant.",
        model=model,
        toolkit=toolkit or Toolkit(tools=list(tools)),
        middlewares=[middleware],
        context_config=context_config,
    )
    return agent, middleware


@pytest.mark.parametrize("stream", [False, True])
async def test_i14_1_v2_first_truncation_is_lossless_through_read_file(
    tmp_path: Path, stream: bool
) -> None:
    assert utf8_len(HTML) > 200_000
    model = FakeChatModel(
        [tool_call("browse", url="http://127.0.0.1:8000/")], stream=stream, default=follow_notices
    )
    agent, middleware = make_agent(tmp_path, model, FunctionTool(browse, permission=ALLOW))

    streamed: dict[str, list[str]] = {}
    async for event in agent.reply_stream(UserMsg("user", "Read the page.")):
        if isinstance(event, ToolResultTextDeltaEvent):
            streamed.setdefault(event.tool_call_id, []).append(event.delta)

    stored = results(agent)
    first = output_text(stored[0])
    assert stored[0].name == "browse" and utf8_len(first) <= 32_768
    excerpt, notice = parse_notice(first)  # type: ignore[misc]
    saved = Path(notice.file_path)
    assert saved.parent == middleware.store.dir
    assert saved.read_bytes() == HTML.encode("utf-8")  # exact bytes, \r\n kept
    # The user was shown the whole output while it streamed; the context holds the excerpt.
    assert "".join(streamed[stored[0].id]) == HTML

    # The model followed every notice with read_file, through the agent: the excerpts in
    # the context concatenate back to the page.
    later = iter(stored[1:])

    async def read(path: str, line: int, offset: int) -> str:
        block = next(later)
        assert block.name == READ_FILE
        return output_text(block)

    assert await follow_chain(first, read) == HTML
    assert next(later, None) is None
    assert len(stored) > 5
    assert [p.name for p in middleware.store.dir.iterdir()] == [saved.name]  # no copies


async def test_i14_1_v2_small_output_untouched_and_no_file(tmp_path: Path) -> None:
    model = FakeChatModel([tool_call("echo", word="hello"), "ok"])
    agent, middleware = make_agent(tmp_path, model, FunctionTool(echo, permission=ALLOW))

    await agent.reply(UserMsg("user", "Say hello."))

    assert [output_text(b) for b in results(agent)] == ["hello"]
    assert not middleware.store.dir.exists()
    assert READ_FILE in [t["function"]["name"] for t in model.calls[0]["tools"]]


async def test_i14_1_v2_takes_over_the_agents_own_tool_result_limit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The agent cuts a stored result over `tool_result_limit` tokens to a head and drops the
    # rest, our notice included: with a limit below ours, read_file's 32 KB excerpts (which
    # the middleware does not cut again) would be cut and the chain broken.
    given = AgentContextConfig(tool_result_limit=4_000)
    model = FakeChatModel([tool_call("browse", url="x")], default=follow_notices)
    agent, _ = make_agent(
        tmp_path, model, FunctionTool(browse, permission=ALLOW), context_config=given
    )

    with caplog.at_level(logging.INFO, logger="agentscope_ctx"):
        await agent.reply(UserMsg("user", "Read the page."))

    assert agent.context_config.tool_result_limit == 65_536  # markdown_recent_max_bytes
    assert given.tool_result_limit == 4_000  # the caller's object is not changed
    raised = [r for r in caplog.records if "raising the tool_result_limit" in r.getMessage()]
    assert [r.levelno for r in raised] == [logging.WARNING]  # a deliberate value: warned
    stored = [output_text(b) for b in results(agent)]
    assert all(utf8_len(out) <= 32_768 for out in stored)
    later = iter(stored[1:])

    async def read(path: str, line: int, offset: int) -> str:
        return next(later)

    assert await follow_chain(stored[0], read) == HTML


async def test_i14_1_v2_read_file_from_list_tools_and_within_roots(tmp_path: Path) -> None:
    middleware = ContextMiddleware(ContextConfig(working_dir=tmp_path, read_roots=[tmp_path]))
    notes = tmp_path / "notes.txt"
    notes.write_text("first\nsecond\n", encoding="utf-8")
    model = FakeChatModel(
        [
            tool_call(READ_FILE, file_path=str(notes), start_line=2),
            tool_call(READ_FILE, file_path="/etc/hostname"),
            "ok",
        ]
    )
    # The 2.x way to give a middleware's tools to an agent; nothing is added twice.
    toolkit = Toolkit(tools=await middleware.list_tools())
    agent, _ = make_agent(tmp_path, model, middleware=middleware, toolkit=toolkit)

    reply = await agent.reply(UserMsg("user", "Read my notes."))

    assert reply.get_text_content() == "ok"  # no confirmation asked: read_file is allowed
    assert await toolkit.get_tool(READ_FILE) is middleware.read_file
    inside, outside = (output_text(b) for b in results(agent))
    assert inside == "second\n"
    assert outside.startswith("Error: ") and "outside the readable roots" in outside


async def test_i14_1_v2_foreign_read_file_is_refused(tmp_path: Path) -> None:
    def read_file(file_path: str) -> str:
        """My own reader.

        Args:
            file_path (str): the file.
        """
        return ""

    model = FakeChatModel(["ok"])
    agent, _ = make_agent(tmp_path, model, FunctionTool(read_file, permission=ALLOW))

    with pytest.raises(ContextUsageError, match="already has a tool named 'read_file'"):
        await agent.reply(UserMsg("user", "hi"))


async def test_i14_1_v2_another_middlewares_read_file_must_reach_this_store(
    tmp_path: Path,
) -> None:
    mine = ContextMiddleware(ContextConfig(working_dir=tmp_path / "a", read_roots=[tmp_path]))
    theirs = ContextMiddleware(ContextConfig(working_dir=tmp_path / "b", read_roots=[tmp_path]))
    blind = ContextMiddleware(
        ContextConfig(working_dir=tmp_path / "c", read_roots=[tmp_path / "c"])
    )
    assert isinstance(theirs.read_file, ReadFileTool)
    toolkit = Toolkit(tools=await theirs.list_tools())
    agent, _ = make_agent(tmp_path, FakeChatModel(["ok"]), middleware=mine, toolkit=toolkit)
    await agent.reply(UserMsg("user", "hi"))  # theirs reads below tmp_path: a's store too

    toolkit = Toolkit(tools=await blind.list_tools())
    agent, _ = make_agent(tmp_path, FakeChatModel(["ok"]), middleware=mine, toolkit=toolkit)
    with pytest.raises(ContextUsageError):
        await agent.reply(UserMsg("user", "hi"))


async def test_i14_1_v2_unsaved_output_stays_whole_and_the_reply_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "tool_result").write_text("a file where the store's directory should be")
    model = FakeChatModel([tool_call("fetch", url="x"), tool_call("fetch", url="y"), "ok"])
    agent, _ = make_agent(tmp_path, model, FunctionTool(fetch, permission=ALLOW))

    with caplog.at_level(logging.ERROR, logger="agentscope_ctx"):
        reply = await agent.reply(UserMsg("user", "Fetch the document twice."))

    assert reply.get_text_content() == "ok"
    whole = HTML[:100_000]
    assert [output_text(b) for b in results(agent)] == [whole, whole]  # nothing lost
    errors = [r for r in caplog.records if "keeping tool output whole" in r.getMessage()]
    assert len(errors) == 1  # logged once, not at every call
