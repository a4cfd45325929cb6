"""The `read_file` tool: the agent's way back to every byte moved out of its context.

`read_file(file_path, start_line=1, line_offset=0)` returns the file from that position, cut
by the same rule as tool output (`excerpt_with_notice`), with a notice pointing to the next
position. It reads only below the configured roots, streams large files instead of loading
them, and answers bad input with an error text, never an exception.
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import Sequence
from pathlib import Path

from agentscope.message import TextBlock
from agentscope.tool import ToolResponse

from ._tool_results import ToolResultPolicy
from ._truncation import Position, excerpt_with_notice

__all__ = ["FileReader", "ReadFileError"]

_CHUNK = 1 << 20


class ReadFileError(Exception):
    """A `read_file` call that cannot be answered; its message is shown to the agent."""


def _as_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool):
        raise ReadFileError(f"{name} must be an integer; got {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if not isinstance(value, int):
        raise ReadFileError(f"{name} must be an integer; got {value!r}")
    if value < minimum:
        raise ReadFileError(f"{name} must be >= {minimum}; got {value}")
    return value


class FileReader:
    """Reads text files below `roots` in excerpts."""

    def __init__(self, roots: Sequence[Path], policy: ToolResultPolicy) -> None:
        self.roots = [Path(root).expanduser().resolve() for root in roots]
        self.policy = policy

    def resolve(self, file_path: str) -> Path:
        """The real path of `file_path`; relative paths are tried against each root in order.

        Raises:
            ReadFileError: outside every root (after following symlinks), or missing.
        """
        if not isinstance(file_path, str) or not file_path.strip():
            raise ReadFileError(f"file_path must be a non-empty string; got {file_path!r}")
        if "\0" in file_path:
            raise ReadFileError(f"file_path must not contain a NUL character; got {file_path!r}")
        try:
            given = Path(file_path).expanduser()
        except RuntimeError:  # "~user" of an unknown user
            given = Path(file_path)
        candidates = [given] if given.is_absolute() else [root / given for root in self.roots]
        inside_any = False
        for candidate in candidates:
            try:
                real = candidate.resolve()  # follows symlinks and "..": the check is on the target
                if any(real.is_relative_to(root) for root in self.roots):
                    inside_any = True
                    if real.exists():
                        return real
            except (OSError, ValueError) as exc:  # name too long, symlink loop, ...
                why = getattr(exc, "strerror", None) or exc
                raise ReadFileError(f"{file_path[:200]!r} cannot be resolved: {why}") from None
        if not inside_any:
            roots = ", ".join(str(root) for root in self.roots)
            raise ReadFileError(f"{file_path!r} is outside the readable roots ({roots})")
        raise ReadFileError(f"{file_path!r} does not exist")

    async def read_file(
        self,
        file_path: str,
        start_line: int = 1,
        line_offset: int = 0,
    ) -> ToolResponse:
        """Read a text file from a line on. Long content is cut, and a notice at the end says
        how to continue: call this tool again with the `start_line` (and `line_offset`) it
        gives. Use it to read files and the full tool outputs saved under tool_result/.

        Args:
            file_path (str): path of the file (absolute, or relative to the working directory).
            start_line (int): first line to read, counting from 1.
            line_offset (int): characters to skip in the first line (for very long lines).
        """
        try:
            start = Position(
                _as_int("start_line", start_line, 1), _as_int("line_offset", line_offset, 0)
            )
            path = self.resolve(file_path)
            max_bytes = self.policy.limits("read_file", {"file_path": str(path)}).recent
            text = await asyncio.to_thread(self._read, path, start, max_bytes)
        except ReadFileError as exc:
            text = f"Error: {exc}"
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    def _read(self, path: Path, start: Position, max_bytes: int) -> str:
        if path.is_dir():
            raise ReadFileError(f"{str(path)!r} is a directory, not a file")
        try:
            with open(path, "rb") as file:
                head = file.read(8192)
                if b"\0" in head:
                    raise ReadFileError(f"{str(path)!r} is a binary file; it cannot be shown")
                file.seek(0)
                lines, line_at = _scan(file, start.line)
                if lines == 0:
                    return f"({str(path)!r} is empty)"
                if line_at is None:
                    raise ReadFileError(
                        f"start_line={start.line} is past the end of {str(path)!r} ({lines} lines)"
                    )
                file.seek(line_at)
                want = 4 * start.offset + max_bytes + 8
                window = file.read(want)
                at_eof = len(window) < want or not file.read(1)
        except OSError as exc:
            raise ReadFileError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
        try:
            decoded = codecs.getincrementaldecoder("utf-8")().decode(window, final=at_eof)
        except UnicodeDecodeError:
            raise ReadFileError(f"{str(path)!r} is not UTF-8 text; it cannot be shown") from None
        line_end = decoded.find("\n")
        line_len = line_end if line_end >= 0 else len(decoded)
        if start.offset > line_len:
            raise ReadFileError(
                f"line_offset={start.offset} is past the end of line {start.line} "
                f"({line_len} characters)"
            )
        rest = decoded[start.offset :]
        # When the window stops short of the end, `rest` is over `max_bytes` and the cut
        # depends only on its first `max_bytes` bytes: the same excerpt as the whole rest.
        return excerpt_with_notice(
            rest, max_bytes=max_bytes, file_path=str(path), start=start, source_lines=lines
        )


def _scan(file: object, start_line: int) -> tuple[int, int | None]:
    """Count the lines of a binary file and find the byte offset where `start_line` begins."""
    read = file.read  # type: ignore[attr-defined]
    lines_done = 0  # complete lines ("\n"-terminated) seen so far
    offset = 0
    line_at = 0 if start_line == 1 else None
    last = b"\n"
    while chunk := read(_CHUNK):
        if line_at is None:
            need = start_line - 1 - lines_done  # newlines still to pass
            count = chunk.count(b"\n")
            if count >= need:
                at = -1
                for _ in range(need):
                    at = chunk.index(b"\n", at + 1)
                line_at = offset + at + 1
        lines_done += chunk.count(b"\n")
        offset += len(chunk)
        last = chunk[-1:]
    lines = lines_done + (0 if last == b"\n" else 1)
    if line_at is not None and line_at >= offset and lines_done < start_line:
        line_at = None  # the line after the final "\n" does not exist
    if offset == 0:
        return 0, None
    return lines, line_at
