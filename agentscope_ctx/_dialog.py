"""`DialogStore`: every message that left the agent's context, kept on disk.

Layout: ``{working_dir}/dialog/YYYY-MM-DD.jsonl``, UTF-8, ``\\n`` line ends, one record per
line. A message goes to the file of its own date (the date part of ``Msg.timestamp``, today's
local date when the timestamp is missing or unparseable); within a file, records keep the order
in which they were appended.

The record, version 1 (the only place this format is defined)::

    {"v": 1, "msg": <Msg.to_dict()>, "agent": "<name>", "session": "<id>"}

``agent`` and ``session`` are optional (absent in older records): the name of the agent whose
context the message left, and its session when known; readers ignore fields they do not know.

``msg`` holds ``id``, ``name``, ``role``, ``content`` (a string or a list of content blocks),
``metadata`` and ``timestamp`` exactly as ``Msg.to_dict()`` gives them; ``Msg.from_dict()``
reads it back. Text is written unescaped (``ensure_ascii=False``); a record whose text cannot be
encoded as UTF-8 (a lone surrogate) is written with ``\\uXXXX`` escapes instead, which round-trip
exactly. A line that does not parse (a torn write, a hand edit) is skipped and reported by the
reader, never fatal; a writer first ends such a fragment with ``\\n`` so new records stay whole.

Guarantees of `DialogStore.append`: the records are written and ``fsync``-ed (with the directory
when a file is created) before it returns, and a message whose ``id`` is already stored is not
written again. On POSIX, an exclusive ``flock`` on ``dialog/.lock`` serializes writers across
processes sharing one ``working_dir``; readers take it shared.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from agentscope.message import Msg

from ._errors import ContextUsageError, PersistenceError

if sys.platform != "win32":
    import fcntl

__all__ = ["DialogReadReport", "DialogStore"]

logger = logging.getLogger("agentscope_ctx")

RECORD_VERSION = 1
"""The ``v`` field of the records this module writes (and the only one it reads)."""

_DAY = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[ T]|$)")
_DAY_FILE = re.compile(r"\d{4}-\d{2}-\d{2}\.jsonl")
_LOCK_NAME = ".lock"


@dataclass
class DialogReadReport:
    """What a read of the dialog store found.

    Attributes:
        files: Names of the files read (``"2026-12-02.jsonl"``), oldest day first.
        messages: How many messages were returned.
        bad_lines: One ``(file name, line number, reason)`` per skipped line; lines count from 1.
    """

    files: list[str] = field(default_factory=list)
    messages: int = 0
    bad_lines: list[tuple[str, int, str]] = field(default_factory=list)


def _date_prefix(text: object) -> str | None:
    """The valid ``YYYY-MM-DD`` that `text` starts with (followed by a space, ``T`` or nothing)."""
    match = _DAY.match(text) if isinstance(text, str) else None
    try:
        return date.fromisoformat(match.group(1)).isoformat() if match else None
    except ValueError:
        return None


def _encode(msg: Msg, fields: Mapping[str, str] | None = None) -> bytes:
    """One record line, ``\\n`` included."""
    if not isinstance(msg.id, str):
        raise PersistenceError(f"message id must be a str, got {msg.id!r}")
    record = {"v": RECORD_VERSION, "msg": msg.to_dict(), **(fields or {})}
    try:
        text = json.dumps(record, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise PersistenceError(
            f"message {msg.id!r} cannot be stored: its to_dict() is not JSON ({exc})"
        ) from exc
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: the escaped form round-trips exactly
        return (json.dumps(record) + "\n").encode("ascii")


def _decode(raw: bytes) -> Msg | str:
    """The message of a record line, or why the line is not a valid record."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "not valid UTF-8"
    except json.JSONDecodeError as exc:
        return f"invalid JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(record, dict):
        return f"not a record: a JSON {type(record).__name__}"
    if record.get("v") != RECORD_VERSION:
        return f"unsupported record version {record.get('v')!r}"
    data = record.get("msg")
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        return "record without a message id"
    try:
        return Msg.from_dict(data)
    except Exception as exc:  # any malformed field: the caller reports it, never raises
        return f"not a message ({type(exc).__name__}: {exc})"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _append_file(path: Path, data: bytes) -> tuple[int, int]:
    """Append `data` durably; end a torn last line first. Returns the file's (inode, size)."""
    try:
        flags = os.O_RDWR | os.O_APPEND | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666)
            created = True
        except FileExistsError:
            fd = os.open(path, flags)
            created = False
        try:
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
            _fsync_dir(path.parent)
    except OSError as exc:
        raise PersistenceError(f"cannot append to dialog file {str(path)!r}: {exc}") from exc
    return stat.st_ino, stat.st_size


class DialogStore:
    """The append-only store of messages that left the context (see the module docstring).

    One instance per ``working_dir`` is enough; several instances, threads or processes on the
    same directory are safe. Writing is async (`append`); reading is sync (`read`, `days`,
    `ids`) with an async twin `aread`, since it is also used outside a running agent.
    """

    def __init__(
        self,
        working_dir: Path,
        *,
        record_fields: Mapping[str, str] | None = None,
        on_append: Callable[[], None] | None = None,
    ) -> None:
        """Create a store; nothing is touched on disk until the first `append`.

        Args:
            working_dir: The agent's working directory; files go to ``working_dir/dialog``.
            record_fields: Extra fields written on each record (``agent``, ``session``).
            on_append: Called (in the writing thread, lock released) after records were
                written; what it raises is logged, never passed on.
        """
        self._dialog_dir = Path(working_dir) / "dialog"
        self._fields = dict(record_fields or {})
        self._on_append = on_append
        self._lock = threading.Lock()
        self._ids: set[str] = set()  # every id in the files, as of the last scan
        self._scanned: dict[str, tuple[int, int]] = {}  # file name -> (inode, bytes scanned)

    @property
    def dialog_dir(self) -> Path:
        """The directory holding the ``YYYY-MM-DD.jsonl`` files."""
        return self._dialog_dir

    async def append(self, msgs: Sequence[Msg]) -> int:
        """Append messages durably, skipping those whose id is already stored.

        When this returns, the new records are on disk (fsync-ed), so the caller may drop the
        messages from memory. If it raises, some of them may already be stored; appending the
        same messages again is safe, as stored ids are skipped. The file I/O runs in a thread.

        Args:
            msgs: The messages, in order; a repeated id within the batch is written once.

        Returns:
            How many messages were newly written.

        Raises:
            PersistenceError: A message is not JSON-serializable, or the directory, the lock
                or a file cannot be created or written (names the path and the cause).
        """
        if not msgs:
            return 0
        written = await asyncio.to_thread(self._append_sync, list(msgs))
        if written and self._on_append is not None:
            try:
                await asyncio.to_thread(self._on_append)
            except Exception:  # a listener (the search index) never fails a durable append
                logger.exception("agentscope_ctx: the dialog append listener failed")
        return written

    def read(self, day: str | None = None) -> tuple[list[Msg], DialogReadReport]:
        """Read the stored messages, oldest day first, in file order.

        Lines that are not valid records (torn, corrupt) are skipped and listed in the report.

        Args:
            day: ``"YYYY-MM-DD"`` to read one day only; ``None`` reads every day.

        Returns:
            The messages and a report; both empty when nothing is stored.

        Raises:
            ContextUsageError: `day` is not a ``YYYY-MM-DD`` date.
            PersistenceError: The directory or a file exists but cannot be read.
        """
        if day is not None and _date_prefix(day) != day:
            raise ContextUsageError(f"day must be a date 'YYYY-MM-DD', got {day!r}")
        msgs: list[Msg] = []
        report = DialogReadReport()
        if not self._dialog_dir.exists():
            return msgs, report
        with self._flock(exclusive=False):
            names = [f"{day}.jsonl"] if day is not None else self._day_files()
            for name in names:
                path = self._dialog_dir / name
                if day is not None and not path.exists():
                    continue
                report.files.append(name)
                try:
                    with path.open("rb") as file:
                        for number, raw in enumerate(file, start=1):
                            msg = _decode(raw) if raw.strip() else None  # blank: skip
                            if isinstance(msg, Msg):
                                msgs.append(msg)
                            elif msg is not None:
                                torn = "" if raw.endswith(b"\n") else "torn last line: "
                                report.bad_lines.append((name, number, f"{torn}{msg}"[:200]))
                except OSError as exc:
                    raise PersistenceError(f"cannot read dialog file {str(path)!r}: {exc}") from exc
        report.messages = len(msgs)
        return msgs, report

    async def aread(self, day: str | None = None) -> tuple[list[Msg], DialogReadReport]:
        """`read`, run in a thread so that a large store does not block the event loop."""
        return await asyncio.to_thread(self.read, day)

    def days(self) -> list[str]:
        """The days (``"YYYY-MM-DD"``, sorted) that have a dialog file."""
        if not self._dialog_dir.exists():
            return []
        return [name.removesuffix(".jsonl") for name in self._day_files()]

    def ids(self) -> set[str]:
        """The ids of every stored message (a copy)."""
        with self._lock:
            if not self._dialog_dir.exists():
                return set()
            with self._flock(exclusive=False):
                self._rescan()
            return set(self._ids)

    # -- internals -------------------------------------------------------------------------

    def _append_sync(self, msgs: list[Msg]) -> int:
        today = date.today().isoformat()
        lines = [
            (msg.id, _date_prefix(msg.timestamp) or today, _encode(msg, self._fields))
            for msg in msgs
        ]
        with self._lock:
            self._make_dir()
            with self._flock(exclusive=True):
                self._rescan()
                by_day: dict[str, tuple[list[str], list[bytes]]] = {}
                batch: set[str] = set()
                for msg_id, day, line in lines:
                    if msg_id in self._ids or msg_id in batch:
                        continue
                    batch.add(msg_id)
                    ids, data = by_day.setdefault(day, ([], []))
                    ids.append(msg_id)
                    data.append(line)
                written = 0
                for day in sorted(by_day):
                    ids, data = by_day[day]
                    name = f"{day}.jsonl"
                    before = self._scanned.get(name)
                    inode, size = _append_file(self._dialog_dir / name, b"".join(data))
                    self._ids.update(ids)
                    if before is None or before[0] == inode:  # else the next rescan redoes it
                        self._scanned[name] = (inode, size)
                    written += len(ids)
        return written

    def _rescan(self) -> None:
        """Bring `_ids` up to date with the files; reads only bytes added since the last scan.

        The caller holds the flock, so no writer is mid-line.
        """
        names = self._day_files()
        try:
            stats = {name: (self._dialog_dir / name).stat() for name in names}
            if set(self._scanned) - set(names) or any(
                name in self._scanned
                and (stat.st_ino != self._scanned[name][0] or stat.st_size < self._scanned[name][1])
                for name, stat in stats.items()
            ):  # a file vanished, shrank or was replaced: start over
                self._scanned.clear()
                self._ids.clear()
            for name, stat in stats.items():
                offset = self._scanned.get(name, (stat.st_ino, 0))[1]
                if stat.st_size == offset:
                    continue
                with (self._dialog_dir / name).open("rb") as file:
                    file.seek(offset)
                    for raw in file:
                        msg = _decode(raw) if raw.strip() else ""
                        if isinstance(msg, Msg):
                            self._ids.add(msg.id)
                    self._scanned[name] = (stat.st_ino, file.tell())
        except OSError as exc:
            raise PersistenceError(
                f"cannot scan dialog files in {str(self._dialog_dir)!r}: {exc}"
            ) from exc

    def _day_files(self) -> list[str]:
        try:
            return sorted(
                entry.name
                for entry in os.scandir(self._dialog_dir)
                if _DAY_FILE.fullmatch(entry.name)
            )
        except OSError as exc:
            raise PersistenceError(
                f"cannot list dialog directory {str(self._dialog_dir)!r}: {exc}"
            ) from exc

    def _make_dir(self) -> None:
        if self._dialog_dir.is_dir():
            return
        try:
            self._dialog_dir.mkdir(parents=True, exist_ok=True)
            _fsync_dir(self._dialog_dir.parent)
        except OSError as exc:
            raise PersistenceError(
                f"cannot create dialog directory {str(self._dialog_dir)!r}: {exc}"
            ) from exc

    @contextmanager
    def _flock(self, *, exclusive: bool) -> Iterator[None]:
        """Hold ``dialog/.lock``. Writers must get it; a reader goes on without it if it can't
        be opened (read-only directory). No-op on Windows."""
        if sys.platform == "win32":
            yield
            return
        path = self._dialog_dir / _LOCK_NAME
        fd: int | None = None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except OSError as exc:
            if fd is not None:
                os.close(fd)
                fd = None
            if exclusive:
                raise PersistenceError(f"cannot lock {str(path)!r}: {exc}") from exc
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)
