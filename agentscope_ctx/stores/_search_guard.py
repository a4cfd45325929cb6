"""The text index's files checked before Tantivy reads them (issue 46 item 8): a file damaged
while a process has the index open is found before a search or a write reads it, and the index
is then rebuilt as a damaged one found at open is (`TextIndexError`: `_search_db`).

Tantivy reads a segment's files (``.idx``, ``.pos``, ``.store``, ``.term``, ``.fast``,
``.fieldnorm``, ``.del``) through memory maps of their whole length, made when the reader (or
the writer) opens the segment. A file truncated after that kills the process with SIGBUS at
the first read of a page past its new end, which no ``try`` can catch; a file overwritten in
place (zeros, garbage) makes Tantivy panic (``pyo3_runtime.PanicException``, a
`BaseException`), fail with an I/O error, or answer from garbage ("No hits").

A segment's files are written once and never changed: a commit writes new segments and a new
``meta.json``, and a merge writes new segments and deletes the old ones after a newer
``meta.json`` stops naming them. So any change to a file the current ``meta.json`` names (its
inode, size or modification time; not its change time: the writer tightens each new
file's mode after its commit) is damage, and so is its absence. `MappedFiles`
keeps the stamps of those files as they were when this process's reader was last reloaded
(stat before and after the reload: a file damaged while it was being mapped is found too),
and `MappedFiles.check` compares them before each use, when anything in the folder changed
since the last check: an inotify watch of the folder says so in one ``read`` (Linux; 2 us a
search); without one, every check stats each file (6 per segment, some 6 us each on the
virtual disks measured: 0.18 ms a search at 5 segments). A commit (``meta.json`` changed) is
taken first, then the files it names. (A file written through a shared memory map of its
own raises no inotify event: only its ``stat`` would tell, at the next change in the
folder.)

What it cannot see: a file damaged between the check and Tantivy's read of it (the
microseconds of one search): a panic or an error is then turned into `TextIndexError`
(`tantivy_errors`), and a SIGBUS still ends the process, as it would any program reading a
file another one truncates under its maps; the next process rebuilds the index at open.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._search_tantivy import TextIndexError, is_panic

__all__ = ["MappedFiles", "segment_files", "tantivy_errors"]

SEGMENT_EXTENSIONS = ("idx", "pos", "store", "term", "fast", "fieldnorm")

_Stamp = tuple[int, int, int]


@contextmanager
def tantivy_errors(index_dir: Path) -> Iterator[None]:
    """Turn what Tantivy raises on a damaged index, a `ValueError` or a panic, into
    `TextIndexError` (rebuilt as a damaged index); anything else passes through."""
    try:
        yield
    except TextIndexError:
        raise
    except ValueError as exc:
        raise TextIndexError(f"text index {index_dir.name!r} is corrupt: {exc}") from exc
    except BaseException as exc:
        if not is_panic(exc):
            raise
        raise TextIndexError(
            f"text index {index_dir.name!r} is corrupt (Tantivy panicked: {exc})"
        ) from exc


def segment_files(meta: bytes) -> list[str]:
    """The names of the files of the segments `meta` (a ``meta.json``) names.

    Raises:
        TextIndexError: `meta` is not a ``meta.json``.
    """
    try:
        segments = json.loads(meta)["segments"]
        names = []
        for segment in segments:
            base = str(segment["segment_id"]).replace("-", "")
            names += [f"{base}.{ext}" for ext in SEGMENT_EXTENSIONS]
            deletes = segment.get("deletes")
            if deletes:
                names.append(f"{base}.{int(deletes['opstamp'])}.del")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TextIndexError(f"text index meta.json is corrupt: {exc}") from exc
    return names


def _stamp(path: str) -> _Stamp | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
_IN_CHANGES = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
"""IN_MODIFY (a write, a truncation), IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO
(a commit's ``meta.json``), IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF."""


@functools.cache
def _inotify() -> Any:
    """libc's ``inotify_init1`` and ``inotify_add_watch``, or `None` (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        init, add = libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError):
        return None
    init.argtypes, add.argtypes = [ctypes.c_int], [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    return init, add


class _Watch:
    """An inotify watch of a folder (Linux): whether anything in it changed since the last
    `changed` call is one ``read`` of a queue, not a ``stat`` per file (some 6 us each on the
    virtual disks measured: 30 files cost a search 0.18 ms). `ok` is False where there is
    none (another system, the user's limit of inotify instances reached, a forked child:
    its parent's queue is not its own); then every check stats the files."""

    def __init__(self, folder: Path) -> None:
        self.fd, self.pid = -1, os.getpid()
        calls = _inotify()
        if calls is None:
            return
        fd = calls[0](_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            return
        if calls[1](fd, os.fsencode(folder), _IN_CHANGES) < 0:
            os.close(fd)
            return
        self.fd = fd
        self._closer = weakref.finalize(self, os.close, fd)

    def close(self) -> None:
        if self.fd >= 0 and self.pid == os.getpid():
            self._closer()
        self.fd = -1

    @property
    def ok(self) -> bool:
        return self.fd >= 0 and self.pid == os.getpid()

    def changed(self) -> bool:
        """Whether an event came since the last call (all of them read: a queue that
        overflowed says so by an event too)."""
        seen = False
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return seen
            except OSError:
                return True
            if not data:
                return seen
            seen = True


@dataclass
class MappedFiles:
    """The segment files this process's reader of one text index has mapped, as they were
    then (see the module docstring)."""

    index_dir: Path
    meta: bytes = b""
    """The ``meta.json`` the reader was last reloaded at."""
    stamps: dict[str, _Stamp] = field(default_factory=dict)
    """Each file's (inode, size, mtime in ns), by its path."""
    watch: _Watch | None = None
    """What tells that nothing in the folder changed since the last check (`_Watch`)."""
    added: int = 0
    """Bytes of the files the last reload mapped that the one before had not."""

    def check(self, index: Any) -> bool:
        """Reload `index`'s reader when another commit was made (``meta.json`` changed), after
        checking that none of the files it maps was changed or removed since it mapped them,
        and that those of the new commit are whole; whether it was reloaded.

        Raises:
            TextIndexError: a file was damaged (the index is to be rebuilt).
        """
        if self.watch is None:
            self.watch = _Watch(self.index_dir)  # before the files are read: no change missed
        elif self.watch.ok and not self.watch.changed() and self.meta:
            return False  # no file of the folder was written, moved or removed since
        try:
            return self._check(index)
        except TextIndexError:
            self.meta = b""  # checked whole again next time
            raise

    def close(self) -> None:
        """Stop watching the folder (the connection is closed)."""
        if self.watch is not None:
            self.watch.close()

    def _check(self, index: Any) -> bool:
        try:
            meta = (self.index_dir / "meta.json").read_bytes()
        except FileNotFoundError:
            raise TextIndexError(f"no such text index {self.index_dir.name!r}") from None
        except OSError as exc:
            raise TextIndexError(f"text index {self.index_dir.name!r}: {exc}") from exc
        same = meta == self.meta
        for name, stamp in self.stamps.items():
            now = _stamp(name)
            if now is None and not same:
                continue  # merged away by the newer commit (the maps stay whole)
            if now != stamp:
                what = "is gone" if now is None else "was changed in place"
                raise TextIndexError(
                    f"text index {self.index_dir.name!r} is corrupt: "
                    f"{os.path.basename(name)} {what}"
                )
        if same:
            return False
        folder = str(self.index_dir)
        names = [os.path.join(folder, name) for name in segment_files(meta)]
        before = {name: _stamp(name) for name in names}
        with tantivy_errors(self.index_dir):
            try:
                index.reload()
            except ValueError:  # a segment merged away between its meta.json and its files
                index.reload()
        after = {name: _stamp(name) for name in names}
        for name in names:
            if after[name] != before[name]:
                raise TextIndexError(
                    f"text index {self.index_dir.name!r} is corrupt: "
                    f"{os.path.basename(name)} changed while it was opened"
                )
        self.meta = meta
        stamps = {name: stamp for name, stamp in after.items() if stamp is not None}
        self.added = sum(stamp[1] for name, stamp in stamps.items() if name not in self.stamps)
        self.stamps = stamps
        return True
