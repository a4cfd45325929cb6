"""Follow truncation notices to the end, as an agent would, and return what was read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agentscope_ctx.core._truncation import parse_notice

Reader = Callable[[str, int, int], Awaitable[str]]


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
