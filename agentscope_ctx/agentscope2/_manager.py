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
import weakref
from typing import Any

from agentscope import __version__ as AGENTSCOPE_VERSION
from agentscope.agent import Agent
from agentscope.tool import ToolBase

from ..core._config import ContextConfig
from ..core._entry import Msg
from ..core._errors import ContextUsageError
from ..core._memory import ContextMemory
from ..core._pins import PIN_MARK
from ..core._pipeline import PipelineReport, PromptParts
from ..core._tokens import TokenCounter
from ..services._services import ContextUsage, Services
from ..services._traced import traced_run
from ..stores.factory import Backend
from ._binding import Binding, budgeted
from ._images import cap_images
from ._middleware import MiddlewareHooks
from ._mirror import StateMirror
from ._tools import memory_tools, search_tool
from ._workspace import clean_read_cache, offload_left, offload_reminder

__all__ = ["ContextManager", "ContextMiddleware"]

logger = logging.getLogger("agentscope_ctx")

SMALL_WINDOW = 2_000
"""Below this prompt budget (a small model's window), the optional tools (`remember`,
`log_today`, `search_history`) are not offered: their schemas would take a quarter of it and
more. `read_file`, which the truncation notices need, always is."""

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


class ContextManager(Services):
    """Keeps the context windows of the 2.x agents it is attached to healthy.

    Args:
        config: all settings (the same `ContextConfig` as on 1.x).
        model: the chat model of the Compactor, the Summarizer and consolidation (a 2.x
            model); `None` means extractive summaries only, no Summarizer.
        formatter: ignored on 2.x (a 2.x model owns its formatter).
        token_counter: a `TokenCounter`; default: tiktoken with `config.token_counter`.
        middleware: the middleware to serve (used by `ContextMiddleware` itself).
        backend: stores opened already, shared with other managers (the app factory's:
            `agentscope2._app`); `close()` then leaves them open.
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
        super().__init__(config, model, None, counter, backend)
        self._bindings: dict[int, Binding] = {}
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

    def bind(self, agent: Agent) -> Binding:
        """The agent's binding, made at its first use."""
        binding = self._bindings.get(id(agent))
        if binding is not None and binding.agent_ref() is agent:
            return binding
        memory = ContextMemory(self.working_dir, language=self.config.compactor.language)
        binding = Binding(weakref.ref(agent), memory, StateMirror(memory))

        async def notify(text: str) -> None:
            binding.notify(text)

        name = str(agent.name)

        async def compacted(older: list[Msg]) -> None:
            try:
                await self.load_note(memory, name)
            except Exception:
                logger.exception("agentscope_ctx: could not load MEMORY.md")
            await self.start_summarizer(older, name)

        binding.pipeline, binding.recall, binding.store = self.make_pipeline(
            memory,
            config=budgeted(self.config, agent),
            agent_name=str(agent.name),
            calibration_key=str(getattr(agent.model, "model", "default")),
            prompt_parts=lambda: binding.parts,
            notify=notify,
            on_compacted=compacted,
        )
        budget = binding.pipeline.calibration.budget
        if budget >= SMALL_WINDOW:
            binding.tools = [*memory_tools(self.long_term_of(name))]
            if binding.recall is not None:
                binding.tools.append(search_tool(binding.recall))
        else:
            logger.info(
                "agentscope_ctx: %s's prompt budget is %d tokens: remember, log_today and "
                "search_history are not offered (their schemas alone take about 440 tokens); "
                "read_file is",
                agent.name,
                budget,
            )
        self._bindings[id(agent)] = binding
        key = id(agent)

        def forget(bindings: dict[int, Binding] = self._bindings) -> None:
            if bindings.get(key) is binding:  # (not a newer agent's, under a reused id)
                del bindings[key]

        weakref.finalize(agent, forget)
        return binding

    def extra_tools(self, binding: Binding | None = None) -> list[ToolBase]:
        """The tools besides `read_file`: `remember`, `log_today` (and `search_history`)."""
        if binding is not None:
            return list(binding.tools)
        if self.memory_per_agent:  # each agent's own, added by `on_reply` once it is known
            return []
        return [*memory_tools(self.long_term)]

    def memories(self) -> list[ContextMemory]:
        return [binding.memory for binding in self._bindings.values()]

    def memory_of(self, agent: Agent) -> ContextMemory:
        """The `ContextMemory` that mirrors an attached agent's state."""
        return self._binding(agent).memory

    # -- the pipeline on an agent's state ----------------------------------------------

    async def refresh_parts(self, agent: Agent, binding: Binding) -> None:
        """Read the system prompt and tool schemas the agent sends now."""
        try:
            system = await agent._get_system_prompt()
        except Exception:  # a private method of AgentScope: fall back to the plain prompt
            system = str(getattr(agent, "_system_prompt", "") or "")
        schemas = await agent.toolkit.get_tool_schemas(agent.state.tool_context.activated_groups)
        binding.parts = PromptParts(system, schemas)

    async def run(self, binding: Binding, **kwargs: Any) -> PipelineReport | None:
        """Bring the memory in step with the state, run the pipeline (failures logged),
        write the result back to the state."""
        async with binding.lock:
            state = binding.agent.state
            try:
                await cap_images(
                    binding.agent, self.media_dir(str(binding.agent.name)), binding.image_counts
                )
            except Exception:
                logger.exception("agentscope_ctx: could not apply the agent's max_image_num")
            before = list(state.context)
            try:
                await binding.mirror.pull(state)
                if not binding.note_loaded:
                    binding.note_loaded = True
                    await self.load_note(binding.memory, str(binding.agent.name))
                self.ensure_scheduler()
            except Exception:
                logger.exception("agentscope_ctx: could not read the agent's state")
                return None
            report = None
            pushed = False
            try:
                report = await self.run_pipeline(binding.pipeline, **kwargs)
            finally:  # also when the prompt cannot fit (raised): what was done is kept
                changed = report is None or bool(report.truncated or report.compacted)
                try:
                    binding.mirror.push(state)
                    pushed = True
                except Exception:
                    logger.exception("agentscope_ctx: could not write the agent's state")
            if pushed and report is not None and changed:
                await self._after_changes(binding, before, report)
            return report

    def save_slot(self, binding: Binding) -> None:
        """Write the agent's slot of `middle_context` (see `StateMirror.save_slot`); a
        failure is logged (the state then carries the slot of the last run)."""
        try:
            binding.mirror.save_slot(binding.agent.state)
        except Exception:
            logger.exception("agentscope_ctx: could not write the agent's state")

    async def _after_changes(
        self, binding: Binding, before: list[Any], report: PipelineReport
    ) -> None:
        """What AgentScope does after its own compression (see `_workspace`): the read
        cache keeps only files the model still sees; what left goes to the offloader too."""
        agent = binding.agent
        try:
            await clean_read_cache(agent)
            if report.compacted:
                path = await offload_left(agent, before)
                if path is not None and binding.mirror.offload_note != offload_reminder(path):
                    binding.mirror.offload_note = offload_reminder(path)
                    binding.mirror.push(agent.state)
        except Exception:
            logger.exception("agentscope_ctx: could not update the read cache or offloader")

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
