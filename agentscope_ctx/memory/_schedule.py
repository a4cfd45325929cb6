"""`ConsolidationScheduler`: `consolidate` every day at a configured local time, in-process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Iterable
from datetime import datetime, time, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from ..core.config._config import ConsolidationConfig
from ..stores.memory_seam import MemorySeam

if TYPE_CHECKING:
    from agentscope.formatter import FormatterBase
    from agentscope.model import ChatModelBase

if sys.platform != "win32":
    pass

from ._consolidation import ConsolidationReport, consolidate

__all__ = ["ConsolidationScheduler"]

logger = logging.getLogger("agentscope_ctx")


class ConsolidationScheduler:
    """Runs `consolidate` every day at `config.at` in `config.timezone`, in-process (of
    each agent's memory on the fleet store)."""

    def __init__(
        self,
        config: ConsolidationConfig,
        working_dir: Path,
        *,
        model: ChatModelBase | None = None,
        formatter: FormatterBase | None = None,
        memories: Callable[[], Iterable[MemorySeam]] | None = None,
    ) -> None:
        """Initialize the scheduler (nothing runs until `start`).

        Args:
            config: When to run and how many days of notes to merge.
            working_dir: The package's working directory.
            model: The model that rewrites MEMORY.md; `None` merges extractively.
            formatter: The formatter of `model` (AgentScope 1.x; `None` on 2.x).
            memories: The memories to consolidate at each run (the fleet store's memory of
                each agent seen); `None`: the working directory's `memory/`.
        """
        self.config = config
        self.working_dir = Path(working_dir)
        self._model, self._formatter = model, formatter
        self._memories = memories
        self._task: asyncio.Task[None] | None = None
        self.last_report: ConsolidationReport | None = None
        """The report of the latest run, if any."""

    def next_run(self, now: datetime) -> datetime:
        """The first `at` strictly after `now`, as an aware datetime in the configured zone.

        DST-safe: a wall time skipped by a spring-forward gap runs at the same offset from the
        transition (02:30 becomes 03:30); a repeated one runs at its first occurrence.

        Args:
            now: The current time; a naive value is taken as local time.
        """
        hour, minute = (int(part) for part in self.config.at.split(":"))
        now = now if now.tzinfo else now.astimezone()
        zone = ZoneInfo(self.config.timezone) if self.config.timezone else None
        day = (now.astimezone(zone) if zone else now.astimezone()).date()
        for offset in range(3):
            wall = datetime.combine(day + timedelta(days=offset), time(hour, minute))
            # Through UTC: `astimezone` to the same zone would not normalize a gap time.
            candidate = (
                wall.replace(tzinfo=zone).astimezone(timezone.utc).astimezone(zone)
                if zone
                else wall.astimezone()
            )
            if candidate.astimezone(timezone.utc) > now.astimezone(timezone.utc):
                return candidate
        raise AssertionError("unreachable: a day always has a next occurrence")

    def start(self) -> bool:
        """Start the daily loop on the running event loop.

        Returns:
            Whether it runs: `False` when `config.enabled` is false (nothing is started).
        """
        if not self.config.enabled:
            return False
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())
        return True

    async def stop(self) -> None:
        """Cancel the loop (a run in progress is abandoned; the lock is released)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            await _sleep_until(self.next_run(datetime.now(timezone.utc)))
            memories: list[Path | MemorySeam] = (
                [self.working_dir] if self._memories is None else list(self._memories())
            )
            for memory in memories:
                try:
                    self.last_report = await consolidate(
                        memory,
                        model=self._model,
                        formatter=self._formatter,
                        days=self.config.days,
                    )
                    logger.info("Daily consolidation: %s", self.last_report)
                except Exception:
                    logger.exception("Daily consolidation failed; retrying at the next run.")


async def _sleep_until(target: datetime) -> None:
    """Sleep in steps of at most 5 minutes, so a suspended machine or a clock change cannot
    skew the wake-up by more than that."""
    while True:
        delay = (target - datetime.now(timezone.utc)).total_seconds()
        if delay <= 0:
            return
        await asyncio.sleep(min(delay, 300.0))
