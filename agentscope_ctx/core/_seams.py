"""The storage seams the core takes as parameters (DESIGN.md §11): where the messages that
leave the context go (`DialogSeam`) and where the full tool outputs are saved (`OutputSeam`).
The core owns these interfaces; `agentscope_ctx.stores` implements them (local files, or
PostgreSQL for a fleet) and re-exports them from `stores.seams`.

- `DialogSeam`: append-only, idempotent by message id, ordered; records carry the agent and
  the session they were given at construction. `append` is async (the core awaits it before
  dropping messages); reads are sync with an async twin.
- `OutputSeam`: the full tool outputs, bytes by *ref* (a string every worker of the store
  resolves: an absolute path for the local store, ``pg-output:<hex>`` for PostgreSQL), ranged
  reads by byte and by line (what `read_file` needs), and retention. Sync: the callers run
  it in a thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ._entry import Msg

__all__ = ["DialogReadReport", "DialogSeam", "OutputSeam"]


@dataclass
class DialogReadReport:
    """What a read of the dialog store found.

    Attributes:
        files: Names of the files read (``"2026-12-02.jsonl"``), oldest day first.
        messages: How many messages were returned.
        bad_lines: One ``(file name, line number, reason)`` per skipped line; lines count from 1,
            and line 0 stands for a whole file that was not read (a symbolic link, a FIFO...).
    """

    files: list[str] = field(default_factory=list)
    messages: int = 0
    bad_lines: list[tuple[str, int, str]] = field(default_factory=list)


@runtime_checkable
class DialogSeam(Protocol):
    """Every message that left the context, append-only (locally: the stores' `DialogStore`)."""

    @property
    def dialog_dir(self) -> str | os.PathLike[str]:
        """Where the messages go, as the agent's notices name it (locally ``dialog/``)."""
        ...

    async def append(self, msgs: Sequence[Msg]) -> int:
        """Store `msgs` durably, in order, skipping ids already stored; the number written.

        Raises:
            PersistenceError: the store cannot be written (appending again is safe).
        """
        ...

    def read(
        self, day: str | None = None, *, session: str | None = None
    ) -> tuple[list[Msg], DialogReadReport]:
        """The stored messages in append order (one ``YYYY-MM-DD`` day, or all; one session,
        ``""`` those without one, or all)."""
        ...

    async def aread(self, day: str | None = None) -> tuple[list[Msg], DialogReadReport]:
        """`read`, off the event loop."""
        ...

    def days(self) -> list[str]:
        """The days that hold messages, sorted."""
        ...

    def ids(self) -> set[str]:
        """The ids of every stored message."""
        ...


@runtime_checkable
class OutputSeam(Protocol):
    """Full tool outputs by ref (locally: the stores' `ToolResultStore`)."""

    def save(self, data: str | bytes) -> str | os.PathLike[str]:
        """Store `data` (text as UTF-8) whole and return its ref (`os.fspath` of it: the local
        store's `ToolResultStore` answers the file's `Path`).

        Raises:
            OffloadError: it could not be stored (the caller keeps the output whole).
        """
        ...

    def owns(self, ref: str) -> bool:
        """Whether `ref` has this store's form (not whether it still exists)."""
        ...

    def holds(self, ref: str, excerpt: str) -> bool:
        """Whether `ref` is a stored output that begins with `excerpt` (a notice is trusted
        only then)."""
        ...

    def size(self, ref: str) -> int | None:
        """Bytes of the output; `None` when there is no such output."""
        ...

    def read_range(self, ref: str, offset: int, size: int) -> bytes:
        """Up to `size` bytes from byte `offset` (fewer at the end), never more.

        Raises:
            KeyError: no such output.
        """
        ...

    def line_count(self, ref: str) -> int:
        """Lines of the output (a last line without ``\\n`` counts; 0 when empty).

        Raises:
            KeyError: no such output.
        """
        ...

    def line_start(self, ref: str, line: int) -> int:
        """Byte offset where `line` (1..`line_count`) begins.

        Raises:
            KeyError: no such output.
        """
        ...

    def read_saved(self, ref: str, *, chunk_bytes: int = 1 << 20) -> Iterator[bytes] | None:
        """All its bytes, streamed in chunks of at most `chunk_bytes` (to judge how a run
        ended from the whole output: `core.summary._outcome.judge`); `None` when there is no such
        output; a failure while reading is raised by the iterator."""
        ...

    def cleanup(
        self, referenced: Iterable[str], *, now: float | None = None
    ) -> Sequence[str | os.PathLike[str]]:
        """Retention: refresh the outputs still `referenced`, delete the others older than the
        retention period; the refs deleted."""
        ...

    def maybe_cleanup(
        self, referenced: Callable[[], Iterable[str]]
    ) -> Sequence[str | os.PathLike[str]]:
        """`cleanup`, at most once an hour."""
        ...
