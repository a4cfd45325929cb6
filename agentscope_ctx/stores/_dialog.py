"""`DialogStore`: every message that left the agent's context, kept on disk.

Layout: ``{working_dir}/dialog/YYYY-MM-DD.jsonl``, UTF-8, ``\\n`` line ends, one record per
line (the record format is defined in `agentscope_ctx._dialog_record`).

Which file: a message goes to the file of its own date (the date part of ``Msg.timestamp``,
today's local date when the timestamp is missing or unparseable), **but never to a file older
than the newest one already in the store**. So the files, oldest day first and each from top to
bottom, hold the messages in the order they were appended, which is the order `read` returns,
and an agent reading ``dialog/`` from the newest end backwards meets the newest message first,
even when the clock went back across midnight (message A stamped day 2 00:00:05 is stored, then
B stamped day 1 23:59:59: B goes to day 2's file, after A; its record keeps its own timestamp).
The price: after a clock jump into the future, later messages go to that future day's file
until the clock catches up. Files written before this rule are read as they are.

Guarantees of `DialogStore.append`: the records are written and ``fsync``-ed (with the directory
when a file is created) before it returns, and a message whose ``id`` is already stored *for
the same owner* (the record's ``agent`` and ``session``) is not written again: two agents
given one message object (a 1.x ``MsgHub`` broadcast) keep a copy each. On POSIX, an
exclusive ``flock`` on ``dialog/.lock`` serializes writers across
processes sharing one ``working_dir``; readers take it shared. A line that does not parse (a
torn write, a hand edit) is skipped and reported by the reader, never fatal; a writer first ends
such a fragment with ``\\n`` so new records stay whole.

The directory is ``0700`` and its files ``0600`` (`agentscope_ctx._private`). Nothing outside
``dialog/`` is ever written or read through it: the store refuses a ``dialog`` that is a
symbolic link, and opens the day files and ``.lock`` relative to the directory with
``O_NOFOLLOW`` and only when they are regular files. Appending to a refused file raises a
`PersistenceError` naming it; a reader skips it and reports it (line 0).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date
from pathlib import Path

from ..core._entry import Msg
from ..core._errors import ContextUsageError, PersistenceError
from ..core._private import FILE_MODE, private_dir
from ..core._seams import DialogReadReport
from ._dialog_dir import DialogDir, append_file, refused_reason
from ._dialog_record import date_prefix, decode_owned, encode_record
from ._keys_local import make_dialog_dir

if sys.platform != "win32":
    import fcntl

__all__ = ["DialogReadReport", "DialogStore", "append_notifying"]

logger = logging.getLogger("agentscope_ctx")


async def append_notifying(
    write: Callable[[list[Msg]], int],
    msgs: Sequence[Msg],
    on_append: Callable[[], None] | None,
) -> int:
    """A dialog store's `append`: `write` (its blocking append; the number written) run off
    the event loop, then `on_append` when anything was written. The append is durable by
    then, so a failing listener (the search index) is logged, never raised.

    Raises:
        PersistenceError: what `write` raises (appending again is safe).
    """
    if not msgs:
        return 0
    written = await asyncio.to_thread(write, list(msgs))
    if written and on_append is not None:
        try:
            await asyncio.to_thread(on_append)
        except Exception:  # a listener (the search index) never fails a durable append
            logger.exception("agentscope_ctx: the dialog append listener failed")
    return written


_DAY_FILE = re.compile(r"\d{4}-\d{2}-\d{2}\.jsonl")
_LOCK_NAME = ".lock"


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
            on_append: Called (in a worker thread, the lock released) after records were
                written; what it raises is logged, never passed on.
        """
        self._dialog_dir = Path(working_dir) / "dialog"
        self._fields = dict(record_fields or {})
        self._on_append = on_append
        self._lock = threading.Lock()
        self._owner = (self._fields.get("agent", ""), self._fields.get("session", ""))
        self._ids: set[tuple[str, str, str]] = set()  # (agent, session, id) in the files
        self._scanned: dict[str, tuple[int, int]] = {}  # file name -> (inode, bytes scanned)

    @property
    def dialog_dir(self) -> Path:
        """The directory holding the ``YYYY-MM-DD.jsonl`` files."""
        return self._dialog_dir

    async def append(self, msgs: Sequence[Msg]) -> int:
        """Append messages durably, skipping those whose id is already stored.

        When this returns, the new records are on disk (fsync-ed), so the caller may drop the
        messages from memory. If it raises, some of them may already be stored; appending the
        same messages again is safe, as stored ids are skipped. A message with values JSON
        cannot hold is stored with them rendered as strings (see `_dialog_record`) and logged
        once, at WARNING. The file I/O runs in a thread.

        Args:
            msgs: The messages, in order; a repeated id within the batch is written once.

        Returns:
            How many messages were newly written.

        Raises:
            PersistenceError: A message id is not a string, or the directory, the lock or a
                file cannot be created or written, or is a symbolic link or not a regular file
                (names the path and the cause).
        """
        return await append_notifying(self._append_sync, msgs, self._on_append)

    def read(
        self, day: str | None = None, *, session: str | None = None
    ) -> tuple[list[Msg], DialogReadReport]:
        """Read the stored messages, oldest day first, in file order (the append order).

        Lines that are not valid records (torn, corrupt) are skipped and listed in the report,
        and so are day files that are not regular files (line 0).

        Args:
            day: ``"YYYY-MM-DD"`` to read one day only; ``None`` reads every day.
            session: only the records of this session (``""``: those without one); ``None``:
                every record.

        Returns:
            The messages and a report; both empty when nothing is stored.

        Raises:
            ContextUsageError: `day` is not a ``YYYY-MM-DD`` date.
            PersistenceError: The directory or a file exists but cannot be read, or ``dialog``
                is a symbolic link.
        """
        if day is not None and date_prefix(day) != day:
            raise ContextUsageError(f"day must be a date 'YYYY-MM-DD', got {day!r}")
        msgs: list[Msg] = []
        report = DialogReadReport()
        with self._open(create=False) as folder:
            if folder is None:
                return msgs, report
            with self._flock(folder, exclusive=False):
                names, refused = self._day_files(folder)
                for name in sorted({*names, *refused}):
                    if day is not None and name != f"{day}.jsonl":
                        continue
                    if name in refused:
                        report.bad_lines.append((name, 0, refused[name]))
                        continue
                    report.files.append(name)
                    for number, raw in self._lines(folder, name):
                        blank = not raw.strip()
                        msg, _, owner = (None, "", "") if blank else decode_owned(raw)
                        if isinstance(msg, Msg):
                            if session is None or owner == session:
                                msgs.append(msg)
                        elif msg is not None:
                            torn = "" if raw.endswith(b"\n") else "torn last line: "
                            report.bad_lines.append((name, number, f"{torn}{msg}"[:200]))
        report.messages = len(msgs)
        return msgs, report

    async def aread(self, day: str | None = None) -> tuple[list[Msg], DialogReadReport]:
        """`read`, run in a thread so that a large store does not block the event loop."""
        return await asyncio.to_thread(self.read, day)

    def days(self) -> list[str]:
        """The days (``"YYYY-MM-DD"``, sorted) that have a dialog file (a regular file)."""
        with self._open(create=False) as folder:
            if folder is None:
                return []
            return [name.removesuffix(".jsonl") for name in self._day_files(folder)[0]]

    def ids(self) -> set[str]:
        """The ids of every stored message (a copy)."""
        with self._lock, self._open(create=False) as folder:
            if folder is None:
                return set()
            with self._flock(folder, exclusive=False):
                self._rescan(folder)
            return {msg_id for _, _, msg_id in self._ids}

    # -- internals -------------------------------------------------------------------------

    def _append_sync(self, msgs: list[Msg]) -> int:
        today = date.today().isoformat()
        records = [
            (msg, date_prefix(msg.timestamp) or today, *encode_record(msg, self._fields))
            for msg in msgs
        ]
        with self._lock, self._created() as folder, self._flock(folder, exclusive=True):
            names = self._rescan(folder)
            newest = names[-1].removesuffix(".jsonl") if names else ""
            by_day: dict[str, list[tuple[Msg, bytes, list[str]]]] = {}
            batch: set[str] = set()
            for msg, own_day, line, lossy in records:
                if (*self._owner, msg.id) in self._ids or msg.id in batch:
                    continue
                batch.add(msg.id)
                newest = max(newest, own_day)  # never a file older than the newest
                by_day.setdefault(newest, []).append((msg, line, lossy))
            written = 0
            for day in sorted(by_day):
                name, entries = f"{day}.jsonl", by_day[day]
                before = self._scanned.get(name)
                inode, size = append_file(folder, name, b"".join(b for _, b, _ in entries))
                self._ids.update((*self._owner, m.id) for m, _, _ in entries)
                if before is None or before[0] == inode:  # else the next rescan redoes it
                    self._scanned[name] = (inode, size)
                written += len(entries)
                for msg, _, lossy in entries:
                    if lossy:
                        logger.warning(
                            "agentscope_ctx: message %r stored in %s with values changed to "
                            "make it storable (listed in its record's 'lossy'): %s",
                            msg.id, name, ", ".join(lossy[:10]),
                        )  # fmt: skip
        return written

    def _rescan(self, folder: DialogDir) -> list[str]:
        """Bring `_ids` up to date with the files; reads only bytes added since the last scan.

        The caller holds the flock, so no writer is mid-line. Returns the day files, sorted.
        """
        names = self._day_files(folder)[0]
        try:
            stats = {name: folder.stat(name) for name in names}
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
                with os.fdopen(folder.open(name, os.O_RDONLY), "rb") as file:
                    file.seek(offset)
                    for raw in file:
                        msg, agent, session = decode_owned(raw) if raw.strip() else ("", "", "")
                        if isinstance(msg, Msg):
                            self._ids.add((agent, session, msg.id))
                    self._scanned[name] = (stat.st_ino, file.tell())
        except OSError as exc:
            raise PersistenceError(
                f"cannot scan dialog files in {str(self._dialog_dir)!r}: {exc}"
            ) from exc
        return names

    def _lines(self, folder: DialogDir, name: str) -> Iterator[tuple[int, bytes]]:
        try:
            with os.fdopen(folder.open(name, os.O_RDONLY), "rb") as file:
                yield from enumerate(file, start=1)
        except OSError as exc:
            path = str(self._dialog_dir / name)
            raise PersistenceError(f"cannot read dialog file {path!r}: {exc}") from exc

    def _day_files(self, folder: DialogDir) -> tuple[list[str], dict[str, str]]:
        """The regular day files, sorted, and the refused ones with the reason."""
        try:
            names, refused = [], {}
            for entry in folder.scan():
                if not _DAY_FILE.fullmatch(entry.name):
                    continue
                reason = refused_reason(entry)
                if reason is None:
                    names.append(entry.name)
                else:
                    refused[entry.name] = f"{reason}: not read"
            return sorted(names), refused
        except OSError as exc:
            raise PersistenceError(
                f"cannot list dialog directory {str(self._dialog_dir)!r}: {exc}"
            ) from exc

    @contextmanager
    def _open(self, *, create: bool) -> Iterator[DialogDir | None]:
        """The dialog directory, or None when it does not exist and `create` is false."""
        if not os.path.lexists(self._dialog_dir):
            if not create:
                yield None
                return
            try:
                make_dialog_dir(self._dialog_dir)  # holding its format record (`_keys_local`)
                DialogDir.fsync_path(self._dialog_dir.parent)
            except OSError as exc:
                raise PersistenceError(
                    f"cannot create dialog directory {str(self._dialog_dir)!r}: {exc}"
                ) from exc
        elif create:
            private_dir(self._dialog_dir)  # tightens one an older version left readable
        folder = DialogDir(self._dialog_dir)
        try:
            yield folder
        finally:
            folder.close()

    @contextmanager
    def _created(self) -> Iterator[DialogDir]:
        """The dialog directory, created when missing."""
        with self._open(create=True) as folder:
            if folder is None:  # pragma: no cover - `create` always gives one
                raise PersistenceError(f"no dialog directory {str(self._dialog_dir)!r}")
            yield folder

    @contextmanager
    def _flock(self, folder: DialogDir, *, exclusive: bool) -> Iterator[None]:
        """Hold ``dialog/.lock``. Writers must get it; a reader goes on without it if it can't
        be opened (read-only directory, not a regular file). No-op on Windows."""
        if sys.platform == "win32":
            yield
            return
        fd: int | None = None
        try:
            fd = folder.open(_LOCK_NAME, os.O_RDONLY | os.O_CREAT, FILE_MODE)
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        except (OSError, PersistenceError) as exc:
            if fd is not None:
                os.close(fd)
                fd = None
            if exclusive:
                path = str(self._dialog_dir / _LOCK_NAME)
                raise PersistenceError(f"cannot lock {path!r}: {exc}") from exc
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)
