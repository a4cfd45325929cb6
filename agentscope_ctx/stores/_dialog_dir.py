"""`DialogDir`: the ``dialog/`` directory, opened so that nothing in it leads outside it.

A symbolic link planted in ``dialog/`` (``2026-12-03.jsonl -> /tmp/elsewhere``), a symlinked
``dialog`` itself or a symlinked ``.lock`` would make the store write outside ``working_dir``.
On POSIX the directory is opened once with ``O_DIRECTORY | O_NOFOLLOW`` and every file in it is
opened relative to that descriptor with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO never blocks the
open), then checked to be a regular file; so a link swapped in between a check and a use is
refused too. Where descriptors relative to a directory are not available (Windows), the same
checks are made on paths. A refusal is a `PersistenceError` naming the path.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..core._errors import PersistenceError
from ..core._private import FILE_MODE, tighten_fd

__all__ = ["DialogDir", "append_file", "refused_reason"]

_APPEND = os.O_RDWR | os.O_APPEND

_DIR_FD = (
    os.open in os.supports_dir_fd
    and os.stat in os.supports_dir_fd
    and os.scandir in os.supports_fd
    and hasattr(os, "O_NOFOLLOW")
)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FILE_FLAGS = _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
_LINK_REFUSED = "it is a symbolic link, and the dialog store never follows one"


def refused_reason(entry: os.DirEntry[str]) -> str | None:
    """Why the store will not open this directory entry, or None for a regular file."""
    if entry.is_symlink():
        return "a symbolic link"
    if not entry.is_file(follow_symlinks=False):
        return "not a regular file"
    return None


class DialogDir:
    """An open handle on the dialog directory; close it with `close`."""

    def __init__(self, path: Path) -> None:
        """Open `path`, refusing a symbolic link or anything but a directory.

        Raises:
            PersistenceError: `path` cannot be opened, is a symbolic link or not a directory.
        """
        self.path = path
        self._fd: int | None = None
        try:
            if _DIR_FD:
                self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW)
            elif os.path.islink(path):
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
            elif not path.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        except OSError as exc:
            why = _LINK_REFUSED if os.path.islink(path) else str(exc)
            raise PersistenceError(f"cannot open dialog directory {str(path)!r}: {why}") from exc

    def open(self, name: str, flags: int, mode: int = 0o666) -> int:
        """Open the regular file `name` in the directory, never following a symbolic link.

        Raises:
            OSError: The open failed (``FileExistsError`` with ``O_EXCL``, a missing file...).
            PersistenceError: `name` is a symbolic link or not a regular file.
        """
        path = self.path / name
        try:
            if self._fd is not None:
                fd = os.open(name, flags | _FILE_FLAGS, mode, dir_fd=self._fd)
            elif os.path.islink(path):
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
            else:
                fd = os.open(path, flags | _FILE_FLAGS, mode)
        except OSError as exc:
            if self._is_link(name):
                raise PersistenceError(f"refusing {str(path)!r}: {_LINK_REFUSED}") from exc
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise PersistenceError(f"refusing {str(path)!r}: it is not a regular file")
        return fd

    def scan(self) -> list[os.DirEntry[str]]:
        """The directory's entries."""
        with os.scandir(self._fd if self._fd is not None else self.path) as entries:
            return list(entries)

    def stat(self, name: str) -> os.stat_result:
        """`lstat` of `name` in the directory."""
        if self._fd is not None:
            return os.stat(name, dir_fd=self._fd, follow_symlinks=False)
        return os.lstat(self.path / name)

    def fsync(self) -> None:
        """Make the directory's entries durable (after a file was created)."""
        if self._fd is not None:
            os.fsync(self._fd)
        else:
            self.fsync_path(self.path)

    @staticmethod
    def fsync_path(path: Path) -> None:
        """Make the entries of the directory `path` durable."""
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Release the directory descriptor (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _is_link(self, name: str) -> bool:
        try:
            return stat.S_ISLNK(self.stat(name).st_mode)
        except OSError:
            return False


def append_file(folder: DialogDir, name: str, data: bytes) -> tuple[int, int]:
    """Append `data` to `name` durably; end a torn last line first. Returns (inode, size)."""
    path = folder.path / name
    try:
        try:
            fd = folder.open(name, _APPEND | os.O_CREAT | os.O_EXCL, FILE_MODE)
            created = True
        except FileExistsError:
            fd = folder.open(name, _APPEND)
            created = False
        try:
            if not created:
                tighten_fd(fd, path)  # made by an older version or another umask
            size = os.fstat(fd).st_size
            if size:
                os.lseek(fd, size - 1, os.SEEK_SET)
                if os.read(fd, 1) != b"\n":  # a torn fragment: keep it on its own line
                    data = b"\n" + data
            view = memoryview(data)
            while view:  # one write in practice; loop only if the kernel writes short
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            stat = os.fstat(fd)
        finally:
            os.close(fd)
        if created:
            folder.fsync()
    except OSError as exc:
        raise PersistenceError(f"cannot append to dialog file {str(path)!r}: {exc}") from exc
    return stat.st_ino, stat.st_size
