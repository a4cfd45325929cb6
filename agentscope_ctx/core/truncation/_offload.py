"""The first truncation's one step, on either AgentScope line: the text blocks of one tool
output, each saved whole and cut to its share of the output's limit (DESIGN.md §4).

Both adapters call `cut_texts` (1.x: `TruncationMiddleware`; 2.x: `ContextMiddleware.on_acting`)
and put the texts back into their own block types."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._errors import OffloadError
from .._failures import FailureLog
from ._truncation import excerpt_with_notice, parse_notice

if TYPE_CHECKING:  # annotations only: the caller passes the store in
    from .._seams import OutputSeam

__all__ = ["block_budget", "clean_text", "cut_texts", "offload_text"]

# Split the budget among the text blocks of one response, but never below this.
_MIN_BLOCK_BYTES = 1_024


def block_budget(limit: int, n_text_blocks: int) -> int:
    """Byte limit of each text block when one output has `n_text_blocks` of them."""
    return max(limit // max(n_text_blocks, 1), min(limit, _MIN_BLOCK_BYTES))


def clean_text(text: object) -> str:
    """A tool's text as valid UTF-8 `str`: non-strings are rendered, lone surrogates (invalid
    UTF-8 that a tool decoded with `surrogateescape`) become U+FFFD, so that the context and
    the saved file always hold the same characters."""
    result = text if isinstance(text, str) else ("" if text is None else str(text))
    try:
        result.encode("utf-8")
    except UnicodeEncodeError:
        result = result.encode("utf-8", "replace").decode("utf-8")
    return result


async def offload_text(text: str, max_bytes: int, store: OutputSeam) -> str:
    """`text` within `max_bytes`: unchanged if it fits, else saved whole and cut with a notice.

    Raises:
        OffloadError: the full text could not be saved; nothing was cut.
    """
    data = text.encode("utf-8")  # encoded once, for the size check and the file
    if len(data) <= max_bytes and parse_notice(text) is None:
        return text
    ref = await asyncio.to_thread(store.save, data)
    del data  # not held while the excerpt is made: peak memory stays near one encoded copy
    return excerpt_with_notice(text, max_bytes=max_bytes, file_path=os.fspath(ref))


async def cut_texts(
    texts: Sequence[object], limit: int, store: OutputSeam, failures: FailureLog
) -> list[str]:
    """The text blocks of one output, each within its share of `limit` bytes: saved whole and
    cut with a notice, or kept whole when it cannot be saved (nothing is cut that is not
    saved: logged once, and the pipeline tries again before the next model call)."""
    per_block = block_budget(limit, len(texts))
    out = []
    for raw in texts:
        text = clean_text(raw)
        try:
            text = await offload_text(text, per_block, store)
        except OffloadError as exc:
            failures.failed("tool_result", f"keeping tool output whole: {exc}")
        else:
            failures.recovered("tool_result")
        out.append(text)
    return out
