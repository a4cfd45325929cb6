"""`StepRecorder`: after each pipeline run, one record of what it did in the agent's steps
file (`stores._steps_file`), for the session viewer: the prompt's size before and after
relief, the trigger and the budget, what each rung freed, a compaction's summary, and the
saved outputs that entered the context (their notices link to them), each with the tool and
the key arguments of the call that made it: the notices ending a tool's result, which the
package wrote, never one in a user's or the model's text (a notice there is anyone's words,
and may name any file).

What the provider then reported of the model call (its prompt, cache reads and writes:
`PromptUsage`, kept in `ContextPipeline.cache`) follows in a usage line, appended before the
agent's next record or by `flush` at the end of its reply (the record is written before the
call, the usage arrives inside it).

Cheap per step: only the messages new since the last run are read for notices (all of them
after a rewrite: a compaction, or the ladder's harder cuts and masking, which may save an
output anew, its new notice naming the copy), the output sizes come from the store's
metadata, and the line is appended off the event loop. A failure is logged and the agent
goes on.
"""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import datetime, timezone
from typing import Any

from ..core._errors import PersistenceError
from ..core._pipeline import ContextPipeline, PipelineReport
from ..core.context._memory import ContextMemory
from ..core.search._search_text import record_parts
from ..stores._steps_file import SUMMARY_CHARS, StepSeam
from ..stores.seams import OutputSeam

__all__ = ["StepRecorder"]

logger = logging.getLogger("agentscope_ctx")

_CALLS_KEPT = 256
"""The newest tool calls whose tool and arguments are kept for their results' notices."""


class StepRecorder:
    """Records one agent's pipeline runs (see the module docstring)."""

    def __init__(
        self,
        log: StepSeam,
        store: OutputSeam,
        *,
        agent: str,
        session: str | None,
        key: str | None = None,
    ) -> None:
        """`agent`: the agent's name; `key`: its agent key (`core._tenant.agent_key`: the
        file the local record goes to), the name when `None`."""
        self.log = log
        self.store = store
        self.agent = agent
        self.key = agent if key is None else key
        self.session = session
        self.runs = 0
        self._seen: set[str] = set()
        self._refs: set[str] = set()
        self._calls: dict[str, tuple[str, str]] = {}
        """The newest `_CALLS_KEPT` tool calls: id -> (tool, key arguments)."""
        self._revision = -1
        self._upto: tuple[int, object] = (0, None)
        """The memory's revision and length at the last run, and its last message then."""
        self._call_run: int | None = None
        """The run of the last record a model call followed."""
        self._usages = 0
        """`CacheStats.calls` when the last usage line was written."""

    def _new_outputs(self, memory: ContextMemory, *, cut: bool) -> list[dict[str, Any]]:
        """The outputs first seen in the context; with `cut` (the ladder's harder cuts ran:
        they rewrite a message in place, and may save its output anew), every message is
        read again."""
        content = memory.content
        n, last = self._upto
        if (
            not cut
            and memory.revision == self._revision
            and len(content) >= n
            and (n == 0 or content[n - 1][0] is last)
        ):  # only appended since the last run: only the new messages are read
            new, live, rewritten = content[n:], self._seen, False
        else:  # a rewrite (a cut, masking, a compaction)
            new, live, rewritten = content, set(), True
        outputs: list[dict[str, Any]] = []
        for msg, _ in new:
            seen = msg.id in self._seen
            live.add(msg.id)
            if seen and not rewritten:
                continue
            parts = record_parts({"content": msg.content})
            if not seen:
                self._calls.update(parts.calls)
                for stale in list(self._calls)[:-_CALLS_KEPT]:
                    del self._calls[stale]
            for ref, tool, call_id in parts.outputs:
                _, args = self._calls.get(call_id, (tool, ""))
                if ref in self._refs:
                    continue
                self._refs.add(ref)
                output: dict[str, Any] = {"ref": os.fspath(ref), "bytes": self._size(ref)}
                if tool:
                    output.update(tool=tool, args=args)
                outputs.append(output)
        self._seen = live
        self._revision = memory.revision
        self._upto = (len(content), content[-1][0] if content else None)
        return outputs

    def _size(self, ref: str) -> int | None:
        """The saved output's size, `None` when the store cannot say (unreachable)."""
        try:
            return self.store.size(ref)
        except PersistenceError:
            return None

    def _usage(self, pipeline: ContextPipeline) -> dict[str, Any] | None:
        """The usage line of the last model call, when its usage came since the last line."""
        cache = pipeline.cache
        if cache.calls == self._usages or cache.last is None or self._call_run is None:
            return None
        self._usages = cache.calls
        last = cache.last
        return {
            "kind": "usage",
            "at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "agent": self.agent,
            "key": self.key,
            "session": self.session or "default",
            "run": self._call_run,
            "input": last.prompt,
            "cache_read": last.cached,
            "cache_creation": last.created,
        }

    async def flush(self, pipeline: ContextPipeline) -> None:
        """Append the usage line of the last model call, if not written yet (end of a reply)."""
        try:
            usage = self._usage(pipeline)
            if usage is not None:
                await asyncio.to_thread(self.log.append, usage)
        except Exception:
            logger.exception("agentscope_ctx: could not record the model call's usage")

    async def note(
        self, pipeline: ContextPipeline, report: PipelineReport, *, call: bool = True
    ) -> None:
        """Append the record of the run that made `report` (after the usage line of the
        previous model call, when it is due)."""
        await self.flush(pipeline)
        try:
            self.runs += 1
            if call:
                self._call_run = self.runs
            summary = None
            if report.compacted:
                summary = pipeline.memory.compact_summary[:SUMMARY_CHARS]
            record = {
                "at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                "agent": self.agent,
                "key": self.key,
                "session": self.session or "default",
                "run": self.runs,
                "call": call,
                "before": report.tokens_before,
                "after": report.tokens_after,
                "threshold": report.threshold,
                "budget": pipeline.calibration.budget,
                "freed": dict(report.freed),
                "compacted": report.compacted,
                "summary_source": report.summary_source,
                "summary": summary,
                "truncated": report.truncated,
                "outputs": self._new_outputs(pipeline.memory, cut=any(report.freed.values())),
            }
            await asyncio.to_thread(self.log.append, record)
        except Exception:
            logger.exception("agentscope_ctx: could not record the pipeline run")
