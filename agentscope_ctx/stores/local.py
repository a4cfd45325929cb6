"""The local implementation of the seams: thin adapters over today's modules, behaviour
unchanged (`_dialog.DialogStore`, `_tool_results.ToolResultStore` with `_line_index` for
ranged line reads, `_search.SearchIndex` on SQLite FTS5). The manager uses those classes
themselves (they fit the seams); these adapters give refs as `str`.

A local output's ref is the absolute path of its ``tool_result/{hex}.txt`` file, exactly what
notices name today.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ._dialog import DialogStore
from ._search import SearchIndex
from ._tool_results import ToolResultStore

__all__ = ["LocalDialogStore", "LocalOutputStore", "LocalSearchIndex"]

LocalDialogStore = DialogStore
"""`_dialog.DialogStore` is the local dialog seam as it is."""

LocalSearchIndex = SearchIndex
"""`_search.SearchIndex` is the local search seam as it is (refs: the output files' paths,
`str` or `Path`), plus `rebuild`."""


class LocalOutputStore:
    """`files` (a `ToolResultStore`) as an `OutputSeam` whose refs are `str` (the absolute
    paths of its files; `ToolResultStore` itself answers `Path`s)."""

    def __init__(self, files: ToolResultStore) -> None:
        self.files = files

    @property
    def dir(self) -> Path:
        """The ``tool_result/`` directory."""
        return self.files.dir

    def save(self, data: str | bytes) -> str:
        return str(self.files.save(data))

    def owns(self, ref: str) -> bool:
        return self.files.owns(ref)

    def holds(self, ref: str, excerpt: str) -> bool:
        return self.files.holds(ref, excerpt)

    def size(self, ref: str) -> int | None:
        return self.files.size(ref)

    def read_range(self, ref: str, offset: int, size: int) -> bytes:
        return self.files.read_range(ref, offset, size)

    def line_count(self, ref: str) -> int:
        return self.files.line_count(ref)

    def line_start(self, ref: str, line: int) -> int:
        return self.files.line_start(ref, line)

    def read_saved(self, ref: str, *, chunk_bytes: int = 1 << 20) -> Iterator[bytes] | None:
        return self.files.read_saved(ref, chunk_bytes=chunk_bytes)

    def cleanup(self, referenced: Iterable[str], *, now: float | None = None) -> list[str]:
        return [str(path) for path in self.files.cleanup(referenced, now=now)]

    def maybe_cleanup(self, referenced: Callable[[], Iterable[str]]) -> list[str]:
        return [str(path) for path in self.files.maybe_cleanup(referenced)]
