"""`LocalMemoryDocs`: the memory seam on local files, ``{working_dir}/memory/`` (the default).

- ``.lock`` is ``flock``-ed for each read-modify-write of a document (`update`, `append`), so
  that processes sharing the directory lose nothing; held for a moment, never across a model
  call;
- ``.consolidate.lock`` is ``flock``-ed (non-blocking) while a consolidation runs.

Every file is private to its owner (``0600`` in a ``0700`` directory, `_private`); a replaced
document is written atomically through a temporary file of a unique name, an appended one with
``O_APPEND``. A name is confined to the directory: ``..``, absolute paths elsewhere, symlinks
and hidden files are refused by `name_of`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..core._private import FILE_MODE, file_lock, private_dir, tighten_fd, write_atomic

if sys.platform != "win32":
    import fcntl

__all__ = ["LocalMemoryDocs", "local_memory"]

_WRITE_LOCK = ".lock"
_CONSOLIDATE_LOCK = ".consolidate.lock"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class LocalMemoryDocs:
    """The documents of ``{working_dir}/memory/`` (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        """Initialize the store (nothing is created until a write).

        Args:
            root: The memory directory (``{working_dir}/memory``).
        """
        self.root = Path(root)

    def path(self, name: str) -> Path:
        """The file of document `name`."""
        return self.root / name

    def ref(self, name: str) -> str:
        return str(self.root / name)

    def name_of(self, file_path: str) -> str:
        given = Path(file_path)
        if not file_path.strip() or "\x00" in file_path or ".." in given.parts:
            raise ValueError(f"file_path {file_path!r} is refused: give a name inside memory/")
        root = self.root.resolve()
        if given.is_absolute():
            for base in (self.root.absolute(), root):
                if given.is_relative_to(base):
                    given = given.relative_to(base)
                    break
            else:
                raise ValueError(f"file_path {file_path!r} is outside {self.root}")
        path = root
        for part in given.parts:
            path = path / part
            if path.is_symlink():
                raise ValueError(f"file_path {file_path!r} goes through a symlink; refused")
        if path == root or any(part.startswith(".") for part in given.parts):
            raise ValueError(f"file_path {file_path!r} is not a memory file")
        return given.as_posix()

    def read(self, name: str) -> str:
        path = self.root / name
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def exists(self, name: str) -> bool:
        return (self.root / name).exists()

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.glob("*.md") if not p.name.startswith("."))

    def update(self, name: str, change: Callable[[str], str | None]) -> bool:
        private_dir(self.root)
        with file_lock(self.root / _WRITE_LOCK):
            new = change(self.read(name))
            if new is None:
                return False
            write_atomic(self.root / name, new)
            return True

    def append(self, name: str, change: Callable[[str], str]) -> None:
        private_dir(self.root)
        with file_lock(self.root / _WRITE_LOCK):
            text = change(self.read(name))
            if text:
                _append(self.root / name, text)

    @contextmanager
    def consolidation_lock(self) -> Iterator[bool]:
        private_dir(self.root)
        path = self.root / _CONSOLIDATE_LOCK
        file = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, FILE_MODE), "a+")
        try:
            tighten_fd(file.fileno(), path)
            if sys.platform != "win32":
                try:
                    fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    yield False
                    return
            yield True
        finally:
            file.close()


def _append(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, FILE_MODE)
    try:
        tighten_fd(fd, path)
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def local_memory(working_dir: Path) -> LocalMemoryDocs:
    """The memory of `working_dir` (its ``memory/``; ``~`` expanded)."""
    return LocalMemoryDocs(Path(working_dir).expanduser() / "memory")
