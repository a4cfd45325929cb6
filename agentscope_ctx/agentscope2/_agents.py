"""`AgentRuns`: the per-agent part of the 2.x `ContextManager`: each agent's `Binding` (its
memory, `StateMirror`, pipeline and tools, made at its first use) and the pipeline run on its
state, which the middleware's hooks call (`_middleware`, `_calls`).

A run, under the binding's lock: the agent's `max_image_num` applied, `StateMirror.pull`
(only what the agent added since the last run), the pipeline, `StateMirror.push` (only the
messages the pipeline changed; all of them after a compaction); then, after a compaction,
what AgentScope does after its own (the read cache, the offloader).
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from agentscope.agent import Agent
from agentscope.tool import ToolBase

from ..core._entry import Msg
from ..core._pipeline import PipelineReport, PromptParts
from ..core.config._config import ContextConfig
from ..core.context._memory import ContextMemory
from ..core.tokens._tokens import TokenCounter
from ..services._services import Services
from ..stores.factory import Backend
from ._binding import Binding, budgeted
from ._images import cap_images
from ._mirror import StateMirror
from ._tools import memory_tools, search_tool
from ._workspace import clean_read_cache, offload_left, offload_reminder

__all__ = ["SMALL_WINDOW", "AgentRuns"]

logger = logging.getLogger("agentscope_ctx")

SMALL_WINDOW = 2_000
"""Below this prompt budget (a small model's window), the optional tools (`remember`,
`log_today`, `search_history`) are not offered: their schemas would take a quarter of it and
more. `read_file`, which the truncation notices need, always is."""


class AgentRuns(Services):
    """The `Services` of a 2.x manager, with each agent's binding and the pipeline's run on
    its state (`ContextManager` adds attaching and the public operations)."""

    def __init__(
        self,
        config: ContextConfig,
        model: Any,
        counter: TokenCounter,
        backend: Backend | None,
    ) -> None:
        super().__init__(config, model, None, counter, backend)
        self._bindings: dict[int, Binding] = {}

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
            await self.offer_note(memory, name)
            await self.start_summarizer(older, name)

        binding.pipeline, binding.recall, binding.store = self.make_pipeline(
            memory,
            config=budgeted(self.config, agent),
            agent_name=str(agent.name),
            calibration_key=str(getattr(agent.model, "model", "default")),
            prompt_parts=lambda: binding.parts,
            notify=notify,
            on_compacted=compacted,
            model=agent.model,
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
            except Exception:  # the memory is not the state: the pipeline cannot run on it
                logger.exception("agentscope_ctx: could not read the agent's state")
                return None
            # Neither the store nor the job keeps the pipeline from running: a prompt is
            # never sent unmanaged (issue 46 item 15)
            if not binding.note_loaded:
                name = str(binding.agent.name)
                binding.note_loaded = await self.offer_note(binding.memory, name)
            try:
                self.ensure_scheduler()
            except Exception:
                logger.exception("agentscope_ctx: could not start the consolidation job")
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
