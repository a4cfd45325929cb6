"""`Services`: what a `ContextManager` shares among its agents, on either AgentScope line.

One token counter, tool-output store, dialog store, long-term memory, `read_file` reader,
Compactor, search index, Summarizer queue and consolidation job per manager; and per agent a
`ContextPipeline` over its `ContextMemory`. The line adapters (`_manager` for 1.x hooks,
`_v2/_manager` for 2.x middlewares) add how the pipeline is wired into the agent.
"""

from __future__ import annotations

import asyncio
import logging
import math
import weakref
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core._entry import Msg
from ..core._errors import ContextRuntimeError, ContextUsageError, PromptTooLargeError
from ..core._failures import FailureLog
from ..core._pipeline import ContextPipeline, PipelineReport, PromptParts
from ..core._private import STORE_DIRS, private_dir
from ..core._tenant import Tenant, agent_key, owner_tag
from ..core.compaction._compactor import Compactor
from ..core.config._config import ContextConfig
from ..core.context._memory import ContextMemory
from ..core.ladder._tool_policy import ToolResultPolicy
from ..core.tokens._tokens import TokenCounter
from ..core.truncation._truncation import notice_paths
from ..memory._long_term import LongTermMemory
from ..memory._schedule import ConsolidationScheduler
from ..memory._summarizer import Summarizer
from ..memory._summarizer_queue import SummarizerQueue
from ..models._cache import cache_life, helper_cache, provider_of, retention_of
from ..recall._read_file import FileReader
from ..recall._recall import Recall, RecallConfig
from ..stores._forget import ForgetReport, ForgetTarget, forget_store
from ..stores._usage_file import write_usage
from ..stores.factory import Backend, open_backend
from ..stores.seams import DialogSeam, OutputSeam, SearchSeam
from ..telemetry import group_attributes, grouped
from ._breakdown import ContextBreakdown, breakdown_of
from ._cleanup import cleanup_due
from ._cleanup import join as join_cleanup
from ._retention_task import retention_task
from ._steps import StepRecorder
from ._traced import traced_run

__all__ = ["ContextBreakdown", "ContextUsage", "Services"]

logger = logging.getLogger("agentscope_ctx")

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
    """The effective budget: `config.max_input_tokens`, or lower when a provider stated a
    smaller window in a context-length error."""
    threshold: int
    message_count: int
    provider_prompt_tokens: int | None = None
    """The provider's own count of the last prompt sent (`None` before it reported one)."""
    provider_cached_tokens: int | None = None
    """The part of it the provider read from its prompt cache, where it reports that."""
    provider_cache_creation_tokens: int | None = None
    """The part of the last prompt the provider wrote to its prompt cache (billed above the
    input price), where it reports that (Anthropic, Model Studio's explicit cache; `None`
    where it does not: OpenAI has no cache writes)."""
    cache_reuse: float | None = None
    """Share of the provider's prompt tokens read from its cache over the session (billed
    at about a tenth), where it reports cache reads; `None` where it does not."""
    session_prompt_tokens: int | None = None
    """The provider's prompt tokens over the session's model calls that reported cache reads
    (the share `cache_reuse` is of); `None` before one did. "The session" is this manager's
    time with the agent: the totals are not stored with the agent's state."""
    session_cache_read_tokens: int | None = None
    """The prompt tokens the provider read from its cache over the session."""
    session_cache_creation_tokens: int | None = None
    """The prompt tokens the provider wrote to its cache over the session (`None` before a
    call reported cache writes)."""

    @property
    def ratio(self) -> float:
        """Share of `max_input_tokens` in use (calibrated)."""
        return self.calibrated_total / self.max_input_tokens

    def share(self, tokens: int) -> float:
        """Share of `max_input_tokens` taken by `tokens`."""
        return tokens / self.max_input_tokens


class Services:
    """The parts shared by all agents of one manager.

    Args:
        config: all settings.
        model: the chat model of the Compactor, the Summarizer and consolidation (`None`:
            extractive summaries only, no Summarizer).
        formatter: on 1.x, the formatter matching `model` (a 2.x model owns its own).
        counter: the token counter.
        backend: stores opened already (shared with other managers, which then close them:
            `close()` leaves them open); default: `config.store`'s, opened here.
    """

    def __init__(
        self,
        config: ContextConfig,
        model: Any,
        formatter: Any,
        counter: TokenCounter,
        backend: Backend | None = None,
    ) -> None:
        self.config = config
        self.model = model
        self.formatter = formatter
        self.counter = counter
        working_dir = self.config.working_dir.resolve()
        self.working_dir = working_dir
        for name in STORE_DIRS:  # made by an older version, maybe readable by others
            private_dir(working_dir / name, create=False)
        self.failures = FailureLog()
        # The three storage seams (DESIGN §11): files + SQLite here, or the fleet's database.
        self._owns_backend = backend is None
        self.backend = backend or open_backend(self.config, failures=self.failures)
        self._retention = retention_task(self.backend, self.config)  # with the cleanup
        self.store: OutputSeam = self.backend.outputs()
        self.policy = ToolResultPolicy(self.config.tool_result)
        self.dialog: DialogSeam = self.backend.dialog()
        self.long_term = LongTermMemory(working_dir)
        """The working directory's memory (the local store's, shared by the agents)."""
        self._long_terms: dict[str, LongTermMemory] = {}
        roots = self.config.read_roots or [working_dir, Path.cwd()]
        self.reader = FileReader.on_store(self.backend, roots, self.policy, working_dir=working_dir)
        self.compactor = Compactor(
            self.config.compactor,
            model=model,
            formatter=formatter,
            counter=self.counter,
            max_input_tokens=self.config.compactor.max_input_tokens or self.config.max_input_tokens,
            read_saved=self.store.read_saved,
        )
        self.recall_config: RecallConfig = self.config.recall
        self.span_group = group_attributes(self.recall_config.session, self.recall_config.user)
        """What this manager's spans carry to be grouped by session and end user."""
        self.search_index: SearchSeam = self.backend.search
        join_cleanup(self.backend.scope, self._referenced_files)
        self.scheduler: ConsolidationScheduler | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._summaries: dict[str | None, SummarizerQueue] = {}
        """A Summarizer's queue per long-term memory (locally one: key `None`)."""
        self._steps: weakref.WeakKeyDictionary[ContextPipeline, StepRecorder] = (
            weakref.WeakKeyDictionary()
        )
        """Each live pipeline's recorder of its runs: released with the pipeline (a 2.x app
        makes an agent, so a pipeline, per turn; issue 46 item 17)."""

    def make_pipeline(
        self,
        memory: ContextMemory,
        *,
        agent_name: str,
        calibration_key: str,
        prompt_parts: Callable[[], PromptParts],
        notify: Callable[[str], Awaitable[None]],
        on_compacted: Callable[[list[Msg]], Awaitable[None]],
        config: ContextConfig | None = None,
        model: Any = None,
    ) -> tuple[ContextPipeline, Recall | None, OutputSeam]:
        """An agent's pipeline over `memory`, its recall (None when disabled) and the store
        its tool outputs are saved to (which tells the recall's index). `config` replaces the
        manager's for this agent (e.g. a smaller budget); `model` (the agent's) tells how
        long its provider's idle prompt cache lives (`ContextPipeline.cache_life`)."""
        recall, store, dialog = self._recall_for(agent_name)
        memory.dialog_days = self.backend.dialog_days
        pipeline = ContextPipeline(
            config or self.config,
            memory,
            counter=self.counter,
            store=store,
            policy=self.policy,
            dialog=dialog,
            compactor=self.compactor,
            on_compacted=on_compacted,
            calibration_key=calibration_key,
            failures=self.failures,
            prompt_parts=prompt_parts,
            notify=notify,
            describe=None if recall is None else recall.describe_saved,
        )
        pipeline.span_group = self.span_group
        cache = pipeline.config.cache
        if model is not None and cache.cut_when_expired:
            life = cache_life(provider_of(model), cache.mode, cache.ttl, retention_of(model))
            pipeline.cache_life = life
        if self.backend.steps is not None:
            self._steps[pipeline] = StepRecorder(
                self.backend.steps,
                store,
                agent=agent_name,
                session=self.recall_config.session,
                key=self.tenant_of(agent_name).agent,
            )
        return pipeline, recall, store

    @staticmethod
    def pin_message(
        pipeline: ContextPipeline, memory: ContextMemory, msg_id: str, pinned: bool
    ) -> None:
        """Pin (or unpin) message `msg_id` of `memory`: cuts planned for it are dropped.

        Raises:
            ContextUsageError: no message of the context has that id.
        """
        if not memory.pin(msg_id, pinned):
            raise ContextUsageError(
                f"no message with id {msg_id!r} in the agent's context (a message compacted "
                "away can no longer be pinned)"
            )
        due = pipeline.ladder.plan.due
        marked = pipeline.accountant.ledger.pinned
        for msg in memory.messages():
            if msg.id == msg_id or str(msg.id).startswith(f"{msg_id}/"):
                due.pop(msg.id, None)
                (marked.add if pinned else marked.discard)(msg.id)

    @staticmethod
    async def prepare(pipeline: ContextPipeline) -> bool:
        """`pipeline.prepare()` (the cuts the next model call would make, before its usage is
        told); a failure is logged and the usage is told as it is. Whether anything changed."""
        try:
            return await pipeline.prepare() > 0
        except Exception:
            logger.exception("agentscope_ctx: could not prepare the context before its usage")
            return False

    async def usage(self, pipeline: ContextPipeline, memory: ContextMemory) -> ContextUsage:
        """Tokens by part of the prompt the agent would send now."""
        parts = await pipeline.breakdown()
        cache = pipeline.cache
        last = cache.last
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
            message_count=len(memory.content),
            provider_prompt_tokens=None if last is None else last.tokens,
            provider_cached_tokens=None if last is None else last.cached,
            provider_cache_creation_tokens=None if last is None else last.created,
            cache_reuse=cache.reuse,
            session_prompt_tokens=cache.prompt_tokens if cache.reports else None,
            session_cache_read_tokens=cache.cached_tokens if cache.reports else None,
            session_cache_creation_tokens=(
                cache.created_tokens if cache.creation_reports else None
            ),
        )

    @staticmethod
    async def breakdown(pipeline: ContextPipeline, memory: ContextMemory) -> ContextBreakdown:
        """What the prompt the agent would send now is made of, part by part."""
        return await breakdown_of(pipeline, memory)

    async def note_usage(self, agent_name: str, pipeline: ContextPipeline) -> None:
        """Leave the reply's prompt size, cache reuse and context breakdown for
        `agentscope-ctx inspect` and the session viewer (and its last model call's usage in
        the steps record)."""
        context: dict[str, Any] | None = None
        try:
            context = (await breakdown_of(pipeline, pipeline.memory)).to_dict()
        except Exception:
            logger.exception("agentscope_ctx: could not break the reply's context down")
        recorder = self._steps.get(pipeline)
        if recorder is not None:
            await recorder.flush(pipeline)  # (never raises)
        try:
            last = pipeline.cache.last
            fields = {
                "prompt_tokens": await pipeline.prompt_tokens(),
                "max_input_tokens": pipeline.calibration.budget,
                "provider_prompt_tokens": None if last is None else last.tokens,
                "provider_cached_tokens": None if last is None else last.cached,
                "cache_reuse": pipeline.cache.reuse,
                "counter": self.counter.backend,
                "context": context,
            }
            session = self.config.recall.session
            await asyncio.to_thread(
                write_usage, self.working_dir, agent_name, fields, session=session
            )
        except Exception:
            logger.exception("agentscope_ctx: could not note the reply's usage")

    def memories(self) -> Iterable[ContextMemory]:
        """The memories of the attached agents (each adapter knows its agents)."""
        return ()

    async def run_pipeline(
        self, pipeline: ContextPipeline, when: str = "model_call", **kwargs: Any
    ) -> PipelineReport | None:
        """One pipeline run (`kwargs` go to `ContextPipeline.run`; traced as `when`, see
        `traced_run`), its record for the session viewer (a model call follows it when `when`
        is ``model_call``), then the outputs' cleanup when due (`_cleanup`: hourly per
        process and store, in a worker thread); failures are logged (`None`:
        the run failed), except a `PromptTooLargeError`, which is raised: that prompt must not
        be sent.

        A run that fails is followed by `ContextPipeline.hold` (the prompt fitted to the
        budget on what the memory holds), so that the agent goes on within its budget: a
        prompt is never sent unmanaged (DESIGN.md §14).

        Raises:
            PromptTooLargeError: the prompt cannot fit (see `ContextPipeline.run`).
            ContextRuntimeError: before a model call (`when` ``model_call``), the run and
                the fit after it both failed: the prompt may be over the budget, and is not
                sent."""
        try:
            report = await traced_run(pipeline, when, **kwargs)
        except (asyncio.CancelledError, PromptTooLargeError):
            raise  # a prompt that cannot fit is not sent: the setup must change
        except Exception:
            logger.exception("agentscope_ctx: the context pipeline failed; the agent goes on")
            await self._hold(pipeline, when)
            return None
        await self.record_run(pipeline, report, call=when == "model_call")
        # the outputs' retention: hourly per process and store, off the loop (`_cleanup`)
        await cleanup_due(
            self.backend.scope, self.store, self.search_index.drop_outputs, self._retention
        )
        return report

    async def record_run(
        self, pipeline: ContextPipeline, report: PipelineReport, *, call: bool = False
    ) -> None:
        """The run's record for the session viewer (`StepRecorder.note`; never raises): every
        run that changed the context has one, a compaction asked for (`compact`) or an
        emergency one too, not only those `run_pipeline` makes before a model call."""
        recorder = self._steps.get(pipeline)
        if recorder is not None:
            await recorder.note(pipeline, report, call=call)

    @staticmethod
    async def _hold(pipeline: ContextPipeline, when: str) -> None:
        """`pipeline.hold()` after a failed run (see `run_pipeline`)."""
        try:
            await pipeline.hold()
        except (asyncio.CancelledError, PromptTooLargeError):
            raise
        except Exception as exc:
            if when != "model_call":  # no prompt is sent before the next run judges it
                logger.exception("agentscope_ctx: could not fit the prompt after a failed run")
                return
            raise ContextRuntimeError(
                "the context pipeline failed, and so did the fit of the prompt to its budget "
                f"after it ({type(exc).__name__}: {exc}); the model is not called with a "
                "prompt that may be over the budget"
            ) from exc

    @property
    def memory_per_agent(self) -> bool:
        """Whether each agent has a long-term memory of its own (the fleet store: one per
        agent name, on every worker), rather than the working directory's."""
        return self.backend.memory is not None

    def long_term_of(self, agent_name: str | None) -> LongTermMemory:
        """The long-term memory of agent `agent_name`: on the fleet store its own, the same
        on every worker; locally the working directory's `memory/` (also for `None`)."""
        if self.backend.memory is None or agent_name is None:
            return self.long_term
        found = self._long_terms.get(agent_name)
        if found is None:
            # one memory per agent key: the agent, of `recall.user` when set (`core._tenant`)
            key = agent_key(agent_name, self.config.recall.user)
            found = LongTermMemory(store=self.backend.memory(key))
            self._long_terms[agent_name] = found
        return found

    async def load_note(self, memory: ContextMemory, agent_name: str | None = None) -> None:
        """Offer MEMORY.md (as it is now) with the summary."""
        long_term = self.long_term_of(agent_name)
        memory.offer_long_term(
            await long_term.memory_prompt(self.counter, self.config.memory_max_tokens)
        )

    async def offer_note(self, memory: ContextMemory, agent_name: str | None = None) -> bool:
        """`load_note`; whether it was read. A failure (the store is unreachable) is logged
        once while it lasts, and the memory keeps the note it had: the caller tries again
        later, and runs the pipeline meanwhile."""
        try:
            await self.load_note(memory, agent_name)
        except Exception as exc:
            self.failures.failed("MEMORY.md", f"could not read MEMORY.md ({exc}); tried again")
            return False
        self.failures.recovered("MEMORY.md")
        return True

    async def forget(
        self,
        *,
        user: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        dry_run: bool = False,
        who: str = "api",
    ) -> ForgetReport:
        """Remove every byte of a tenant from the store (DESIGN.md §19, docs/data.md): its
        dialog records, saved outputs, search entries, media, steps and usage records (and,
        on the fleet store, its long-term memory when no session is named); one audit line.
        At least one of `user`, `agent`, `session` (the tenant's parts, `core._tenant`).

        Raises:
            ContextUsageError: none given, or a bad value (the message names the field).
            PersistenceError: the store cannot be written (calling it again completes it).
        """
        target = ForgetTarget(user=user, agent=agent, session=session)
        search = self.backend.search if self.backend.kind == "local" else None
        return await asyncio.to_thread(
            forget_store, self.config, target, dry_run=dry_run, who=who, search=search
        )

    async def close(self, grace_seconds: float = 10.0) -> None:
        """Stop the consolidation job, start a Summarizer run on the evicted messages still
        pending (see `SummarizerQueue`), give background Summarizer runs `grace_seconds` to
        finish, then cancel the ones left (the notes they wrote so far are kept). Returns
        even if a run ignores its cancellation (it is then left behind, with a warning)."""
        if self.scheduler is not None:
            await self.scheduler.stop()
            self.scheduler = None
        if self._owns_backend:
            self.backend.close()
        for queue in self._summaries.values():
            queue.flush()
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

    def use_model(self, model: Any) -> None:
        """Write summaries with `model` from now on (the Compactor's and the Summarizer's
        model; a Summarizer queue made before keeps its own)."""
        self.model = model
        self.compactor.use_model(model)

    def tenant_of(self, agent_name: str) -> Tenant:
        """The tenant of agent `agent_name` in this manager's session (DESIGN.md §15)."""
        recall = self.recall_config
        return Tenant.of(agent_name, recall.session, user=recall.user, scope=recall.scope)

    def reader_for(self, agent_name: str) -> FileReader:
        """The `read_file` reader of agent `agent_name`: its tenant's records only."""
        return self.reader.scoped(self.tenant_of(agent_name))

    def media_dir(self, agent_name: str) -> Path:
        """Where the 2.x image cap saves the images of agent `agent_name`:
        ``media/<agent tag>-<session tag>/`` (read only by its tenant)."""
        tenant = self.tenant_of(agent_name)
        root = self.working_dir / "media"
        private_dir(root, create=False)  # one an older version left open is tightened
        return root / f"{owner_tag(tenant.agent)}-{owner_tag(tenant.session)}"

    def _recall_for(self, agent_name: str) -> tuple[Recall | None, OutputSeam, DialogSeam]:
        """The agent's recall (None when disabled), and the output and dialog stores that
        name the agent's tenant on what they save (and keep the search index up to date)."""
        tenant = self.tenant_of(agent_name)
        if not self.recall_config.enabled:
            store = self.backend.outputs(tenant.agent, tenant.session)
            return None, store, self.backend.dialog(tenant.fields)
        recall = Recall(
            self.search_index,
            self.recall_config,
            agent_name,
            max_output_bytes=self.config.tool_result.old_max_bytes,
            failures=self.failures,
            tenant=tenant,
        )
        store = self.backend.outputs(tenant.agent, tenant.session, recall.output_saved)
        dialog = self.backend.dialog(recall.record_fields, self.search_index.dialog_appended)
        return recall, store, dialog

    def _referenced_files(self) -> set[str]:
        """tool_result files that a notice in a live message of an attached agent points to
        (in any block of any message: a last-resort cut leaves notices in user text and tool
        arguments too), including what the model is shown of messages kept whole."""
        referenced: set[str] = set()
        for memory in self.memories():
            for msg in [*memory.messages(), *memory.views.values()]:
                for path in notice_paths(msg.content):
                    if self.store.owns(path):
                        referenced.add(path)
            for path in notice_paths(memory.trimmed_summary()):  # the fit's cut of it
                if self.store.owns(path):
                    referenced.add(path)
        return referenced

    async def start_summarizer(self, older: list[Msg], agent_name: str | None = None) -> None:
        """Hand the evicted messages to the Summarizer's queue of the agent's long-term
        memory: it runs in the background, once per batch worth it (see `SummarizerQueue`)."""
        if not (self.config.summarizer.enabled and self.model is not None):
            return
        key = agent_name if self.memory_per_agent else None
        queue = self._summaries.get(key)
        if queue is None:
            long_term = self.long_term_of(key)
            settings = self.config.summarizer
            # The Summarizer's model calls get the compactor's time limit: the same model,
            # the same patience (no setting of their own).
            summarizer = Summarizer(
                model=self.model,
                formatter=self.formatter,
                memory_dir=long_term.memory_dir or long_term.store,
                counter=self.counter,
                max_input_tokens=settings.max_input_tokens,
                timeout_seconds=self.config.compactor.timeout_seconds,
                cache=helper_cache(self.model, self.config.cache.mode, self.config.cache.ttl),
            )

            def track(task: asyncio.Task[None]) -> None:
                self._background.add(task)
                task.add_done_callback(self._background.discard)

            group = self.span_group

            async def run(batch: list[Msg]) -> str:
                with grouped(group):  # its spans, in the background: the session's
                    return await summarizer.run(batch)

            queue = self._summaries[key] = SummarizerQueue(
                run,
                self.counter,
                min_batch_tokens=settings.min_batch_tokens,
                # full at half the cap: the compactions made during a run join its batch
                max_batch_tokens=settings.max_input_tokens // 2,
                on_start=track,
            )
        await queue.add(older)

    def ensure_scheduler(self) -> None:
        if self.config.consolidation.enabled and self.scheduler is None:
            self.scheduler = ConsolidationScheduler(
                self.config.consolidation,
                self.working_dir,
                model=self.model,
                formatter=self.formatter,
                memories=(
                    (lambda: [m.store for m in self._long_terms.values()])
                    if self.memory_per_agent
                    else None
                ),
            )
            self.scheduler.start()
