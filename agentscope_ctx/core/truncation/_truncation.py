"""The truncation core: cut a text to a byte budget and say, in a notice, where the rest is.

Pure functions on `str`; no I/O. The notice wording is the public contract of DESIGN.md §4.

Positions are 1-based line numbers plus a character offset into the line. A line ends at
``"\\n"`` and keeps it (``"\\r\\n"`` lines keep their ``"\\r"``); nothing else breaks a line.
Following the notices from the first excerpt (``read_file(file_path, start_line, line_offset)``)
concatenates back to the original text exactly.

An output is rendered as ``excerpt + "\\n" + notice``. A notice counts only at the very end of
a text, in the exact form, and only when its numbers agree with the excerpt before it
(`n_bytes` equals the excerpt's UTF-8 size and the continuation position follows from the
start position and the excerpt). Anything else, a marker inside a log for instance, is content.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = [
    "TRUNCATION_NOTICE_MARKER",
    "Notice",
    "Position",
    "advance",
    "excerpt_with_notice",
    "head",
    "notice_paths",
    "parse_notice",
    "render_notice",
    "retruncate",
    "total_lines",
    "utf8_len",
]

TRUNCATION_NOTICE_MARKER = "<<<TRUNCATED>>>"
"""The first line of every truncation notice."""

_MIN_EXCERPT_BYTES = 4  # one character of any size always fits: an excerpt always moves on

_NOTICE_RE = re.compile(
    r"\n<<<TRUNCATED>>>\n"
    r"The output above was truncated\.\n"
    r"The full content is saved to the file and contains (?P<total>\d+) lines in total\.\n"
    r"This excerpt starts at line (?P<line>\d+)(?:, character (?P<offset>\d+),)?"
    r" and covers the next (?P<n_bytes>\d+) bytes\.\n"
    r"If the current content is not enough, call `read_file` with file_path=(?P<path>[^\n]+)"
    r" start_line=(?P<next_line>\d+)(?: line_offset=(?P<next_offset>\d+))? to read more\."
)


@dataclass(frozen=True, order=True)
class Position:
    """A place in a text: `line` counts from 1, `offset` is characters into that line."""

    line: int = 1
    offset: int = 0


@dataclass(frozen=True)
class Notice:
    """The machine-readable part of a truncation notice."""

    total_lines: int
    """Lines of the whole source (the saved file, or the file that was read)."""
    start: Position
    """Where the excerpt begins in the source."""
    n_bytes: int
    """UTF-8 size of the excerpt shown."""
    file_path: str
    """The file holding the full content; never changes across truncations."""
    next: Position
    """Where the continuation begins: the position right after the excerpt."""


def utf8_len(text: str) -> int:
    """UTF-8 size of `text` (O(1) for ASCII text)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def total_lines(text: str) -> int:
    """Number of lines: a final line without ``"\\n"`` counts; the empty text has none."""
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


def advance(start: Position, excerpt: str) -> Position:
    """The position right after `excerpt`, if it begins at `start`."""
    newlines = excerpt.count("\n")
    if newlines == 0:
        return Position(start.line, start.offset + len(excerpt))
    return Position(start.line + newlines, len(excerpt) - excerpt.rfind("\n") - 1)


def render_notice(notice: Notice) -> str:
    """The notice text (without the ``"\\n"`` that separates it from the excerpt)."""
    start = notice.start
    where = f"line {start.line}" + (f", character {start.offset}," if start.offset else "")
    hint = f"file_path={notice.file_path} start_line={notice.next.line}"
    if notice.next.offset:
        hint += f" line_offset={notice.next.offset}"
    return (
        f"{TRUNCATION_NOTICE_MARKER}\n"
        "The output above was truncated.\n"
        f"The full content is saved to the file and contains {notice.total_lines} lines"
        " in total.\n"
        f"This excerpt starts at {where} and covers the next {notice.n_bytes} bytes.\n"
        f"If the current content is not enough, call `read_file` with {hint} to read more."
    )


def parse_notice(text: str) -> tuple[str, Notice] | None:
    """Split a truncated output into its excerpt and notice.

    Returns `None` when `text` does not end with a genuine notice (see the module docstring).
    """
    at = text.rfind("\n" + TRUNCATION_NOTICE_MARKER + "\n")
    if at < 0:
        return None
    match = _NOTICE_RE.fullmatch(text, at)
    if match is None:
        return None
    excerpt = text[:at]
    start = Position(int(match["line"]), int(match["offset"] or 0))
    notice = Notice(
        total_lines=int(match["total"]),
        start=start,
        n_bytes=int(match["n_bytes"]),
        file_path=match["path"],
        next=Position(int(match["next_line"]), int(match["next_offset"] or 0)),
    )
    genuine = (
        start.line >= 1
        and notice.n_bytes >= 1
        and notice.n_bytes == utf8_len(excerpt)
        and notice.next == advance(start, excerpt)
        and notice.next.line <= notice.total_lines
    )
    return (excerpt, notice) if genuine else None


def notice_paths(value: object) -> Iterator[str]:
    """The `file_path` of every notice ending a string anywhere in `value` (a message's
    content: strings, blocks, tool outputs and arguments, nested)."""
    if isinstance(value, str):
        parsed = parse_notice(value) if TRUNCATION_NOTICE_MARKER in value else None
        if parsed is not None:
            yield parsed[1].file_path
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from notice_paths(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from notice_paths(item)


def head(text: str, max_bytes: int) -> str:
    """The longest prefix of whole lines within `max_bytes` (whole characters when the first
    line alone is longer); never empty for a non-empty text."""
    return _cut(text, max_bytes)


def _cut(text: str, budget: int) -> str:
    """The longest prefix of `text` made of whole lines within `budget` bytes; when the first
    line alone is over budget, the longest prefix of it, by whole characters. Never empty
    for a non-empty text."""
    head = text[:budget]  # a character is at least one byte
    raw = head.encode("utf-8")
    if len(raw) > budget:
        head = raw[:budget].decode("utf-8", errors="ignore")  # drops only a split last char
    end = head.rfind("\n")
    if end >= 0:
        return head[: end + 1]
    return head or text[:1]


def _excerpt_budget(max_bytes: int, widest: Notice) -> int:
    reserve = utf8_len(render_notice(widest)) + 1  # +1 for the separating "\n"
    return max(max_bytes - reserve, _MIN_EXCERPT_BYTES)


def excerpt_with_notice(
    text: str,
    *,
    max_bytes: int,
    file_path: str,
    start: Position = Position(),
    source_lines: int | None = None,
) -> str:
    """First truncation: `text` itself when it fits in `max_bytes`, else an excerpt and a notice.

    Args:
        text: the content from `start` to the end of the source.
        max_bytes: UTF-8 budget of the whole output, excerpt and notice together (the excerpt
            alone may exceed it only when `max_bytes` is too small for the notice itself).
        file_path: where the full source is saved; the notice points there.
        start: where `text` begins in the source.
        source_lines: lines of the whole source; defaults to `total_lines(text)` (right when
            `start` is the beginning).
    """
    if max_bytes < _MIN_EXCERPT_BYTES:
        raise ValueError(f"max_bytes must be at least {_MIN_EXCERPT_BYTES}; got {max_bytes!r}")
    size = utf8_len(text)
    # A text that ends like a notice would be mistaken for one: it is cut so that it cannot be.
    if size <= max_bytes and parse_notice(text) is None:
        return text
    lines = total_lines(text) if source_lines is None else source_lines
    widest = Notice(
        total_lines=lines,
        start=start,
        n_bytes=max_bytes,
        file_path=file_path,
        next=Position(max(lines, start.line), start.offset + len(text) + 1),
    )
    budget = min(_excerpt_budget(max_bytes, widest), size - 1)
    excerpt = _cut(text, max(budget, 1))
    notice = Notice(lines, start, utf8_len(excerpt), file_path, advance(start, excerpt))
    return excerpt + "\n" + render_notice(notice)


def retruncate(text: str, *, max_bytes: int) -> str:
    """Second truncation: cut the excerpt of a truncated output harder to fit `max_bytes`.

    The start position and `file_path` stay; `n_bytes` and the continuation are updated, so
    the chain from the shorter excerpt is still lossless. A text without a genuine notice, or
    one that already fits, is returned unchanged.
    """
    if max_bytes < _MIN_EXCERPT_BYTES:
        raise ValueError(f"max_bytes must be at least {_MIN_EXCERPT_BYTES}; got {max_bytes!r}")
    if utf8_len(text) <= max_bytes:
        return text
    parsed = parse_notice(text)
    if parsed is None:
        return text
    excerpt, old = parsed
    budget = _excerpt_budget(max_bytes, old)
    if budget >= old.n_bytes:
        return text
    shorter = _cut(excerpt, budget)
    notice = Notice(
        old.total_lines, old.start, utf8_len(shorter), old.file_path, advance(old.start, shorter)
    )
    return shorter + "\n" + render_notice(notice)
