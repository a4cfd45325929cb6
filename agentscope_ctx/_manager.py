"""`ContextManager`: attaches the context management to AgentScope `ReActAgent`s.

`attach(agent)` replaces the agent's memory by a `ContextMemory` (keeping the messages
already there), installs the truncation middleware and the `read_file` tool on its toolkit,
and registers the pipeline as bound async methods on the agent's `pre_reply`,
`pre_reasoning` and `post_acting` hooks. Whatever fails inside a hook is logged; the agent
goes on.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentscope.formatter import FormatterBase
from agentscope.memory import InMemoryMemory, MemoryBase
from agentscope.message import Msg
from agentscope.model import ChatModelBase
from agentscope.token import TokenCounterBase

from ._compactor import Compactor
from ._config import ContextConfig
from ._dialog import DialogStore
from ._errors import ContextUsageError
from ._failures import FailureLog
from ._guard import GuardedModel
from ._long_term import ConsolidationScheduler, LongTermMemory
from ._memory import ContextMemory
from ._middleware import TruncationMiddleware
from ._pipeline import ContextPipeline, PipelineReport, PromptParts
from ._read_file import FileReader
from ._recall import Recall, RecallConfig
from ._search import SearchIndex
from ._summarizer import Summarizer
from ._summarizer_queue import SummarizerQueue
from ._tokens import TokenCounter
from ._tool_results import ToolResultPolicy, ToolResultStore
from ._truncation import notice_paths
from ._usage_file import write_usage

__all__ = ["ContextManager", "ContextUsage"]

logger = logging.getLogger("agentscope_ctx")

HOOK_NAME = "agentscope_ctx"
READ_FILE = "read_file"
MEMORY_TOOLS = ("remember", "log_today")
HOOKS = ("pre_reply", "pre_reasoning", "post_acting", "post_reply")
EMERGENCY_SHRINK = 0.75
"""After a context-length error, the retried prompt is at most this share of the rejected one."""


@dataclass(frozen=True)
class ContextUsage:
    """Where the prompt's tokens go, as `context_usage` reports it."""

    system_prompt: int
    tool_schemas: int
    summary: int
    messages: int
    """All live messages, tool results included."""
    tool_results: int
    """The part of `messages` in messages that carry tool results."""
    total: int
    """Our raw estimate of the whole prompt."""
    calibrated_total: int
    """`total` corrected by what the provider reported for earlier prompts (with a safety
    margin); equal to `total` until the provider has reported usage."""
    max_input_tokens: int
    """The effective budget: `config.max_input_tokens`, or lower when a provider stated a
    smaller window in a context-length error."""
    threshold: int
    message_count: int
    provider_prompt_tokens: int | None = None
    """The provider's own count of the last prompt sent (`None` before it reported one)."""
    provider_cached_tokens: int | None = None
    """The part of it the provider read from its prompt cache, where it reports that."""
    cache_reuse: float | None = None
    """Share of the provider's prompt tokens read from its cache over the session (billed
    at about a tenth), where it reports cache reads; `None` where it does not."""

    @property
    def ratio(self) -> float:
        """Share of `max_input_tokens` in use (calibrated)."""
        return self.calibrated_total / self.max_input_tokens

    def share(self, tokens: int) -> float:
        """Share of `max_input_tokens` taken by `tokens`."""
        return tokens / self.max_input_tokens


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


class ContextManager:
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
        self.config = config or ContextConfig()
        self.model = model
        self.formatter = formatter
        self.counter = (
            token_counter
            if isinstance(token_counter, TokenCounter)
            else TokenCounter(self.config.token_counter, counter=token_counter)
        )
        working_dir = self.config.working_dir.resolve()
        self.working_dir = working_dir
        self.store = ToolResultStore(working_dir, self.config.tool_result.retention_days)
        self.policy = ToolResultPolicy(self.config.tool_result)
        self.dialog = DialogStore(working_dir)
        self.long_term = LongTermMemory(working_dir)
        roots = self.config.read_roots or [working_dir, Path.cwd()]
        self.reader = FileReader(roots, self.policy, store_dir=self.store.dir)
        self.compactor = Compactor(
            self.config.compactor,
            model=model,
            formatter=formatter,
            counter=self.counter,
            max_input_tokens=self.config.compactor.max_input_tokens or self.config.max_input_tokens,
        )
        self.failures = FailureLog()
        self.recall_config: RecallConfig = self.config.recall
        self.search_index = SearchIndex(working_dir, failures=self.failures)
        self.scheduler: ConsolidationScheduler | None = None
        self._bindings: dict[str, _Binding] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._summaries: SummarizerQueue | None = None

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
        if READ_FILE in toolkit.tools and toolkit.tools[READ_FILE].original_func != (
            self.reader.read_file
        ):
            raise ContextUsageError(
                f"agent {agent.name!r} already has a tool named {READ_FILE!r}; agentscope_ctx "
                "adds its own (the continuation tool of truncated output): remove yours first"
            )
        memory = _take_over(agent.memory, backend, self.working_dir, self.config)
        recall, store, dialog = self._recall_for(agent)
        pipeline = ContextPipeline(
            self.config,
            memory,
            counter=self.counter,
            store=store,
            policy=self.policy,
            dialog=dialog,
            compactor=self.compactor,
            on_compacted=lambda older: self._compacted(agent, older),
            calibration_key=str(agent.model.model_name),
            failures=self.failures,
            prompt_parts=lambda: PromptParts(
                str(agent.sys_prompt or ""), agent.toolkit.get_json_schemas()
            ),
            notify=lambda text: say(agent, text),
        )
        guard = GuardedModel(
            agent.model,
            on_usage=pipeline.observe_usage,
            recover=lambda error: self._emergency_compaction(agent, error),
        )
        middleware = TruncationMiddleware(
            store, self.policy, skip_tools=frozenset({READ_FILE}), failures=self.failures
        )
        added: list[str] = []
        tools = [self.reader.read_file, self.long_term.remember, self.long_term.log_today]
        for func in tools + ([recall.search_history] if recall is not None else []):
            if func.__name__ not in toolkit.tools:
                toolkit.register_tool_function(func)
                added.append(func.__name__)
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

    def memory_of(self, agent: Any) -> ContextMemory:
        """The `ContextMemory` of an attached agent."""
        return self._binding(agent).memory

    # -- public operations -------------------------------------------------------------

    async def compact(self, agent: Any, extra_instruction: str | None = None) -> PipelineReport:
        """Compact now, whatever the threshold: all but the newest `keep_recent_ratio` part
        goes to the summary (and `extra_instruction` to the compactor's prompt)."""
        binding = self._binding(agent)
        await binding.memory.refresh()
        return await binding.pipeline.run(force=True, extra_instruction=extra_instruction)

    async def context_usage(self, agent: Any) -> ContextUsage:
        """Tokens by part of the prompt the agent would send now."""
        binding = self._binding(agent)
        await binding.memory.refresh()
        pipeline = binding.pipeline
        parts = await pipeline.breakdown()
        last = pipeline.cache.last
        total = parts["system_prompt"] + parts["tool_schemas"] + parts["summary"]
        total += parts["messages"]
        return ContextUsage(
            system_prompt=parts["system_prompt"],
            tool_schemas=parts["tool_schemas"],
            summary=parts["summary"],
            messages=parts["messages"],
            tool_results=parts["tool_results"],
            total=total,
            calibrated_total=math.ceil(total * pipeline.scale),
            max_input_tokens=pipeline.calibration.budget,
            threshold=pipeline.threshold,
            message_count=len(binding.memory.content),
            provider_prompt_tokens=None if last is None else last.tokens,
            provider_cached_tokens=None if last is None else last.cached,
            cache_reuse=pipeline.cache.reuse,
        )

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
            report = await pipeline.run(
                force=True,
                keep_ratio=self.config.keep_recent_ratio / 2,
                target=int(rejected * EMERGENCY_SHRINK),
            )
            if not (report.compacted or report.truncated):
                return None
            msgs = [Msg("system", agent.sys_prompt, "system"), *await binding.memory.get_memory()]
            prompt: list[dict[str, Any]] = await agent.formatter.format(msgs)
            return prompt
        except Exception:
            logger.exception("agentscope_ctx: the emergency compaction failed")
            return None

    async def close(self, grace_seconds: float = 10.0) -> None:
        """Stop the consolidation job, start a Summarizer run on the evicted messages still
        pending (see `SummarizerQueue`), give background Summarizer runs `grace_seconds` to
        finish, then cancel the ones left (the notes they wrote so far are kept). Returns
        even if a run ignores its cancellation (it is then left behind, with a warning)."""
        if self.scheduler is not None:
            await self.scheduler.stop()
            self.scheduler = None
        self.search_index.close()
        if self._summaries is not None:
            self._summaries.flush()
        if not self._background:
            return
        _, late = await asyncio.wait(set(self._background), timeout=grace_seconds)
        for task in late:
            task.cancel()
        if late:
            _, stuck = await asyncio.wait(late, timeout=max(grace_seconds, 1.0))
            logger.warning(
                "agentscope_ctx: cancelled %d Summarizer run(s) still busy after %g s%s",
                len(late),
                grace_seconds,
                f"; {len(stuck)} did not stop" if stuck else "",
            )

    # -- hooks (bound async methods: AgentScope awaits them) ---------------------------

    async def _pre_reply(self, agent: Any, kwargs: dict[str, Any]) -> None:
        binding: _Binding | None = self._bindings.get(agent.id)
        if binding is None:
            return
        try:
            await binding.memory.refresh()
            self._ensure_scheduler()
            if not binding.note_loaded:
                await self._load_note(binding)
        except Exception:
            logger.exception("agentscope_ctx: could not refresh the memory or load MEMORY.md")
        await self._run(agent)

    async def _load_note(self, binding: _Binding) -> None:
        binding.memory.offer_long_term(
            await self.long_term.memory_prompt(self.counter, self.config.memory_max_tokens)
        )
        binding.note_loaded = True

    async def _compacted(self, agent: Any, older: list[Msg]) -> None:
        """After a compaction (the summary changed, so the prompt's prefix did anyway):
        offer MEMORY.md as it is now, and start the Summarizer."""
        binding = self._bindings.get(agent.id)
        if binding is not None:
            try:
                await self._load_note(binding)
            except Exception:
                logger.exception("agentscope_ctx: could not load MEMORY.md")
        await self._start_summarizer(older)

    async def _pre_reasoning(self, agent: Any, kwargs: dict[str, Any]) -> None:
        await self._run(agent)

    async def _post_acting(self, agent: Any, kwargs: dict[str, Any], output: Any) -> None:
        await self._run(agent)

    async def _post_reply(self, agent: Any, kwargs: dict[str, Any], output: Any) -> None:
        """Leave the reply's prompt size and cache reuse for `agentscope-ctx inspect`."""
        binding: _Binding | None = self._bindings.get(agent.id)
        if binding is None:
            return
        try:
            pipeline = binding.pipeline
            last = pipeline.cache.last
            fields = {
                "prompt_tokens": await pipeline.prompt_tokens(),
                "max_input_tokens": pipeline.calibration.budget,
                "provider_prompt_tokens": None if last is None else last.tokens,
                "provider_cached_tokens": None if last is None else last.cached,
                "cache_reuse": pipeline.cache.reuse,
            }
            await asyncio.to_thread(write_usage, self.working_dir, str(agent.name), fields)
        except Exception:
            logger.exception("agentscope_ctx: could not note the reply's usage")

    async def _run(self, agent: Any) -> None:
        binding: _Binding | None = self._bindings.get(agent.id)
        if binding is None or agent.memory is not binding.memory:
            return
        try:
            await binding.pipeline.run()
            removed = self.store.maybe_cleanup(self._referenced_files)
            if removed:
                await asyncio.to_thread(self.search_index.drop_outputs, removed)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("agentscope_ctx: the context pipeline failed; the agent goes on")

    # -- internals ---------------------------------------------------------------------

    def _binding(self, agent: Any) -> _Binding:
        binding = self._bindings.get(getattr(agent, "id", None) or "")
        if binding is None:
            raise ContextUsageError(
                f"agent {getattr(agent, 'name', agent)!r} is not attached: call attach() first"
            )
        return binding

    def _recall_for(self, agent: Any) -> tuple[Recall | None, ToolResultStore, DialogStore]:
        """The agent's recall (None when disabled), and the output and dialog stores that
        name the agent on what they save and keep the search index up to date."""
        if not self.recall_config.enabled:
            return None, self.store, self.dialog
        recall = Recall(
            self.search_index,
            self.recall_config,
            str(agent.name),
            max_output_bytes=self.config.tool_result.old_max_bytes,
            failures=self.failures,
        )
        store = ToolResultStore(
            self.working_dir, self.config.tool_result.retention_days, on_saved=recall.output_saved
        )
        dialog = DialogStore(
            self.working_dir,
            record_fields=recall.record_fields,
            on_append=self.search_index.dialog_appended,
        )
        return recall, store, dialog

    def _referenced_files(self) -> set[str]:
        """tool_result files that a notice in a live message of an attached agent points to
        (in any block of any message: a last-resort cut leaves notices in user text and tool
        arguments too), including what the model is shown of messages kept whole."""
        referenced: set[str] = set()
        for binding in self._bindings.values():
            memory = binding.memory
            for msg in [*memory.messages(), *memory.views.values()]:
                for path in notice_paths(msg.content):
                    if self.store.owns(path):
                        referenced.add(path)
        return referenced

    async def _start_summarizer(self, older: list[Msg]) -> None:
        """Hand the evicted messages to the Summarizer's queue: it runs in the background,
        once per batch worth it (see `SummarizerQueue`)."""
        if not (self.config.summarizer.enabled and self.model is not None and self.formatter):
            return
        if self._summaries is None:
            settings = self.config.summarizer
            # The Summarizer's model calls get the compactor's time limit: the same model,
            # the same patience (no setting of their own).
            summarizer = Summarizer(
                model=self.model,
                formatter=self.formatter,
                memory_dir=self.long_term.memory_dir,
                counter=self.counter,
                max_input_tokens=settings.max_input_tokens,
                timeout_seconds=self.config.compactor.timeout_seconds,
            )

            def track(task: asyncio.Task[None]) -> None:
                self._background.add(task)
                task.add_done_callback(self._background.discard)

            self._summaries = SummarizerQueue(
                summarizer.run,
                self.counter,
                min_batch_tokens=settings.min_batch_tokens,
                # full at half the cap: the compactions made during a run join its batch
                max_batch_tokens=settings.max_input_tokens // 2,
                on_start=track,
            )
        await self._summaries.add(older)

    def _ensure_scheduler(self) -> None:
        if self.config.consolidation.enabled and self.scheduler is None:
            self.scheduler = ConsolidationScheduler(
                self.config.consolidation,
                self.working_dir,
                model=self.model,
                formatter=self.formatter,
            )
            self.scheduler.start()


def _take_over(
    source: MemoryBase, backend: MemoryBase | None, working_dir: Path, config: ContextConfig
) -> ContextMemory:
    """The `ContextMemory` replacing `source`: holding its messages (with marks) and summary
    when it lives in this process, else backed by it (or by `backend`)."""
    language = config.compactor.language
    local = isinstance(source, (InMemoryMemory, ContextMemory))
    if backend is None and not local:
        backend = source
    if backend is not None:
        held = getattr(source, "content", None) if local else None
        if held:
            raise ContextUsageError(
                f"the agent already holds {len(held)} messages in its {type(source).__name__}; "
                "with a backend, the backend is where messages live: add them to it first"
            )
        return ContextMemory(working_dir, language=language, backend=backend)
    memory = ContextMemory(working_dir, language=language)
    content = source.content if isinstance(source, (InMemoryMemory, ContextMemory)) else []
    memory.adopt(list(content), getattr(source, "_compressed_summary", "") or "")
    return memory


async def say(agent: Any, text: str) -> None:
    """Tell the user through `agent.print` (never fails the pipeline)."""
    printer = getattr(agent, "print", None)
    if printer is None:
        return
    try:
        await printer(Msg("agentscope_ctx", text, "assistant"), True)
    except Exception:  # printing is best effort
        logger.debug("agentscope_ctx: agent.print failed", exc_info=True)
