"""First truncation as a `Toolkit` middleware: every tool's output is cut when it enters the
context, and its full text saved to `tool_result/` before the notice points there."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Coroutine
from dataclasses import replace
from typing import Any

from agentscope.message import TextBlock
from agentscope.tool import ToolResponse

from ._errors import OffloadError
from ._failures import FailureLog
from ._tool_results import ToolResultPolicy, ToolResultStore
from ._truncation import excerpt_with_notice, parse_notice

__all__ = ["TruncationMiddleware", "block_budget", "clean_text", "offload_text"]

logger = logging.getLogger("agentscope_ctx")

NextHandler = Callable[..., Coroutine[Any, Any, AsyncGenerator[ToolResponse, None]]]

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


async def offload_text(text: str, max_bytes: int, store: ToolResultStore) -> str:
    """`text` within `max_bytes`: unchanged if it fits, else saved whole and cut with a notice.

    Raises:
        OffloadError: the full text could not be saved; nothing was cut.
    """
    data = text.encode("utf-8")  # encoded once, for the size check and the file
    if len(data) <= max_bytes and parse_notice(text) is None:
        return text
    path = await asyncio.to_thread(store.save, data)
    del data  # not held while the excerpt is made: peak memory stays near one encoded copy
    return excerpt_with_notice(text, max_bytes=max_bytes, file_path=str(path))


class TruncationMiddleware:
    """Registered with `Toolkit.register_middleware(middleware.handle)`.

    Streamed responses: chunks are passed on whole (the user sees them), and the last one,
    which is what the agent stores, is truncated. A stream that ends without an `is_last`
    chunk gets one more, truncated copy of its final chunk, marked last.
    """

    def __init__(
        self,
        store: ToolResultStore,
        policy: ToolResultPolicy,
        *,
        skip_tools: frozenset[str] = frozenset(),
        failures: FailureLog | None = None,
    ) -> None:
        self.store = store
        self.failures = failures or FailureLog()
        self.policy = policy
        self.skip_tools = skip_tools  # tools that cut their own output (read_file)

    async def handle(
        self, kwargs: dict[str, Any], next_handler: NextHandler
    ) -> AsyncGenerator[ToolResponse, None]:
        """The middleware itself (an async generator, as AgentScope expects)."""
        tool_call = kwargs["tool_call"]
        name = str(tool_call.get("name", ""))
        if name in self.skip_tools:
            async for chunk in await next_handler(**kwargs):
                yield chunk
            return
        limit = self.policy.limits(name, tool_call.get("input") or {}).recent
        last: ToolResponse | None = None
        async for chunk in await next_handler(**kwargs):
            if chunk.is_last:
                chunk = await self._truncate(chunk, limit)
            last = chunk
            yield chunk
        if last is not None and not last.is_last:
            yield await self._truncate(replace(last, is_last=True), limit)

    async def _truncate(self, chunk: ToolResponse, limit: int) -> ToolResponse:
        texts = [i for i, block in enumerate(chunk.content) if block.get("type") == "text"]
        if not texts:
            return chunk
        per_block = block_budget(limit, len(texts))
        content = list(chunk.content)
        for i in texts:
            text = clean_text(content[i].get("text"))
            try:
                text = await offload_text(text, per_block, self.store)
            except OffloadError as exc:
                # Nothing is cut that is not saved: the output stays whole, and the pipeline
                # tries again before the next model call.
                self.failures.failed("tool_result", f"keeping tool output whole: {exc}")
            content[i] = TextBlock(type="text", text=text)
        return replace(chunk, content=content)
