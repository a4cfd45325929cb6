"""Follow truncation notices to the end, as an agent would, and return what was read; a page
over 200 KB to follow (`HTML`, `browse`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentscope_ctx.core.truncation._truncation import parse_notice

Reader = Callable[[str, int, int], Awaitable[str]]

HTML = (
    "<html><body>\n"
    + "".join(
        f"<div class='row'><a href='/item/{i}'>Item {i} — 价格 {i}¥ 🛒</a></div>\r\n"
        for i in range(2_600)
    )
    + "</body></html>"
)
"""A web page of over 200 KB: multi-byte characters, emoji and CRLF line ends."""


def browse(url: str) -> str:
    """Open a web page.

    Args:
        url (str): the page.
    """
    return HTML


async def follow_chain(first_output: str, read: Reader, *, max_steps: int = 100_000) -> str:
    """Concatenate the excerpts of `first_output` and of every `read(path, line, offset)`
    continuation until an output carries no notice."""
    parts: list[str] = []
    output = first_output
    for _ in range(max_steps):
        parsed = parse_notice(output)
        if parsed is None:
            parts.append(output)
            return "".join(parts)
        excerpt, notice = parsed
        parts.append(excerpt)
        output = await read(notice.file_path, notice.next.line, notice.next.offset)
    raise AssertionError("the chain did not end")


def position_to_index(text: str, line: int, offset: int) -> int:
    """Index in `text` of a 1-based line and a character offset into it."""
    index = 0
    for _ in range(line - 1):
        index = text.index("\n", index) + 1
    return index + offset


async def check_masked_read_chain(
    chain: list[str], masked: str, shown: str, *, store_dir: Path, read: Reader
) -> Path:
    """A `read_file` output masked after it was shown (issue 19.1, both lines): the excerpts
    the agent read (`chain`: the masked output as it saw it, then each `read_file` answer)
    concatenate back to what it was shown first (`shown`); the masked output's notice names a
    snapshot in `store_dir` holding exactly `shown`, and following it with `read` gives
    `shown` back. Returns the snapshot."""
    assert len(chain) >= 2 and len(chain[0].encode()) < 800
    reads = iter(chain[1:])

    async def replay(path: str, line: int, offset: int) -> str:
        return next(reads)

    assert await follow_chain(chain[0], replay) == shown
    assert next(reads, None) is None

    parsed = parse_notice(masked)
    assert parsed is not None and len(masked.encode()) < 800  # masked: the notice alone
    snapshot = Path(parsed[1].file_path)
    assert snapshot.parent == store_dir
    assert snapshot.read_bytes() == shown.encode("utf-8")
    assert await follow_chain(masked, read) == shown
    return snapshot


def manager_reader(manager: Any) -> Reader:
    """A `Reader` through a `ContextManager`'s own `read_file` tool (`manager.reader`), as
    the agent reads."""

    async def read(path: str, line: int, offset: int) -> str:
        response = await manager.reader.read_file(path, line, offset)
        return str(response.content[0]["text"])

    return read
