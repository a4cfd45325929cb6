"""`ContextManager` on AgentScope 2.x: the same front door as on 1.x, for a 2.x `Agent`.

    manager = ContextManager(ContextConfig.default(), model=helper_model)
    manager.attach(agent)                               # an existing 2.x Agent
    agent = Agent(..., middlewares=[manager.middleware()])   # or the 2.x-native form

One manager serves many agents with one `ContextMiddleware`; each agent gets its own
`ContextMemory` (kept in step with its `AgentState` by a `StateMirror`) and pipeline, made at
its first hook call. The shared parts (stores, Compactor, recall, Summarizer, consolidation)
are `Services`, as on 1.x. A 2.x model owns its formatter: `formatter=` is accepted and
ignored, so that code written for 1.x runs unchanged.
"""

from __future__ import annotations

import logging
from typing import Any

from agentscope import __version__ as AGENTSCOPE_VERSION
from agentscope.agent import Agent

from ..core._errors import ContextUsageError
from ..core._pipeline import PipelineReport
from ..core.config._config import ContextConfig
from ..core.context._memory import ContextMemory
from ..core.context._pins import PIN_MARK
from ..core.tokens._tokens import TokenCounter
from ..services._breakdown import ContextBreakdown
from ..services._services import ContextUsage
from ..services._traced import traced_run
from ..stores.factory import Backend
from ._agents import AgentRuns
from ._binding import Binding
from ._middleware import MiddlewareHooks

__all__ = ["ContextManager", "ContextMiddleware"]

logger = logging.getLogger("agentscope_ctx")

_HOOK_LISTS = {
    "on_reply": "_reply_middlewares",
    "on_reasoning": "_reasoning_middlewares",
    "on_acting": "_acting_middlewares",
    "on_model_call": "_model_call_middlewares",
    "on_compress_context": "_compress_context_middlewares",
}
"""Where a 2.x `Agent` keeps the middlewares of each hook (sorted once, in its `__init__`)."""


class ContextMiddleware(MiddlewareHooks):
    """The 2.x adapter: a middleware for `Agent(..., middlewares=[...])` (its hooks:
    `_middleware.MiddlewareHooks`).

    Args:
        config: all settings, when the middleware makes its own manager.
        model: the Compactor's and Summarizer's model, for its own manager (`None`:
            extractive summaries only).
        manager: the `ContextManager` it works for (`ContextManager.middleware()` passes
            itself); `config` and `model` are then not used.
    """

    def __init__(
        self,
        config: ContextConfig | None = None,
        *,
        model: Any = None,
        manager: ContextManager | None = None,
    ) -> None:
        if manager is None:
            manager = ContextManager(config, model=model, middleware=self)
        super().__init__(manager)


class ContextManager(AgentRuns):
    """Keeps the context windows of the 2.x agents it is attached to healthy.

    Args:
        config: all settings (the same `ContextConfig` as on 1.x).
        model: the chat model of the Compactor, the Summarizer and consolidation (a 2.x
            model); `None` means extractive summaries only, no Summarizer.
        formatter: ignored on 2.x (a 2.x model owns its formatter).
        token_counter: a `TokenCounter`; default: tiktoken with `config.token_counter`.
        middleware: the middleware to serve (used by `ContextMiddleware` itself).
        backend: stores opened already, shared with other managers (those of
            `app_middlewares`); `close()` then leaves them open.
    """

    def __init__(
        self,
        config: ContextConfig | None = None,
        model: Any = None,
        formatter: Any = None,
        *,
        token_counter: TokenCounter | None = None,
        middleware: ContextMiddleware | None = None,
        backend: Backend | None = None,
    ) -> None:
        config = config or ContextConfig()
        counter = token_counter or TokenCounter(config.token_counter)
        super().__init__(config, model, counter, backend)
        self._middleware = middleware or ContextMiddleware(manager=self)

    # -- attach / detach ---------------------------------------------------------------

    def middleware(self) -> ContextMiddleware:
        """The middleware for `Agent(..., middlewares=[...])` (put it last)."""
        return self._middleware

    def attach(self, agent: Agent) -> ContextMiddleware:
        """Add the middleware to an existing 2.x `Agent` (innermost); safe to call twice.

        Raises:
            ContextUsageError: `agent` is not a 2.x `Agent`, or this AgentScope keeps its
                middlewares elsewhere (then pass `middleware()` to the agent instead).
        """
        if not isinstance(agent, Agent):
            raise ContextUsageError(
                f"attach() needs an AgentScope {AGENTSCOPE_VERSION} Agent; got "
                f"{type(agent).__name__}"
            )
        for hook, name in _HOOK_LISTS.items():
            chain = getattr(agent, name, None)
            if not isinstance(chain, list):
                raise ContextUsageError(
                    f"cannot attach to this Agent: AgentScope {AGENTSCOPE_VERSION} has no "
                    f"{name!r} list; create the agent with "
                    "Agent(..., middlewares=[manager.middleware()]) instead"
                )
            others = [m for m in chain if isinstance(m, ContextMiddleware)]
            if any(m is not self._middleware for m in others):
                raise ContextUsageError(
                    f"agent {agent.name!r} already has a ContextMiddleware of another "
                    "ContextManager: one manager per agent"
                )
            if self._middleware.is_implemented(hook) and not others:
                chain.append(self._middleware)
        self.bind(agent)
        return self._middleware

    def detach(self, agent: Agent) -> None:
        """Take the middleware off `agent` (its state keeps the summary and messages; the
        tools added stay in its toolkit)."""
        for name in _HOOK_LISTS.values():
            chain = getattr(agent, name, [])
            while self._middleware in chain:
                chain.remove(self._middleware)
        self._bindings.pop(id(agent), None)

    def memory_of(self, agent: Agent) -> ContextMemory:
        """The `ContextMemory` that mirrors an attached agent's state."""
        return self._binding(agent).memory

    # -- public operations -------------------------------------------------------------

    async def compact(self, agent: Agent, extra_instruction: str | None = None) -> PipelineReport:
        """Compact now, whatever the threshold (as on 1.x)."""
        binding = self._binding(agent)
        await self.refresh_parts(agent, binding)
        async with binding.lock:
            before = list(agent.state.context)
            await binding.mirror.pull(agent.state)
            try:
                report = await traced_run(
                    binding.pipeline, "forced", force=True, extra_instruction=extra_instruction
                )
            finally:
                binding.mirror.push(agent.state)
            await self._after_changes(binding, before, report)
        await self.record_run(binding.pipeline, report)
        return report

    async def pin(self, agent: Agent, msg_id: str, *, pinned: bool = True) -> None:
        """Pin (or, with `pinned=False`, unpin) the message `msg_id` of `agent.state.context`:
        it is then never masked, cut harder or compacted (within `pin_max_share` of the
        budget). The mark is the message's metadata ``{"agentscope_ctx.pinned": True}``, so
        it is saved with the state; a message can also be made with it.

        Raises:
            ContextUsageError: no message of the agent's context has that id.
        """
        binding = self._binding(agent)
        await self.refresh_parts(agent, binding)
        async with binding.lock:
            for msg in agent.state.context:
                if msg.id == msg_id:
                    if pinned:
                        msg.metadata[PIN_MARK] = True
                    else:
                        msg.metadata.pop(PIN_MARK, None)
                    binding.mirror.reconvert(msg_id)
            await binding.mirror.pull(agent.state)
            self.pin_message(binding.pipeline, binding.memory, msg_id, pinned)

    async def context_usage(self, agent: Agent) -> ContextUsage:
        """Tokens by part of the prompt the agent would send now (outputs of a state loaded
        from storage that were never cut are cut first, as the next model call would)."""
        binding = self._binding(agent)
        await self.refresh_parts(agent, binding)
        async with binding.lock:
            await binding.mirror.pull(agent.state)
            if await self.prepare(binding.pipeline):
                binding.mirror.push(agent.state)
        return await self.usage(binding.pipeline, binding.memory)

    async def context_breakdown(self, agent: Agent) -> ContextBreakdown:
        """What the prompt the agent would send now is made of, part by part, as Claude
        Code's ``/context`` shows it: the system prompt, the tool schemas, the summary and
        what it carries, the pinned, recent, cut and masked messages, and what is free below
        the trigger and the budget (outputs never cut are cut first, as in `context_usage`).

        Raises:
            ContextUsageError: `agent` is not attached.
        """
        binding = self._binding(agent)
        await self.refresh_parts(agent, binding)
        async with binding.lock:
            await binding.mirror.pull(agent.state)
            if await self.prepare(binding.pipeline):
                binding.mirror.push(agent.state)
        return await self.breakdown(binding.pipeline, binding.memory)

    def _binding(self, agent: Agent) -> Binding:
        binding = self._bindings.get(id(agent))
        if binding is not None and binding.agent_ref() is agent:
            return binding
        if any(
            self._middleware in getattr(agent, name, ()) for name in _HOOK_LISTS.values()
        ):  # made with Agent(..., middlewares=[manager.middleware()]), no reply yet
            return self.bind(agent)
        raise ContextUsageError(
            f"agent {getattr(agent, 'name', agent)!r} is not attached: call attach() first"
        )
