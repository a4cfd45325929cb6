"""Where a (line, character) position of a text file begins, without reading the file whole
at every `read_file` call.

Counting lines takes one pass over a file. The pass is made once per file version and kept in
a bounded cache keyed by the file's identity (device, inode, size, mtime and ctime in ns), as a
sparse index: the byte offset and the number of newlines before it at the start of every
1 MB read. Holes of sparse files hold only NUL bytes, hence no newline: the pass skips them
(``SEEK_DATA``) where the platform can. The index also remembers the byte offset of the
positions its excerpts ended at, so a continuation read costs only its excerpt, even inside a
line of several GB.

Nothing here allocates by the numbers an agent passes: a line number or a character offset of
10**12 costs a bounded scan (or none), never a buffer of that size.
"""

from __future__ import annotations

import codecs
import errno
import os
import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass, field
from io import FileIO

from ..core.truncation._truncation import Position, utf8_len

__all__ = ["CHUNK", "ByteSource", "LineEndError", "LineIndex", "LineIndexCache"]

CHUNK = 1 << 20
"""Bytes per read, and the spacing of the sparse index."""
_HEAD = 8192  # a NUL in the first bytes marks a binary file
_MAX_MARKS = 256  # remembered positions per file
_SEEK_DATA = getattr(os, "SEEK_DATA", None)

FileIdentity = tuple[int, int, int, int, int]


def identity(stat: os.stat_result) -> FileIdentity:
    """The key of a file version: it changes whenever the content may have."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


class LineEndError(Exception):
    """A character offset past the end of its line; `length` is the line's length."""

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.length = length


class ByteSource:
    """An open file read at explicit offsets; `bytes_read` counts what was read."""

    def __init__(self, file: FileIO) -> None:
        self.file = file
        self.bytes_read = 0

    def read(self, at: int, size: int) -> bytes:
        """Up to `size` bytes from offset `at` (fewer at the end of the file)."""
        self.file.seek(at)
        data = self.file.read(size) or b""
        self.bytes_read += len(data)
        return data

    def readinto(self, at: int, buffer: bytearray) -> int:
        """Fill `buffer` from offset `at`; returns the number of bytes read."""
        self.file.seek(at)
        n = self.file.readinto(buffer) or 0
        self.bytes_read += n
        return n

    def next_data(self, at: int, size: int) -> int:
        """The offset of the first byte at or after `at` that is not in a hole (`size` when
        the rest is a hole; `at` where the platform cannot tell)."""
        if _SEEK_DATA is None:
            return at
        try:
            return os.lseek(self.file.fileno(), at, _SEEK_DATA)
        except OSError as exc:  # ENXIO: no data from `at` on; anything else: cannot tell
            return size if exc.errno == errno.ENXIO and at < size else at


def _nth_newline(data: bytes | bytearray, n: int, end: int) -> int:
    """Index of the `n`-th ``"\\n"`` (from 1) in `data[:end]`, which holds at least `n`."""
    lo, hi = 0, end  # the smallest prefix length holding n newlines
    while lo < hi:
        mid = (lo + hi) // 2
        if data.count(b"\n", 0, mid) >= n:
            hi = mid
        else:
            lo = mid + 1
    return lo - 1


@dataclass
class LineIndex:
    """Lines of one file version, a sparse index of their byte offsets, and remembered
    positions."""

    lines: int
    """Number of lines (a last line without ``"\\n"`` counts); 0 for an empty file."""
    binary: bool
    """Whether the first 8 KB hold a NUL byte."""
    starts: array[int]
    """Byte offsets where the pass read a chunk, ascending."""
    before: array[int]
    """Newlines before each of `starts`."""
    marks: OrderedDict[Position, int] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, source: ByteSource, size: int) -> LineIndex:
        """One pass over the file (`size` is its size when opened; a file that grows meanwhile
        is read to its end)."""
        starts, before = array("q"), array("q")
        buffer = bytearray(CHUNK)
        at = newlines = 0
        last = b"\n"
        binary = False
        while True:
            data_at = source.next_data(at, size)
            if data_at > at:  # a hole: NULs, no newline
                binary = binary or at < _HEAD
                at, last = data_at, b"\0"
            n = source.readinto(at, buffer)
            if n == 0:
                break
            if at < _HEAD and b"\0" in buffer[: min(n, _HEAD - at)]:
                binary = True
            starts.append(at)
            before.append(newlines)
            newlines += buffer.count(b"\n", 0, n)
            last = bytes(buffer[n - 1 : n])
            at += n
        lines = newlines + (0 if at == 0 or last == b"\n" else 1)
        return cls(lines, binary, starts, before)

    def line_start(self, source: ByteSource, line: int) -> int:
        """Byte offset where `line` (1..`lines`) begins.

        Raises:
            EOFError: the file lost lines since it was indexed.
        """
        if line <= 1:
            return 0
        passed = line - 1  # newlines before the line
        i = bisect_left(self.before, passed) - 1  # the last chunk starting before that newline
        at, need = self.starts[i], passed - self.before[i]
        while data := source.read(at, CHUNK):  # one chunk, unless the file changed meanwhile
            count = data.count(b"\n")
            if count >= need:
                return at + _nth_newline(data, need, len(data)) + 1
            need -= count
            at += len(data)
        raise EOFError("the file has fewer lines than when it was indexed")

    def locate(self, source: ByteSource, position: Position) -> int:
        """Byte offset of `position`.

        Raises:
            LineEndError: `position.offset` is past the end of its line.
            UnicodeDecodeError: the line is not UTF-8 up to there.
            EOFError: the file lost lines since it was indexed.
        """
        with self.lock:
            known = self.marks.get(position)
            if known is not None:
                return known
            near = [
                (known_at.offset, at)
                for known_at, at in self.marks.items()
                if known_at.line == position.line and known_at.offset <= position.offset
            ]
        offset, at = max(near) if near else (0, self.line_start(source, position.line))
        try:
            return skip_chars(source, at, position.offset - offset)
        except LineEndError as exc:
            raise LineEndError(offset + exc.length) from None

    def remember(self, position: Position, at: int) -> None:
        """Keep the byte offset of `position` (where an excerpt ended) for the next call."""
        with self.lock:
            self.marks[position] = at
            self.marks.move_to_end(position)
            while len(self.marks) > _MAX_MARKS:
                self.marks.popitem(last=False)


def skip_chars(source: ByteSource, at: int, count: int) -> int:
    """Byte offset `count` characters after `at`, within the line `at` is in.

    Raises:
        LineEndError: the line (or the file) ends first; `length` counts from `at`.
        UnicodeDecodeError: the bytes are not UTF-8.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    done = 0  # characters passed
    read_at = at
    while done < count:
        data = source.read(read_at, CHUNK)
        read_at += len(data)
        text = decoder.decode(data, final=not data)
        need = count - done
        newline = text.find("\n", 0, need)
        if newline >= 0:
            raise LineEndError(done + newline)
        if len(text) >= need:
            return at + utf8_len(text[:need])
        if not data:
            raise LineEndError(done + len(text))
        done += len(text)
        at += utf8_len(text)
    return at


class LineIndexCache:
    """Line indexes of the files read recently, at most `max_files` of them."""

    def __init__(self, max_files: int = 32) -> None:
        self.max_files = max_files
        self._entries: OrderedDict[FileIdentity, LineIndex] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, source: ByteSource, stat: os.stat_result) -> LineIndex:
        """The index of the file `source` reads, `stat` being its `fstat` when opened."""
        key = identity(stat)
        with self._lock:
            index = self._entries.get(key)
            if index is not None:
                self._entries.move_to_end(key)
                return index
        index = LineIndex.build(source, stat.st_size)
        if identity(os.fstat(source.file.fileno())) == key:  # unchanged while indexed
            with self._lock:
                self._entries[key] = index
                while len(self._entries) > self.max_files:
                    self._entries.popitem(last=False)
        return index
