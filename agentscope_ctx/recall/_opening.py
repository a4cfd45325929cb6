"""How `read_file` opens a file below a root: component by component with ``O_NOFOLLOW``
(``dir_fd=``) and ``O_NONBLOCK`` (see `_read_file`), and what an open error says."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["KINDS", "PROC_FD", "open_below", "open_error"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_COMMON = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_FILE_FLAGS = _COMMON | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
_DIR_FLAGS = _COMMON | _NOFOLLOW | _DIRECTORY
_WALK = bool(_NOFOLLOW and _DIRECTORY) and os.open in os.supports_dir_fd
PROC_FD = Path("/proc/self/fd")
KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def open_below(root: Path, real: Path) -> int:
    """Open `real` for reading, walking from `root` one component at a time without following
    any symlink, and without blocking (``O_NONBLOCK``: a FIFO opens at once, and is refused
    by the caller)."""
    parts = real.relative_to(root).parts
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the root itself")
    if not _WALK:  # no dir_fd here: open by name; the checks after opening still apply
        return os.open(real, _FILE_FLAGS)
    dir_fd = os.open(root, _COMMON | _DIRECTORY)
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = next_fd
        return os.open(parts[-1], _FILE_FLAGS, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def open_error(name: str, exc: OSError) -> str:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return f"{name} changed while it was being opened (a symlink appeared); it is not read"
    if exc.errno == errno.ENOENT:
        return f"{name} does not exist"
    if exc.errno == errno.EISDIR:
        return f"{name} is a directory, not a file"
    if exc.errno == errno.ENXIO:
        return f"{name} is a socket or a device; only regular files can be read"
    return f"cannot open {name}: {exc.strerror or exc}"
