"""The local implementation of the seams: thin adapters over today's modules, behaviour
unchanged (`_dialog.DialogStore`, `_tool_results.ToolResultStore` with `_line_index` for
ranged line reads, `_search.SearchIndex` on SQLite FTS5).

A local output's ref is the absolute path of its ``tool_result/{hex}.txt`` file, exactly what
notices name today.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from io import FileIO
from pathlib import Path

from ..core._failures import FailureLog
from ..core._search_hits import Filters, SearchResult
from ..core._search_text import Query
from ._dialog import DialogStore
from ._line_index import ByteSource, LineIndexCache
from ._search import SearchIndex
from ._tool_results import ToolResultStore

__all__ = ["LocalDialogStore", "LocalOutputStore", "LocalSearchIndex"]

LocalDialogStore = DialogStore
"""`_dialog.DialogStore` is the local dialog seam as it is."""


class LocalOutputStore:
    """`ToolResultStore` as an `OutputSeam`: refs are absolute paths of its files."""

    def __init__(
        self,
        working_dir: Path,
        retention_days: float,
        *,
        on_saved: Callable[[Path], None] | None = None,
        index_cache: LineIndexCache | None = None,
    ) -> None:
        self.files = ToolResultStore(working_dir, retention_days, on_saved=on_saved)
        self.index_cache = index_cache or LineIndexCache()

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
        try:
            info = os.stat(self._path(ref), follow_symlinks=False)
        except (KeyError, OSError):
            return None
        return info.st_size if stat.S_ISREG(info.st_mode) else None

    def read_range(self, ref: str, offset: int, size: int) -> bytes:
        with self._open(ref) as file:
            file.seek(offset)
            return file.read(max(size, 0)) or b""

    def line_count(self, ref: str) -> int:
        with self._open(ref) as file:
            return self.index_cache.get(ByteSource(file), os.fstat(file.fileno())).lines

    def line_start(self, ref: str, line: int) -> int:
        with self._open(ref) as file:
            source = ByteSource(file)
            index = self.index_cache.get(source, os.fstat(file.fileno()))
            return index.line_start(source, line)

    def read_saved(self, ref: str, *, head: int = 65_536, tail: int = 65_536) -> str | None:
        return self.files.read_saved(ref, head=head, tail=tail)

    def cleanup(self, referenced: Iterable[str], *, now: float | None = None) -> list[str]:
        return [str(path) for path in self.files.cleanup(referenced, now=now)]

    def maybe_cleanup(self, referenced: Callable[[], Iterable[str]]) -> list[str]:
        return [str(path) for path in self.files.maybe_cleanup(referenced)]

    def _path(self, ref: str) -> Path:
        if not self.owns(ref):
            raise KeyError(ref)
        return Path(ref)

    def _open(self, ref: str) -> FileIO:
        try:
            fd = os.open(self._path(ref), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            raise KeyError(ref) from exc
        return FileIO(fd, "rb")


class LocalSearchIndex:
    """`SearchIndex` as a `SearchSeam` (refs are the output files' paths), plus `rebuild`."""

    def __init__(self, working_dir: Path, *, failures: FailureLog | None = None) -> None:
        self.index = SearchIndex(working_dir, failures=failures)

    def output_saved(self, ref: str, *, agent: str | None, session: str | None = None) -> None:
        self.index.output_saved(Path(ref), agent=agent, session=session)

    def describe_output(self, ref: str, *, tool: str, args: str | None) -> None:
        self.index.describe_output(ref, tool=tool, args=args)

    def dialog_appended(self) -> None:
        self.index.dialog_appended()

    def drop_outputs(self, refs: Iterable[str]) -> None:
        self.index.drop_outputs(refs)

    def catch_up(self, *, seconds: float | None = None) -> int:
        return self.index.catch_up(seconds=seconds)

    def search(
        self,
        query: str | Query,
        filters: Filters | None = None,
        *,
        limit: int = 5,
        catch_up_seconds: float | None = 10.0,
    ) -> SearchResult:
        return self.index.search(query, filters, limit=limit, catch_up_seconds=catch_up_seconds)

    def rebuild(self) -> None:
        """Replace the database by an empty one (as a damaged one is), then index the files."""
        db = self.index.db
        db.run(lambda _: db._replace(db._pointer_key()))
        self.index.catch_up()

    def close(self) -> None:
        self.index.close()
