"""`app_middlewares(config)`: agentscope_ctx on AgentScope 2.x's app server.

    factory = app_middlewares(config)
    app = create_app(storage=..., message_bus=..., workspace_manager=...,
                     extra_agent_middlewares=factory)
    factory.close_with(app)          # the stores close when the app stops

The app (`agentscope.app.create_app`) assembles a new `Agent` for every chat turn and asks
`extra_agent_middlewares(user_id, agent_id, session_id, workspace)` for its middlewares. The
factory answers with the `ContextMiddleware` of that tenant (`recall.user = user_id`,
`recall.session = session_id`, DESIGN.md §15), made at the session's first turn and reused
after it; every tenant's manager shares one set of stores (one PostgreSQL pool, one search
index), opened once per process. See `docs/fleet.md`.

Decisions where the design is silent:

- The factory is not given the session's model; the middleware is, through the agent it
  serves: with no `model=`, each turn's summaries are written by the agent's own model.
- A prompt that cannot fit (`PromptTooLargeError`) is answered, instead of the model, with a
  reply that says why: the app would report it as "an unknown error".
- The managers of the `max_sessions` sessions used last are kept; an older one is closed
  (its Summarizer runs get their grace), and made anew if its session comes back.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from agentscope.message import TextBlock
from agentscope.middleware import MiddlewareBase
from agentscope.model import ChatResponse

from ..core._errors import ContextUsageError, PromptTooLargeError
from ..core.config._config import ContextConfig
from ..stores.factory import Backend, open_backend
from ._manager import ContextManager, ContextMiddleware

if TYPE_CHECKING:
    from agentscope.agent import Agent

__all__ = ["AppMiddlewares", "app_middlewares"]

logger = logging.getLogger("agentscope_ctx")

TOO_LARGE_REPLY = (
    "I cannot answer in this session: the prompt does not fit its context budget even at "
    "its smallest. {reason}"
)
"""The reply that stands in for the model's when the prompt cannot fit."""


class AppContextMiddleware(ContextMiddleware):
    """The `ContextMiddleware` of one tenant of an app; the agent's own model writes the
    summaries when the factory was given none, and a prompt that cannot fit is answered."""

    def __init__(self, manager: ContextManager, *, own_model: bool) -> None:
        super().__init__(manager=manager)
        self.own_model = own_model
        self._refused: dict[int, str] = {}
        """Per agent (by id), the reason its next model call is answered by us."""

    async def on_reply(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., AsyncGenerator[Any, None]],
    ) -> AsyncGenerator[Any, None]:
        """Take the agent's model for summaries (unless the factory was given one), reply."""
        if not self.own_model and self.manager.model is not agent.model:
            self.manager.use_model(agent.model)
        try:
            async for item in super().on_reply(agent, input_kwargs, next_handler):
                yield item
        finally:
            self._refused.pop(id(agent), None)

    async def on_reasoning(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., AsyncGenerator[Any, None]],
    ) -> AsyncGenerator[Any, None]:
        """As `ContextMiddleware`; a prompt that cannot fit has the model call answered."""
        started = False
        try:
            async for item in super().on_reasoning(agent, input_kwargs, next_handler):
                started = True
                yield item
        except PromptTooLargeError as exc:
            if started:
                raise
            logger.warning("agentscope_ctx: %s's prompt cannot fit: %s", agent.name, exc)
            self._refused[id(agent)] = TOO_LARGE_REPLY.format(reason=exc)
            async for item in next_handler(**input_kwargs):
                yield item

    async def on_model_call(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., Awaitable[Any]],
    ) -> Any:
        """As `ContextMiddleware`, but answer with why when the prompt could not fit."""
        reason = self._refused.pop(id(agent), None)
        if reason is not None:
            return ChatResponse(content=[TextBlock(text=reason)], is_last=True)
        return await super().on_model_call(agent, input_kwargs, next_handler)


class AppMiddlewares:
    """The `extra_agent_middlewares` factory of `agentscope.app.create_app`.

    Args:
        config: the settings of every tenant (`recall.user` and `recall.session` are set
            per call).
        model: the model of summaries; `None` (default): each session's own chat model.
        max_sessions: how many sessions' managers are kept between turns (at least 1).

    Raises:
        ContextUsageError: `max_sessions` is below 1.
    """

    def __init__(
        self, config: ContextConfig | None = None, *, model: Any = None, max_sessions: int = 256
    ) -> None:
        self.config = config or ContextConfig()
        self.model = model
        if max_sessions < 1:
            raise ContextUsageError(f"max_sessions must be at least 1; got {max_sessions}")
        self.max_sessions = max_sessions
        self._backend: Backend | None = None
        self._managers: OrderedDict[tuple[str, str, str], ContextManager] = OrderedDict()
        self._told: set[tuple[str, int, int]] = set()
        self._closing: set[asyncio.Task[None]] = set()

    async def __call__(
        self, user_id: str, agent_id: str, session_id: str, workspace: Any = None
    ) -> list[MiddlewareBase]:
        """The middlewares of one turn: the tenant's `ContextMiddleware`."""
        return [self.manager_for(user_id, agent_id, session_id).middleware()]

    @property
    def backend(self) -> Backend:
        """The stores every tenant shares, opened at the first turn."""
        if self._backend is None:
            self._backend = open_backend(self.config)
        return self._backend

    def manager_for(self, user_id: str, agent_id: str, session_id: str) -> ContextManager:
        """The `ContextManager` of a session of a user's agent (made at its first turn)."""
        key = (user_id, agent_id, session_id)
        manager = self._managers.get(key)
        if manager is not None:
            self._managers.move_to_end(key)
            return manager
        recall = self.config.recall.model_copy(update={"user": user_id, "session": session_id})
        config = self.config.model_copy(update={"recall": recall})
        manager = ContextManager(config, model=self.model, backend=self.backend)
        middleware = AppContextMiddleware(manager, own_model=self.model is not None)
        middleware.told = self._told  # "raising the tool_result_limit" once per process
        manager._middleware = middleware
        self._managers[key] = manager
        while len(self._managers) > self.max_sessions:
            _, old = self._managers.popitem(last=False)
            task = asyncio.get_running_loop().create_task(old.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return manager

    async def close(self) -> None:
        """Close every manager (their Summarizer runs get their grace), then the stores."""
        managers = list(self._managers.values())
        self._managers.clear()
        if self._closing:
            await asyncio.wait(set(self._closing))
        for manager in managers:
            try:
                await manager.close()
            except Exception:
                logger.exception("agentscope_ctx: could not close a session's manager")
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def close_with(self, app: Any) -> Any:
        """Close this factory when `app` (a FastAPI app) stops: its lifespan is wrapped."""
        inner = app.router.lifespan_context

        @asynccontextmanager
        async def lifespan(running: Any) -> AsyncIterator[Any]:
            async with inner(running) as state:
                try:
                    yield state
                finally:
                    await self.close()

        app.router.lifespan_context = lifespan
        return app


def app_middlewares(config: ContextConfig | None = None, *, model: Any = None) -> AppMiddlewares:
    """The `extra_agent_middlewares` factory for `agentscope.app.create_app` (see
    `AppMiddlewares`); close it with the app: `app_middlewares(config).close_with(app)`."""
    return AppMiddlewares(config, model=model)
