"""`ContextManager`: attaches the context management to AgentScope `ReActAgent`s.

`attach(agent)` replaces the agent's memory by a `ContextMemory` (keeping the messages
already there), installs the truncation middleware and the `read_file` tool on its toolkit,
and registers the pipeline as bound async methods on the agent's `pre_reply`,
`pre_reasoning` and `post_acting` hooks. Whatever fails inside a hook is logged; the agent
goes on.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from datetime import date
from typing import Any

from agentscope.formatter import FormatterBase
from agentscope.memory import InMemoryMemory, MemoryBase
from agentscope.message import Msg
from agentscope.model import ChatModelBase
from agentscope.token import TokenCounterBase

from ..core._errors import ContextUsageError, PromptTooLargeError
from ..core._pipeline import ContextPipeline, PipelineReport, PromptParts
from ..core._tool_schema import plain_optionals
from ..core.config._config import ContextConfig
from ..core.context._memory import ContextMemory
from ..core.context._unanswered import unanswered
from ..core.tokens._tokens import TokenCounter
from ..models._cache import call_cache
from ..models._guard import GuardedModel
from ..recall._read_file import FileReader
from ..services._breakdown import ContextBreakdown
from ..services._services import READ_FILE, ContextUsage, Services
from ..services._traced import traced_run
from ..stores._dialog_record import date_prefix
from ._middleware import TruncationMiddleware
from ._native import NativeHooks
from ._takeover import say, take_over

__all__ = ["ContextManager", "ContextUsage"]

logger = logging.getLogger("agentscope_ctx")

HOOK_NAME = "agentscope_ctx"
HOOKS = ("pre_reply", "pre_reasoning", "post_acting", "post_reply")
EMERGENCY_SHRINK = 0.75
"""After a context-length error, the retried prompt is at most this share of the rejected one."""


@dataclass
class _Binding:
    agent: Any
    memory: ContextMemory
    pipeline: ContextPipeline
    previous_memory: MemoryBase
    previous_compression: Any
    guard: GuardedModel
    middleware: TruncationMiddleware
    added_tools: list[str]
    note_loaded: bool = False
    """Whether MEMORY.md has been offered yet: it is loaded at the first reply and then
    only at compaction, so that the prompt's prefix stays byte-identical in between."""


class ContextManager(Services):
    """Keeps the context windows of the agents it is attached to healthy.

    Args:
        config: all settings.
        model: the chat model used by the Compactor, the Summarizer and consolidation;
            `None` means extractive summaries only, no Summarizer.
        formatter: the formatter matching `model`.
        token_counter: an AgentScope token counter for your model (e.g. a HuggingFace one
            for Qwen); default: tiktoken with `config.token_counter`.
    """

    def __init__(
        self,
        config: ContextConfig | None = None,
        model: ChatModelBase | None = None,
        formatter: FormatterBase | None = None,
        *,
        token_counter: TokenCounterBase | None = None,
    ) -> None:
        if model is not None and formatter is None:
            raise ContextUsageError("a model needs its formatter: pass formatter= as well")
        config = config or ContextConfig()
        counter = (
            token_counter
            if isinstance(token_counter, TokenCounter)
            else TokenCounter(config.token_counter, counter=token_counter)
        )
        super().__init__(config, model, formatter, counter)
        self._bindings: dict[str, _Binding] = {}

    # -- attach / detach ---------------------------------------------------------------

    def attach(self, agent: Any, *, backend: MemoryBase | None = None) -> ContextMemory:
        """Attach to a `ReActAgent`; safe to call twice. Returns the agent's new memory.

        The messages of the agent's `InMemoryMemory` are kept. Any other AgentScope memory
        the agent has (e.g. `RedisMemory`), or a `backend` given here, becomes the backing
        store of the `ContextMemory` (see there), reloaded at the start of every reply.
        """
        for name in ("memory", "toolkit", "register_instance_hook"):
            if not hasattr(agent, name):
                raise ContextUsageError(
                    f"attach() needs an AgentScope ReActAgent; {type(agent).__name__} has no "
                    f"{name!r}"
                )
        binding: _Binding | None = self._bindings.get(agent.id)
        if binding is not None and agent.memory is binding.memory:
            current: ContextMemory = binding.memory
            return current
        toolkit = agent.toolkit
        reader = self.reader_for(str(agent.name))
        if READ_FILE in toolkit.tools and not isinstance(
            getattr(toolkit.tools[READ_FILE].original_func, "__self__", None), FileReader
        ):
            raise ContextUsageError(
                f"agent {agent.name!r} already has a tool named {READ_FILE!r}; agentscope_ctx "
                "adds its own (the continuation tool of truncated output): remove yours first"
            )
        memory = take_over(agent.memory, backend, self.working_dir, self.config)
        pipeline, recall, store = self.make_pipeline(
            memory,
            agent_name=str(agent.name),
            calibration_key=str(agent.model.model_name),
            prompt_parts=lambda: PromptParts(
                str(agent.sys_prompt or ""), agent.toolkit.get_json_schemas()
            ),
            notify=lambda text: say(agent, text),
            on_compacted=lambda older: self._compacted(agent, older),
            model=agent.model,
        )
        native = NativeHooks(self.config, agent.model, memory, pipeline)
        guard = GuardedModel(
            agent.model,
            on_usage=pipeline.observe_usage,
            recover=lambda error: self._emergency_compaction(agent, error),
            on_prompt=lambda messages, kwargs: pipeline.compaction.prompts.keep(
                messages,
                kwargs.get("tools"),
                kwargs.get("tool_choice"),
                agent.model,
                cache=guard.applied,
            ),
            cache=lambda: call_cache(
                agent.model,
                self.config.cache.mode,
                self.config.cache.ttl,
                pipeline.cache_marks,
                lambda: self.tenant_of(str(agent.name)),
            ),
            native=native.call,
            on_native=native.taken,
        )
        middleware = TruncationMiddleware(
            store, self.policy, skip_tools=frozenset({READ_FILE}), failures=self.failures
        )
        added: list[str] = []
        long_term = self.long_term_of(str(agent.name))
        tools = [reader.read_file, *long_term.tool_functions()]
        for func in tools + ([recall.search_history] if recall is not None else []):
            if func.__name__ not in toolkit.tools:
                toolkit.register_tool_function(func)
                added.append(func.__name__)
                schema = toolkit.tools[func.__name__].json_schema["function"]
                schema["parameters"] = plain_optionals(schema["parameters"])
        toolkit.register_middleware(middleware.handle)
        compression = getattr(agent, "compression_config", None)
        if compression is not None and getattr(compression, "enable", False):
            logger.warning(
                "agentscope_ctx: turning off the built-in compression of agent %r "
                "(agentscope_ctx replaces it; detach() turns it back on)",
                agent.name,
            )
            agent.compression_config = None
        previous = agent.memory
        agent.memory = memory
        agent.model = guard
        for hook in HOOKS:
            agent.register_instance_hook(hook, f"{HOOK_NAME}.{hook}", getattr(self, f"_{hook}"))
        if recall is not None:
            agent.register_instance_hook("post_acting", f"{HOOK_NAME}.recall", recall.post_acting)
        self._bindings[agent.id] = _Binding(
            agent, memory, pipeline, previous, compression, guard, middleware, added
        )
        # No cleanup here: a session state loaded after attach() would not be referenced
        # yet. The first pipeline run cleans up (and then at most once an hour).
        return memory

    def detach(self, agent: Any) -> None:
        """Undo `attach`: the agent gets an `InMemoryMemory`-like memory of its own kind back,
        holding the current messages (the summary as its compressed summary)."""
        binding = self._bindings.pop(agent.id, None)
        if binding is None:
            return
        hooks = [(hook, hook) for hook in HOOKS]
        for hook, name in [*hooks, ("post_acting", "recall")]:
            try:
                agent.remove_instance_hook(hook, f"{HOOK_NAME}.{name}")
            except ValueError:
                pass
        toolkit = agent.toolkit
        middlewares = getattr(toolkit, "_middlewares", [])
        if binding.middleware.handle in middlewares:
            middlewares.remove(binding.middleware.handle)
        for name in binding.added_tools:
            toolkit.remove_tool_function(name)
        restored = binding.previous_memory
        if isinstance(restored, InMemoryMemory):
            restored.content = [(m, list(marks)) for m, marks in binding.memory.content]
            restored._compressed_summary = binding.memory.compact_summary
        agent.memory = restored
        agent.compression_config = binding.previous_compression
        if agent.model is binding.guard:
            agent.model = binding.guard.inner

    def memories(self) -> list[ContextMemory]:
        return [binding.memory for binding in self._bindings.values()]

    def memory_of(self, agent: Any) -> ContextMemory:
        """The `ContextMemory` of an attached agent."""
        return self._binding(agent).memory

    # -- public operations -------------------------------------------------------------

    async def compact(self, agent: Any, extra_instruction: str | None = None) -> PipelineReport:
        """Compact now, whatever the threshold: all but the newest `keep_recent_ratio` part
        goes to the summary (and `extra_instruction` to the compactor's prompt)."""
        binding = self._binding(agent)
        await binding.memory.refresh()
        report = await traced_run(
            binding.pipeline, "forced", force=True, extra_instruction=extra_instruction
        )
        await self.record_run(binding.pipeline, report)
        return report

    async def pin(self, agent: Any, msg_id: str, *, pinned: bool = True) -> None:
        """Pin (or, with `pinned=False`, unpin) message `msg_id` of the agent's memory: it is
        then never masked, cut harder or compacted (within `pin_max_share` of the budget).
        The same as making the message with the metadata ``{"agentscope_ctx.pinned": True}``,
        which is also how to pin in a memory shared by several processes (a pin made here is
        this process's).

        Raises:
            ContextUsageError: no message of the agent's memory has that id.
        """
        binding = self._binding(agent)
        await binding.memory.refresh()
        self.pin_message(binding.pipeline, binding.memory, msg_id, pinned)

    async def context_usage(self, agent: Any) -> ContextUsage:
        """Tokens by part of the prompt the agent would send now (outputs of a memory loaded
        from storage that were never cut are cut first, as the next model call would)."""
        binding = self._binding(agent)
        await binding.memory.refresh()
        await self.prepare(binding.pipeline)
        return await self.usage(binding.pipeline, binding.memory)

    async def context_breakdown(self, agent: Any) -> ContextBreakdown:
        """What the prompt the agent would send now is made of, part by part, as Claude
        Code's ``/context`` shows it: the system prompt, the tool schemas, the summary and
        what it carries, the pinned, recent, cut and masked messages, and what is free below
        the trigger and the budget (outputs never cut are cut first, as in `context_usage`).

        Raises:
            ContextUsageError: `agent` is not attached.
        """
        binding = self._binding(agent)
        await binding.memory.refresh()
        await self.prepare(binding.pipeline)
        return await self.breakdown(binding.pipeline, binding.memory)

    async def _emergency_compaction(
        self, agent: Any, error: Exception
    ) -> list[dict[str, Any]] | None:
        """After a provider's context-length error: learn from it (the window it states
        lowers the budget; see `Calibration.on_overflow`), compact at once to half the usual
        kept share, and return the prompt rebuilt from the compacted memory. `None` when
        nothing could be done.

        Messages that AgentScope adds to a prompt without putting them in memory (the
        "summarise now" hint at `max_iters`) are not in the rebuilt prompt."""
        binding = self._bindings.get(agent.id)
        if binding is None:
            return None
        try:
            await say(
                agent,
                "[agentscope_ctx] the provider says the prompt is too long: "
                "emergency compaction, then one retry",
            )
            binding.pipeline.calibration.on_overflow(error, binding.pipeline.last_estimate)
            # The retry must be clearly smaller than the rejected prompt, whatever part of it
            # was large: the newest tool output is cut too if the compaction is not enough.
            pipeline = binding.pipeline
            rejected = math.ceil(pipeline.last_estimate * pipeline.scale)
            report = await traced_run(
                pipeline,
                "emergency",
                force=True,
                keep_ratio=self.config.keep_recent_ratio / 2,
                target=int(rejected * EMERGENCY_SHRINK),
            )
            await self.record_run(pipeline, report)
            if not (report.compacted or report.truncated):
                return None
            msgs = [Msg("system", agent.sys_prompt, "system"), *await binding.memory.get_memory()]
            prompt: list[dict[str, Any]] = await agent.formatter.format(msgs)
            return prompt
        except Exception:
            logger.exception("agentscope_ctx: the emergency compaction failed")
            return None

    # -- hooks (bound async methods: AgentScope awaits them) ---------------------------

    async def _pre_reply(self, agent: Any, kwargs: dict[str, Any]) -> None:
        binding: _Binding | None = self._bindings.get(agent.id)
        if binding is None:
            return
        try:
            await binding.memory.refresh()
            await self._move_unanswered(binding)
        except Exception:
            logger.exception("agentscope_ctx: could not refresh the memory")
        try:
            self.ensure_scheduler()
        except Exception:
            logger.exception("agentscope_ctx: could not start the consolidation job")
        if not binding.note_loaded:  # (not read: tried again at the next reply)
            binding.note_loaded = await self.offer_note(binding.memory, str(agent.name))
        try:
            await self._run(agent, "reply")
        except PromptTooLargeError:  # no prompt is sent before pre_reasoning judges it again,
            pass  # with the new message in memory as the current turn (issue 29 item 5)

    async def _move_unanswered(self, binding: _Binding) -> None:
        """Move the tool calls another worker left unanswered (see `_unanswered`) from the
        shared memory to `dialog/`, saved first. The messages before them are written with
        them and stay (as a compaction writes the current turn): the dialog keeps the
        conversation's order, and skips them when they leave later."""
        memory = binding.memory
        if memory.backend is None:
            return
        doomed = set(unanswered(memory.messages()))
        if not doomed:
            return
        current = memory.messages()
        last = max(i for i, msg in enumerate(current) if msg.id in doomed)
        await binding.pipeline.dialog.append(current[: last + 1])
        msgs = [msg for msg in current if msg.id in doomed]
        await memory.delete([msg.id for msg in msgs])
        logger.warning(
            "agentscope_ctx: %d messages with tool calls left unanswered (a worker stopped "
            "mid-reply) moved from the shared memory to %s",
            len(msgs),
            _where(binding.pipeline.dialog.dialog_dir, msgs),
        )

    async def _compacted(self, agent: Any, older: list[Msg]) -> None:
        """After a compaction (the summary changed, so the prompt's prefix did anyway):
        offer MEMORY.md as it is now, and start the Summarizer."""
        binding = self._bindings.get(agent.id)
        if binding is not None:
            binding.note_loaded = await self.offer_note(binding.memory, str(agent.name))
        await self.start_summarizer(older, str(agent.name))

    async def _pre_reasoning(self, agent: Any, kwargs: dict[str, Any]) -> None:
        await self._run(agent)
        binding: _Binding | None = self._bindings.get(agent.id)
        if binding is not None and agent.memory is binding.memory:
            binding.pipeline.compaction.prompts.expect()  # the reasoning call sends it next

    async def _post_acting(self, agent: Any, kwargs: dict[str, Any], output: Any) -> None:
        await self._run(agent, "tool_result")

    async def _post_reply(self, agent: Any, kwargs: dict[str, Any], output: Any) -> None:
        """Leave the reply's prompt size and cache reuse for `agentscope-ctx inspect`."""
        binding: _Binding | None = self._bindings.get(agent.id)
        if binding is not None:
            await self.note_usage(str(agent.name), binding.pipeline)

    async def _run(self, agent: Any, when: str = "model_call") -> None:
        binding: _Binding | None = self._bindings.get(agent.id)
        if binding is None or agent.memory is not binding.memory:
            return
        await self.run_pipeline(binding.pipeline, when)

    # -- internals ---------------------------------------------------------------------

    def _binding(self, agent: Any) -> _Binding:
        binding = self._bindings.get(getattr(agent, "id", None) or "")
        if binding is None:
            raise ContextUsageError(
                f"agent {getattr(agent, 'name', agent)!r} is not attached: call attach() first"
            )
        return binding


_DAY = "YYYY-MM-DD"
"""How a dialog store's `dialog_dir` stands for a day (the fleet store's `_dialog.GUIDE`)."""


def _where(dialog_dir: object, msgs: list[Msg]) -> str:
    """Where `msgs` went, as the dialog store names it (`DialogSeam.dialog_dir`): its folder
    (locally ``dialog/``), or its days where it names a day by a pattern (the fleet store's
    ``pg-dialog:YYYY-MM-DD``: ``pg-dialog:2026-12-06``), each message's day as the store
    takes it (its timestamp's date, else today)."""
    where = os.fspath(dialog_dir) if isinstance(dialog_dir, os.PathLike) else str(dialog_dir)
    if _DAY not in where:
        return where
    today = date.today().isoformat()
    days = sorted({date_prefix(msg.timestamp) or today for msg in msgs})
    return ", ".join(where.replace(_DAY, day) for day in days)
