"""Files private to their owner: how this package creates, replaces and locks what it writes.

A working dir holds the dialog, the full tool outputs, the long-term memory and a search index
of all three: whatever secret a user typed or a tool printed. So every directory the package
makes there is ``0700`` and every file ``0600``, whatever the umask, on every write path:
files created by any process (the CLI, another agent), lock files, temporary files, a rebuilt
search index, and SQLite's ``-wal``, ``-shm`` and ``-journal`` files (SQLite gives them the
mode of their database, which is created ``0600`` before SQLite opens it).

Files and directories made earlier with looser modes (an older version, another umask, by
hand) are tightened when the package next uses them: a directory when a context manager
starts or a process writes to it, together with the regular files directly inside (the
package's directories are flat), and a file whenever it is opened to be written. Only the
group and other bits are dropped. A working dir the package creates is ``0700``; an existing
one is left as it is (it may be a shared project directory), as everything the package
writes lives in its subdirectories. What cannot be tightened (a file of another user) is
logged, never fatal.

`write_atomic` replaces a file through a temporary file of a unique name (two writers never
share one), and `file_lock` serializes the read-modify-write cycles of several processes
(``flock`` on a lock file; a no-op on Windows, where the modes are not POSIX either).
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

if sys.platform != "win32":
    import fcntl

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "STORE_DIRS",
    "file_lock",
    "private_dir",
    "tighten_fd",
    "write_atomic",
]

logger = logging.getLogger("agentscope_ctx")

DIR_MODE = 0o700
"""Mode of the directories the package makes (before the umask, which can only narrow it)."""
FILE_MODE = 0o600
"""Mode of the files the package makes."""
STORE_DIRS = ("dialog", "index", "memory", "tool_result", "usage")
"""The package's directories in a working dir (tightened when a manager starts)."""
_OTHERS = 0o077
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FCHMOD = hasattr(os, "fchmod")


def private_dir(path: Path, *, tighten: bool = True, create: bool = True) -> None:
    """Make sure `path` is a directory only its owner can enter.

    With `create`, makes it and its missing parents with mode ``0700``; with `tighten`, an
    existing directory that others can read or enter loses those bits, and so do the regular
    files directly inside it. A symbolic link is left alone (the stores refuse or resolve it).

    Raises:
        OSError: A missing directory cannot be created.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        if create:
            _make(Path(path))
        return
    if (
        tighten
        and sys.platform != "win32"
        and stat.S_ISDIR(info.st_mode)
        and info.st_mode & _OTHERS
    ):
        _tighten_dir(Path(path), info.st_mode)


def tighten_fd(fd: int, name: str | Path = "") -> None:
    """Drop the group and other bits of the open file `fd` (a file made before this version,
    or by another umask) before the package writes to it. Best effort: a failure is logged."""
    if not _FCHMOD:
        return
    try:
        mode = os.fstat(fd).st_mode
        if mode & _OTHERS:
            os.fchmod(fd, stat.S_IMODE(mode) & ~_OTHERS)
    except OSError as exc:
        logger.warning("agentscope_ctx: cannot make %s private: %s", str(name) or fd, exc)


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace `path` by `data` (text as UTF-8): a new file of a unique name in the same
    directory, mode ``0600``, written and fsynced, then renamed over `path`. Concurrent
    writers each rename their own file (the last one wins, none fails); a reader sees the old
    content or the new one, never a mix.

    Raises:
        OSError: The file cannot be written; `path` is unchanged and no temporary is left.
    """
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise


@contextmanager
def file_lock(path: Path, *, deadline: float | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on `path` (created ``0600`` when missing) while inside.

    Every process and every thread that takes it waits for the holder (a ``flock`` belongs
    to an open file, not to a process), without a bound, or until `deadline`
    (`time.monotonic()`) when one is given. Keep what runs inside short and never take the
    same lock again inside it.

    Raises:
        OSError: The lock file cannot be created or opened.
        TimeoutError: Another holder kept it past `deadline` (raised before entering).
    """
    if sys.platform == "win32":
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, FILE_MODE)
    try:
        tighten_fd(fd, path)
        if deadline is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(f"{str(path)!r} is held by another process") from None
                    time.sleep(0.01)
        yield
    finally:
        os.close(fd)  # releases the lock


def _make(path: Path) -> None:
    parent = path.parent
    if parent != path and not os.path.lexists(parent):
        _make(parent)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:  # made meanwhile by another thread or process
        pass


def _tighten_dir(path: Path, mode: int) -> None:
    try:
        os.chmod(path, stat.S_IMODE(mode) & ~_OTHERS)
    except OSError as exc:
        logger.warning("agentscope_ctx: cannot make %s private: %s", path, exc)
        return
    try:
        entries = list(os.scandir(path))
    except OSError as exc:
        logger.warning("agentscope_ctx: cannot list %s: %s", path, exc)
        return
    for entry in entries:
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            fd = os.open(entry.path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue  # gone meanwhile, or not ours to open
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                tighten_fd(fd, entry.path)
        finally:
            os.close(fd)
