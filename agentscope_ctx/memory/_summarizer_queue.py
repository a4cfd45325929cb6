"""`SummarizerQueue`: one Summarizer run per batch of evicted messages worth it.

A Summarizer run costs a few model calls, each re-sending its instructions, its tools and the
transcript. Running it at every compaction paid that over and over for sessions made mostly of
tool output, where there is little to learn. So the messages of consecutive compactions gather
in a pending batch, and a run starts when the batch holds at least ``min_batch_tokens`` of
conversation that is not tool output (the user's and the assistant's words: where facts,
preferences and the lessons drawn from errors are), or when its transcript, at its briefest,
reaches ``max_batch_tokens`` (the manager: half the transcript cap, so that a batch of tool
output alone does not wait for ever, and is shown whole), or at `flush` (the manager's
`close`).

One run at a time: a compaction during a run adds to the next batch, which the run takes up
after its own when it is worth it. Every evicted message goes to exactly one run (or stays
pending until the next `flush`). The queue serves one `ContextManager`, so the messages of all
the agents attached to it share its batches; they write to the same ``memory/`` anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from ..core._entry import Msg
from ..core.tokens._tokens import TokenCounter
from ._summarizer_input import batch_sizes

__all__ = ["SummarizerQueue"]


class SummarizerQueue:
    """Batches evicted messages for the Summarizer; runs it in the background."""

    def __init__(
        self,
        run: Callable[[list[Msg]], Awaitable[object]],
        counter: TokenCounter,
        *,
        min_batch_tokens: int,
        max_batch_tokens: int,
        on_start: Callable[[asyncio.Task[None]], None] | None = None,
    ) -> None:
        """Initialize the queue.

        Args:
            run: Runs the Summarizer on one batch, oldest message first (`Summarizer.run`).
            counter: Counts the batch's tokens.
            min_batch_tokens: Conversation tokens (not tool output) that make a batch worth a
                run; 0 runs at every compaction.
            max_batch_tokens: Transcript tokens (at the harshest rendering) that make a batch
                full: it runs whatever its conversation holds.
            on_start: Called with each background task the queue starts (the manager tracks
                them to wait for them at close).
        """
        self._run = run
        self._counter = counter
        self.min_batch_tokens = min_batch_tokens
        self.max_batch_tokens = max_batch_tokens
        self._on_start = on_start
        self._pending: list[Msg] = []
        self._conversation = 0
        self._size = 0
        self._flushing = False
        self._task: asyncio.Task[None] | None = None

    @property
    def pending(self) -> list[Msg]:
        """The messages waiting for a run, oldest first (a copy)."""
        return list(self._pending)

    @property
    def busy(self) -> bool:
        """Whether a run is in progress (or about to start)."""
        return self._task is not None and not self._task.done()

    async def add(self, messages: Sequence[Msg]) -> None:
        """Add the messages one compaction evicted; start a run if the batch is worth it."""
        if not messages:
            return
        conversation, size = await batch_sizes(messages, self._counter)
        self._pending.extend(messages)
        self._conversation += conversation
        self._size += size
        self._kick()

    def flush(self) -> asyncio.Task[None] | None:
        """Summarise what is pending, however little, after the run in progress if any.

        Returns:
            The background task that will do it (await it to wait), or `None` when nothing
            is pending or running.
        """
        self._flushing = True
        self._kick()
        return self._task if self.busy else None

    def _ready(self) -> bool:
        return bool(self._pending) and (
            self._flushing
            or self._conversation >= self.min_batch_tokens
            or self._size >= self.max_batch_tokens
        )

    def _kick(self) -> None:
        if self.busy:
            return  # the run in progress takes the batch after its own
        if not self._ready():
            self._flushing = False
            return
        self._task = asyncio.create_task(self._work())
        if self._on_start is not None:
            self._on_start(self._task)

    async def _work(self) -> None:
        try:
            while self._ready():
                batch = self._pending
                self._pending, self._conversation, self._size = [], 0, 0
                await self._run(batch)
        finally:
            self._flushing = False
