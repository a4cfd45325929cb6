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
from ._pipeline import CALIBRATION_BOUNDS, ContextPipeline, PipelineReport, say
from ._read_file import FileReader
from ._summarizer import Summarizer
from ._tokens import TokenCounter
from ._tool_results import ToolResultPolicy, ToolResultStore
from ._truncation import parse_notice

__all__ = ["ContextManager", "ContextUsage"]

logger = logging.getLogger("agentscope_ctx")

HOOK_NAME = "agentscope_ctx"
READ_FILE = "read_file"
MEMORY_TOOLS = ("remember", "log_today")


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
    threshold: int
    message_count: int

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
        self.scheduler: ConsolidationScheduler | None = None
        self._bindings: dict[str, _Binding] = {}
        self._background: set[asyncio.Task[Any]] = set()

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
        pipeline = ContextPipeline(
            self.config,
            memory,
            counter=self.counter,
            store=self.store,
            policy=self.policy,
            dialog=self.dialog,
            compactor=self.compactor,
            on_compacted=self._start_summarizer,
            calibration_key=str(agent.model.model_name),
            failures=self.failures,
        )
        guard = GuardedModel(
            agent.model,
            on_usage=pipeline.observe_usage,
            recover=lambda: self._emergency_compaction(agent),
        )
        middleware = TruncationMiddleware(
            self.store, self.policy, skip_tools=frozenset({READ_FILE}), failures=self.failures
        )
        added: list[str] = []
        for func in (self.reader.read_file, self.long_term.remember, self.long_term.log_today):
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
        for hook in ("pre_reply", "pre_reasoning", "post_acting"):
            agent.register_instance_hook(hook, f"{HOOK_NAME}.{hook}", getattr(self, f"_{hook}"))
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
        for hook in ("pre_reply", "pre_reasoning", "post_acting"):
            try:
                agent.remove_instance_hook(hook, f"{HOOK_NAME}.{hook}")
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
        return await binding.pipeline.run(agent, force=True, extra_instruction=extra_instruction)

    async def context_usage(self, agent: Any) -> ContextUsage:
        """Tokens by part of the prompt the agent would send now."""
        binding = self._binding(agent)
        await binding.memory.refresh()
        pipeline = binding.pipeline
        total_messages = 0
        tool_results = 0
        for msg in binding.memory.messages():
            count = await self.counter.count_msg(msg)
            total_messages += count
            if msg.has_content_blocks("tool_result"):
                tool_results += count
        system = await self.counter.count_text(str(agent.sys_prompt)) + 4
        tools = await self.counter.count_tools(agent.toolkit.get_json_schemas())
        summary_msg = binding.memory.summary_message()
        summary = 0 if summary_msg is None else await self.counter.count_msg(summary_msg)
        return ContextUsage(
            system_prompt=system,
            tool_schemas=tools,
            summary=summary,
            messages=total_messages,
            tool_results=tool_results,
            total=system + tools + summary + total_messages,
            calibrated_total=math.ceil(
                (system + tools + summary + total_messages) * pipeline.scale
            ),
            max_input_tokens=self.config.max_input_tokens,
            threshold=pipeline.threshold,
            message_count=len(binding.memory.content),
        )

    async def _emergency_compaction(self, agent: Any) -> list[dict[str, Any]] | None:
        """After a provider's context-length error: compact at once to half the usual kept
        share, raise the calibration factor (the estimate was evidently low), and return the
        prompt rebuilt from the compacted memory. `None` when nothing could be done.

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
            key = binding.pipeline.calibration_key
            factor = max(binding.memory.calibration.get(key, 1.0), 1.0) * 1.2
            binding.memory.calibration[key] = min(factor, CALIBRATION_BOUNDS[1])
            report = await binding.pipeline.run(
                agent, force=True, keep_ratio=self.config.keep_recent_ratio / 2
            )
            if not (report.compacted or report.truncated):
                return None
            msgs = [Msg("system", agent.sys_prompt, "system"), *await binding.memory.get_memory()]
            prompt: list[dict[str, Any]] = await agent.formatter.format(msgs)
            return prompt
        except Exception:
            logger.exception("agentscope_ctx: the emergency compaction failed")
            return None

    async def close(self) -> None:
        """Stop the consolidation job and wait for background Summarizer runs."""
        if self.scheduler is not None:
            await self.scheduler.stop()
            self.scheduler = None
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    # -- hooks (bound async methods: AgentScope awaits them) ---------------------------

    async def _pre_reply(self, agent: Any, kwargs: dict[str, Any]) -> None:
        binding: _Binding | None = self._bindings.get(agent.id)
        if binding is None:
            return
        try:
            await binding.memory.refresh()
            self._ensure_scheduler()
            binding.memory.long_term_note = await self.long_term.memory_prompt(
                self.counter, self.config.memory_max_tokens
            )
        except Exception:
            logger.exception("agentscope_ctx: could not load MEMORY.md")
        await self._run(agent)

    async def _pre_reasoning(self, agent: Any, kwargs: dict[str, Any]) -> None:
        await self._run(agent)

    async def _post_acting(self, agent: Any, kwargs: dict[str, Any], output: Any) -> None:
        await self._run(agent)

    async def _run(self, agent: Any) -> None:
        binding: _Binding | None = self._bindings.get(agent.id)
        if binding is None or agent.memory is not binding.memory:
            return
        try:
            await binding.pipeline.run(agent)
            self.store.maybe_cleanup(self._referenced_files)
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

    def _referenced_files(self) -> set[str]:
        """tool_result files that a live message of an attached agent points to."""
        referenced: set[str] = set()
        for binding in self._bindings.values():
            for msg in binding.memory.messages():
                for block in msg.get_content_blocks("tool_result"):
                    output = block.get("output")
                    texts = (
                        [output]
                        if isinstance(output, str)
                        else [b.get("text", "") for b in output or [] if isinstance(b, dict)]
                    )
                    for text in texts:
                        parsed = parse_notice(str(text))
                        if parsed is not None and self.store.owns(parsed[1].file_path):
                            referenced.add(parsed[1].file_path)
        return referenced

    async def _start_summarizer(self, older: list[Msg]) -> None:
        if not (self.config.summarizer.enabled and self.model is not None and self.formatter):
            return
        summarizer = Summarizer(
            model=self.model, formatter=self.formatter, memory_dir=self.long_term.memory_dir
        )
        task = asyncio.create_task(summarizer.run(older))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

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
    memory.content = [(msg, list(marks)) for msg, marks in content]
    memory._compressed_summary = getattr(source, "_compressed_summary", "") or ""
    return memory
