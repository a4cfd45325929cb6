"""First truncation inside a real AgentScope Toolkit, and the read_file chain back."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(reason_1x("the 1.x Toolkit middleware"), allow_module_level=True)

from agentscope.message import ImageBlock, TextBlock, ToolUseBlock
from agentscope.tool import Toolkit, ToolResponse

from agentscope_ctx.agentscope1._middleware import TruncationMiddleware
from agentscope_ctx.core.config._config import ToolResultConfig
from agentscope_ctx.core.truncation._truncation import parse_notice, utf8_len
from agentscope_ctx.recall._read_file import FileReader
from agentscope_ctx.stores._tool_results import ToolResultPolicy, ToolResultStore
from tests.support.chain import HTML, browse, follow_chain
from tests.support.react1 import add_text_tools


def setup(tmp_path: Path, **limits: int) -> tuple[Toolkit, ToolResultStore, FileReader]:
    config = ToolResultConfig(**limits)
    policy = ToolResultPolicy(config)
    store = ToolResultStore(tmp_path, config.retention_days)
    reader = FileReader([tmp_path], policy)
    toolkit = Toolkit()
    toolkit.register_middleware(
        TruncationMiddleware(store, policy, skip_tools=frozenset({"read_file"})).handle
    )
    toolkit.register_tool_function(reader.read_file)
    return toolkit, store, reader


async def call(toolkit: Toolkit, name: str, **arguments: object) -> list[ToolResponse]:
    use = ToolUseBlock(type="tool_use", id="id-1", name=name, input=arguments)
    return [chunk async for chunk in await toolkit.call_tool_function(use)]


async def test_200kb_html_is_cut_saved_and_chained_back(tmp_path: Path) -> None:
    assert utf8_len(HTML) > 200_000
    toolkit, store, reader = setup(tmp_path)

    add_text_tools(toolkit, browse)
    chunks = await call(toolkit, "browse", url="http://127.0.0.1:8000/")
    stored = chunks[-1].content[0]["text"]
    assert utf8_len(stored) <= 32_768
    excerpt, notice = parse_notice(stored)  # type: ignore[misc]
    saved = Path(notice.file_path)
    assert saved.parent == store.dir
    assert saved.read_bytes() == HTML.encode("utf-8")  # exact bytes, \r\n kept

    async def read(path: str, line: int, offset: int) -> str:
        chunks = await call(
            toolkit, "read_file", file_path=path, start_line=line, line_offset=offset
        )
        return str(chunks[-1].content[0]["text"])

    assert await follow_chain(stored, read) == HTML
    assert len(list(store.dir.iterdir())) == 1  # read_file copies nothing


async def test_small_output_untouched_and_no_file(tmp_path: Path) -> None:
    toolkit, store, _ = setup(tmp_path)

    def echo(word: str) -> str:
        """Echo.

        Args:
            word (str): a word.
        """
        return word

    add_text_tools(toolkit, echo)
    chunks = await call(toolkit, "echo", word="hello")
    assert chunks[-1].content[0]["text"] == "hello"
    assert not store.dir.exists()


async def test_streamed_output_last_chunk_truncated(tmp_path: Path) -> None:
    toolkit, store, _ = setup(tmp_path)
    lines = [f"progress line {i}\n" for i in range(5_000)]

    async def tail_log(path: str) -> AsyncGenerator[ToolResponse, None]:
        """Stream a log.

        Args:
            path (str): the log.
        """
        for k in range(1, 6):
            text = "".join(lines[: k * 1_000])
            yield ToolResponse(
                content=[TextBlock(type="text", text=text)], stream=True, is_last=k == 5
            )

    toolkit.register_tool_function(tail_log)
    chunks = await call(toolkit, "tail_log", path="x.log")
    assert utf8_len(chunks[0].content[0]["text"]) > 10_000  # shown whole while streaming
    final = chunks[-1].content[0]["text"]
    assert chunks[-1].is_last and utf8_len(final) <= 32_768
    notice = parse_notice(final)[1]  # type: ignore[index]
    assert Path(notice.file_path).read_text() == "".join(lines)


async def test_stream_without_last_chunk_gets_a_truncated_final(tmp_path: Path) -> None:
    toolkit, _, _ = setup(tmp_path)

    async def sloppy() -> AsyncGenerator[ToolResponse, None]:
        """A tool that never marks its last chunk."""
        yield ToolResponse(content=[TextBlock(type="text", text="z\n" * 40_000)], is_last=False)

    toolkit.register_tool_function(sloppy)
    chunks = await call(toolkit, "sloppy")
    assert chunks[-1].is_last and parse_notice(chunks[-1].content[0]["text"]) is not None


async def test_multi_block_response_keeps_non_text_blocks(tmp_path: Path) -> None:
    toolkit, _, _ = setup(tmp_path)
    image = ImageBlock(type="image", source={"type": "url", "url": "http://127.0.0.1/x.png"})

    def shot() -> ToolResponse:
        """Screenshot and page text."""
        return ToolResponse(
            content=[
                TextBlock(type="text", text="a\n" * 30_000),
                image,
                TextBlock(type="text", text="b\n" * 30_000),
            ]
        )

    toolkit.register_tool_function(shot)
    content = (await call(toolkit, "shot"))[-1].content
    assert content[1] == image
    assert sum(utf8_len(b["text"]) for b in (content[0], content[2])) <= 32_768
    assert all(parse_notice(b["text"]) for b in (content[0], content[2]))


async def test_markdown_policy_per_path_and_per_tool(tmp_path: Path) -> None:
    toolkit, _, _ = setup(tmp_path, recent_max_bytes=4_096, markdown_recent_max_bytes=16_384)
    body = "# Skill\n" + "- step\n" * 5_000

    def view(path: str) -> str:
        """View a file.

        Args:
            path (str): file path.
        """
        return body

    add_text_tools(toolkit, view)
    md = (await call(toolkit, "view", path="skills/deploy/SKILL.md"))[-1].content[0]["text"]
    txt = (await call(toolkit, "view", path="notes.txt"))[-1].content[0]["text"]
    assert 4_096 < utf8_len(md) <= 16_384 and utf8_len(txt) <= 4_096
    assert (
        ToolResultPolicy(ToolResultConfig(protected_tools=["view"])).limits("view").recent == 65_536
    )


async def test_offload_failure_keeps_output_whole(tmp_path: Path) -> None:
    (tmp_path / "tool_result").write_text("a file where the directory should be")
    toolkit, _, _ = setup(tmp_path)

    def big() -> str:
        """Big output."""
        return "q\n" * 40_000

    add_text_tools(toolkit, big)
    assert (await call(toolkit, "big"))[-1].content[0]["text"] == "q\n" * 40_000


def test_cleanup_collects_references_only_when_due(tmp_path: Path) -> None:
    store = ToolResultStore(tmp_path, 7)
    calls: list[int] = []

    def referenced() -> list[str]:
        calls.append(1)
        return []

    store.maybe_cleanup(referenced)
    store.maybe_cleanup(referenced)  # within the hour: not due, references not collected
    assert calls == [1]
