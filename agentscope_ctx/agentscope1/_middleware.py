"""First truncation as a `Toolkit` middleware: every tool's output is cut when it enters the
context, and its full text saved to `tool_result/` before the notice points there."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Coroutine
from dataclasses import replace
from typing import Any

from agentscope.message import TextBlock
from agentscope.tool import ToolResponse

from ..core._failures import FailureLog
from ..core.ladder._tool_policy import ToolResultPolicy
from ..core.truncation._offload import block_budget, clean_text, cut_texts, offload_text
from ..stores.seams import OutputSeam

__all__ = ["TruncationMiddleware", "block_budget", "clean_text", "offload_text"]

logger = logging.getLogger("agentscope_ctx")

NextHandler = Callable[..., Coroutine[Any, Any, AsyncGenerator[ToolResponse, None]]]


class TruncationMiddleware:
    """Registered with `Toolkit.register_middleware(middleware.handle)`.

    Streamed responses: chunks are passed on whole (the user sees them), and the last one,
    which is what the agent stores, is truncated. A stream that ends without an `is_last`
    chunk gets one more, truncated copy of its final chunk, marked last.
    """

    def __init__(
        self,
        store: OutputSeam,
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
        cut = await cut_texts(
            [chunk.content[i].get("text") for i in texts], limit, self.store, self.failures
        )
        content = list(chunk.content)
        for i, text in zip(texts, cut, strict=True):
            content[i] = TextBlock(type="text", text=text)
        return replace(chunk, content=content)
