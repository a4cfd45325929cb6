"""`Timed`: an AgentScope 2.x middleware around the package's, timing the package's own part of
each reply (AgentScope 2.x only).

Each hook of the package wraps the next handler (the model, the tool, the agent's own work):
the clock runs while control is in the package's hook code and stops while it is in the
handler it wraps, or out with the agent consuming what the hook yielded. So a reply's time is
the wall time spent in the package's hooks (installing the tools, the pipeline before each model
call, cutting and saving each output, the usage note after the reply), the waits for its
threads and the database included; the model, the tools and the agent are not in it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from agentscope.middleware import MiddlewareBase
from agentscope.tool import ToolBase

__all__ = ["Timed"]


class _Clock:
    def __init__(self) -> None:
        self.spent = 0.0
        self._since: float | None = None

    def start(self) -> None:
        self._since = time.perf_counter()

    def stop(self) -> None:
        if self._since is not None:
            self.spent += time.perf_counter() - self._since
            self._since = None


class Timed(MiddlewareBase):
    """The middleware `inner` (the package's), with the time spent in its hooks added up per
    reply into `replies` (seconds, one item per reply)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.replies: list[float] = []
        self._clock = _Clock()

    async def list_tools(self) -> list[ToolBase]:
        tools: list[ToolBase] = await self.inner.list_tools()
        return tools

    async def get_middleware_key(self) -> str:
        key: str = await self.inner.get_middleware_key()
        return key

    async def on_reply(self, agent: Any, input_kwargs: dict[str, Any], next_handler: Any) -> Any:
        self._clock = _Clock()
        async for item in self._generator("on_reply", agent, input_kwargs, next_handler):
            yield item
        self.replies.append(self._clock.spent)

    async def on_reasoning(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: Any
    ) -> Any:
        async for item in self._generator("on_reasoning", agent, input_kwargs, next_handler):
            yield item

    async def on_acting(self, agent: Any, input_kwargs: dict[str, Any], next_handler: Any) -> Any:
        async for item in self._generator("on_acting", agent, input_kwargs, next_handler):
            yield item

    async def on_model_call(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: Callable[..., Awaitable[Any]]
    ) -> Any:
        return await self._awaited("on_model_call", agent, input_kwargs, next_handler)

    async def on_compress_context(
        self, agent: Any, input_kwargs: dict[str, Any], next_handler: Callable[..., Awaitable[Any]]
    ) -> Any:
        return await self._awaited("on_compress_context", agent, input_kwargs, next_handler)

    async def _generator(
        self,
        hook: str,
        agent: Any,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., AsyncGenerator[Any, None]],
    ) -> AsyncGenerator[Any, None]:
        clock = self._clock

        async def handler(**kwargs: Any) -> AsyncGenerator[Any, None]:
            clock.stop()
            async for item in next_handler(**kwargs):
                clock.start()  # the package has the item
                yield item
                clock.stop()  # it asked for the next one
            clock.start()

        clock.start()
        try:
            async for item in getattr(self.inner, hook)(agent, input_kwargs, handler):
                clock.stop()
                yield item
                clock.start()
        finally:
            clock.stop()

    async def _awaited(
        self,
        hook: str,
        agent: Any,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., Awaitable[Any]],
    ) -> Any:
        clock = self._clock

        async def handler(**kwargs: Any) -> Any:
            clock.stop()
            try:
                return await next_handler(**kwargs)
            finally:
                clock.start()

        clock.start()
        try:
            return await getattr(self.inner, hook)(agent, input_kwargs, handler)
        finally:
            clock.stop()
