"""The memory seam: where an agent's long-term memory documents live (DESIGN.md §6, §11).

The documents are ``MEMORY.md``, the daily notes ``YYYY-MM-DD.md`` and the consolidation's
record ``.consolidate.json`` (a hidden name: not listed, not offered to the Summarizer). What
they mean (bullets, the change log, what consolidation merges) is the `memory` layer's; a store
only keeps text by name, changes a document atomically, and serializes consolidations.

- Local files (`stores._memory_files.LocalMemoryDocs`, the default): ``{working_dir}/memory/``,
  one memory per working directory, as it always was.
- PostgreSQL (`stores.postgres._memory.PostgresMemoryDocs`, ``store.kind: postgres``): rows
  of the table ``memory_docs`` keyed by the agent's name, one memory per agent, the same on
  every worker.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

__all__ = ["MEMORY_DOC", "STATE_DOC", "MemorySeam"]

MEMORY_DOC = "MEMORY.md"
"""The durable facts, preferences and lessons (and consolidation's change log)."""
STATE_DOC = ".consolidate.json"
"""What consolidation merged already (hidden)."""


@runtime_checkable
class MemorySeam(Protocol):
    """One memory's documents, by name (see the module docstring). Sync: blocking I/O.

    Errors are `OSError` (local files) or `PersistenceError` (a database); callers turn
    them into a tool's "Error: ..." answer or a log line.
    """

    def ref(self, name: str) -> str:
        """How the document `name` is shown to an agent (a path, or a name in the store)."""
        ...

    def name_of(self, file_path: str) -> str:
        """The confined document name `file_path` designates.

        Raises:
            ValueError: `file_path` leaves the memory, is hidden, or is not a plain name.
        """
        ...

    def read(self, name: str) -> str:
        """The document's text ("" when it does not exist)."""
        ...

    def exists(self, name: str) -> bool:
        """Whether the document exists."""
        ...

    def names(self) -> list[str]:
        """The visible documents (not hidden), sorted."""
        ...

    def update(self, name: str, change: Callable[[str], str | None]) -> bool:
        """Atomically replace the document by ``change(current)`` (`current` "" when
        missing); `None` leaves it as it is. No other `update` or `append` of the document
        runs between the read and the write (in any process or worker). `change` must be
        quick: no I/O, no model call.

        Returns:
            Whether the document was written.
        """
        ...

    def append(self, name: str, change: Callable[[str], str]) -> None:
        """Atomically append ``change(current)`` ("" appends nothing), as `update`."""
        ...

    def consolidation_lock(self) -> AbstractContextManager[bool]:
        """Held while a consolidation runs; enters `False` at once when another holds it."""
        ...
