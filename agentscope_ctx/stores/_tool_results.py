"""The `tool_result/` store (the per-tool, per-path truncation policy, `ToolResultPolicy`,
is the core's: `core.ladder._tool_policy`, re-exported here).

On disk: ``{working_dir}/tool_result/{agent tag}-{session tag}-{uuid4 hex}.txt`` (the tags of
its owner, `core._tenant.owner_tag`; ``{uuid4 hex}.txt`` for no owner, as older versions
wrote) holds the full text of one truncated tool output, UTF-8, byte for byte as the tool
produced it (no newline translation). It is written atomically (temporary file, fsync,
rename; mode ``0600`` in a ``0700`` directory, see `agentscope_ctx._private`) before any
notice points to it, and deleted `retention_days` after its last use: live managers refresh
the time of the files their messages point to at each cleanup, and never delete one of those.
"""

from __future__ import annotations

import io
import logging
import os
import re
import stat
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..core._errors import OffloadError
from ..core._private import private_dir, write_atomic
from ..core._tenant import Tenant, owner_tag
from ..core.ladder._tool_policy import Limits, ToolResultPolicy
from ._line_index import ByteSource, LineIndexCache
from ._tombstones import write_local
from .seams import tell_saved

if TYPE_CHECKING:
    pass

__all__ = ["Limits", "ToolResultPolicy", "ToolResultStore", "name_tags", "saved_name"]

logger = logging.getLogger("agentscope_ctx")

_CLEANUP_EVERY_SECONDS = 3600.0


_TAGGED = re.compile(r"([0-9a-f]{16})-([0-9a-f]{16})-[0-9a-f]{32}\.txt")


def saved_name(owner: tuple[str, str] | None) -> str:
    """A new file name: ``{agent tag}-{session tag}-{uuid4 hex}.txt`` (`core._tenant.owner_tag`
    of each), or ``{uuid4 hex}.txt`` for no owner."""
    if owner is None:
        return f"{uuid.uuid4().hex}.txt"
    return f"{owner_tag(owner[0])}-{owner_tag(owner[1])}-{uuid.uuid4().hex}.txt"


def name_tags(name: str) -> tuple[str, str] | None:
    """The owner tags (agent, session) a saved file's name carries; `None`: it has none."""
    match = _TAGGED.fullmatch(name)
    return None if match is None else (match.group(1), match.group(2))


class ToolResultStore:
    """Saves full tool outputs and removes expired ones."""

    def __init__(
        self,
        working_dir: Path,
        retention_days: float,
        *,
        on_saved: Callable[[Path], None] | None = None,
        owner: tuple[str, str] | None = None,
    ) -> None:
        """`on_saved(path)` is called after each save (in the saving thread); what it raises
        is logged, never passed on. `owner` (agent key, session): named in each file's name
        (`saved_name`), so that `read_file` shows a file only to its tenant."""
        self.dir = (working_dir / "tool_result").resolve()
        self.owner = owner
        self.on_saved = on_saved
        self.retention_seconds = retention_days * 86_400
        self._last_cleanup: float | None = None
        self._index_cache: LineIndexCache | None = None

    def save(self, text: str | bytes) -> Path:
        """Write `text` (or its UTF-8 bytes) to a new file and return its absolute path.

        Raises:
            OffloadError: the file could not be written (the caller keeps the output whole).
        """
        path = self.dir / saved_name(self.owner)
        try:
            private_dir(self.dir)
            write_atomic(path, text)
        except OSError as exc:
            raise OffloadError(f"cannot write tool output to {str(path)!r}: {exc}") from exc
        tell_saved(self.on_saved, path)
        return path

    def owns(self, path: str | Path) -> bool:
        """Whether `path` names a file of this store."""
        return Path(path).parent == self.dir

    def holds(self, path: str | Path, excerpt: str) -> bool:
        """Whether `path` is a regular file of this store that begins with `excerpt`: the
        proof that a notice naming it was written by this package (a notice is trusted only
        then; a forged one, or one whose file is gone, is plain content)."""
        if not self.owns(path):
            return False
        data = excerpt.encode("utf-8")
        try:
            fd = os.open(
                path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
            )
        except OSError:
            return False
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            return os.read(fd, len(data)) == data
        except OSError:
            return False
        finally:
            os.close(fd)

    def read_saved(self, path: str, *, chunk_bytes: int = 1 << 20) -> Iterator[bytes] | None:
        """The bytes of a saved output of this store, streamed in chunks of `chunk_bytes`
        (whole, so that how a cut or masked run ended is judged from all of it:
        `_outcome.judge`; never held whole). `None` when `path` is not a regular file of this
        store; an error while reading is raised by the iterator."""
        if self.size(path) is None:
            return None
        return self._chunks(path, chunk_bytes)

    @staticmethod
    def _chunks(path: str, chunk_bytes: int) -> Iterator[bytes]:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            while chunk := os.read(fd, chunk_bytes):
                yield chunk
        finally:
            os.close(fd)

    # -- ranged reads (the output seam's, `stores.seams.OutputSeam`) ----------------------

    def size(self, path: str) -> int | None:
        """Bytes of the saved output; `None` when `path` is no regular file of this store."""
        if not self.owns(path):
            return None
        try:
            info = os.stat(path, follow_symlinks=False)
        except (OSError, ValueError):
            return None
        return info.st_size if stat.S_ISREG(info.st_mode) else None

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        """Up to `size` bytes from byte `offset` (fewer at the end).

        Raises:
            KeyError: no such output.
        """
        with self._open(path) as file:
            file.seek(max(offset, 0))
            return file.read(max(size, 0)) or b""

    def line_count(self, path: str) -> int:
        """Lines of the output (by `_line_index`, cached per file version).

        Raises:
            KeyError: no such output.
        """
        with self._open(path) as file:
            return self._lines().get(ByteSource(file), os.fstat(file.fileno())).lines

    def line_start(self, path: str, line: int) -> int:
        """Byte offset where `line` begins.

        Raises:
            KeyError: no such output.
        """
        with self._open(path) as file:
            source = ByteSource(file)
            index = self._lines().get(source, os.fstat(file.fileno()))
            return index.line_start(source, line)

    def _lines(self) -> LineIndexCache:
        if self._index_cache is None:
            self._index_cache = LineIndexCache()
        return self._index_cache

    def _open(self, path: str) -> io.FileIO:
        if not self.owns(path):
            raise KeyError(path)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except (OSError, ValueError) as exc:
            raise KeyError(path) from exc
        return io.FileIO(fd, "rb")

    def cleanup(
        self,
        referenced: Iterable[str | Path],
        *,
        now: float | None = None,
        only: Tenant | None = None,
    ) -> list[Path]:
        """Delete expired files of this store that no live message points to (`only`: of
        the outputs that tenant sees, by their names' owner tags).

        Only regular files directly inside `tool_result/` whose names this store makes
        (``*.txt`` and leftover ``.*.tmp``) are considered; never anything outside.
        """
        now = time.time() if now is None else now
        self._last_cleanup = now
        keep = {Path(p).resolve() for p in referenced}
        for path in keep:
            # Retention counts from the last use by a live context: a manager in another
            # process cleaning the same directory then spares what this one still uses.
            if path.parent == self.dir:
                try:
                    os.utime(path)
                except OSError:
                    pass
        removed: list[Path] = []
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return removed
        except OSError as exc:
            logger.warning("agentscope_ctx: cannot list %s: %s", self.dir, exc)
            return removed
        for entry in entries:
            name = entry.name
            if not (name.endswith(".txt") or (name.startswith(".") and name.endswith(".tmp"))):
                continue
            if not entry.is_file(follow_symlinks=False):
                continue
            if only is not None and not only.sees_tags(*(name_tags(name) or ("", ""))):
                continue
            path = self.dir / name
            try:
                info = entry.stat(follow_symlinks=False)
                expired = now - info.st_mtime > self.retention_seconds
                if expired and path not in keep:
                    path.unlink()
                    removed.append(path)
                    if name.endswith(".txt"):  # a notice to it says it was deleted, and when
                        write_local(path, reason="retention", at=now, size=info.st_size)
            except OSError as exc:
                logger.warning("agentscope_ctx: cannot remove %s: %s", path, exc)
        return removed

    def maybe_cleanup(self, referenced: Callable[[], Iterable[str | Path]]) -> list[Path]:
        """`cleanup`, at most once an hour. `referenced` is called only when a cleanup is due:
        collecting the live references walks every message, too much for every step."""
        now = time.time()
        if self._last_cleanup is not None and now - self._last_cleanup < _CLEANUP_EVERY_SECONDS:
            return []
        return self.cleanup(referenced(), now=now)
