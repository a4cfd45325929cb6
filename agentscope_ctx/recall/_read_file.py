"""The `read_file` tool: the agent's way back to every byte moved out of its context.

`read_file(file_path, start_line=1, line_offset=0)` returns the file from that position, cut
by the same rule as tool output (`excerpt_with_notice`), with a notice pointing to the next
position. It answers bad input with an error text that says what went wrong, never an
exception.

What it reads, and how it makes sure (DESIGN.md §12):

- Only regular files below the configured roots. The name is resolved first (symlinks that
  stay inside the roots are followed), then opened component by component from the root with
  ``O_NOFOLLOW`` (``dir_fd=``): a symlink swapped in after the check is refused, not followed.
  What was opened is then checked by ``fstat`` (and, on Linux, by its ``/proc/self/fd`` path).
- Never anything that can block: the file is opened with ``O_NONBLOCK`` and refused unless
  ``fstat`` says it is a regular file (a FIFO, socket or device is refused).
- No hard link (``st_nlink > 1``): it may be a second name of a file outside the roots, and
  nothing tells which name is the original. The files of the package's own ``tool_result/``
  store are written under a temporary name and renamed, so they always have one link; a store
  file with more links was linked by someone else, and is refused like any other.
- The ``tool_result/`` store (`store_dir`) is always readable, whatever the roots: every notice
  points there. Its files are the package's own saved outputs, text by construction, so a NUL
  byte never makes them "binary"; other files with a NUL in their first 8 KB are refused.
- Line counts are cached per file version (`LineIndexCache`): a continuation read of a huge
  file costs its excerpt, not a pass over the file.
- A store that is not files (the fleet's PostgreSQL: ``pg-output:<id>`` for a saved output,
  ``pg-dialog:YYYY-MM-DD`` for a day of the dialog) is read through its seam (`sources`):
  the same cut and notice (`stores.seams.excerpt`), a bounded window of the stored bytes.
- The tenant boundary (DESIGN.md §15): a reader for a tenant (`scoped`, or `_read_scope.CALLER`)
  shows only its records: another tenant's saved output, day or media file reads exactly as
  a missing one, and a local day of the dialog shows only its records (`_read_scope`); the
  package's own bookkeeping in the working dir (``usage/``, ``index/``, ``audit.jsonl``, ...)
  reads as missing to every tenant.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import os
import stat
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agentscope.message import TextBlock
from agentscope.tool import ToolResponse

from ..core._tenant import Tenant
from ..core.ladder._tool_policy import ToolResultPolicy
from ..core.truncation._truncation import Position, excerpt_with_notice, parse_notice
from ..stores._dialog_view import DialogDayView
from ..stores._line_index import ByteSource, LineEndError, LineIndexCache
from ..stores._tombstones import Tombstone, gone_text, read_local
from ..stores._tool_results import name_tags
from ..stores.seams import excerpt
from ._opening import KINDS, PROC_FD, open_below, open_error
from ._read_scope import CALLER, ReadScope

if TYPE_CHECKING:
    from ..stores.factory import Backend
    from ..stores.seams import RangedSource

__all__ = ["FileReader", "ReadFileError"]

logger = logging.getLogger("agentscope_ctx")


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
    """Reads text files below `roots` (and the `store_dir` of saved outputs) in excerpts.

    `bytes_read` counts the bytes read from files so far (for tests and benchmarks).
    """

    def __init__(
        self,
        roots: Sequence[Path],
        policy: ToolResultPolicy,
        *,
        store_dir: Path | None = None,
        index_cache: LineIndexCache | None = None,
        sources: Callable[[str, Tenant | None], RangedSource | None] | None = None,
        scope: ReadScope | None = None,
        tenant: Tenant | None = None,
    ) -> None:
        """`sources(ref, tenant)`: the store that reads `ref` when it names no file, as
        `tenant` sees it (`None`: files only); `scope`: where the working dir keeps tenants'
        files; `tenant`: whose records it shows (`None`: the caller's, `CALLER`, else
        everything)."""
        self.roots = [Path(root).expanduser().resolve() for root in roots]
        self.store_dir = None if store_dir is None else Path(store_dir).resolve()
        if self.store_dir is not None and not self._inside(self.store_dir):
            self.roots.append(self.store_dir)
        self.policy = policy
        self.index_cache = index_cache or LineIndexCache()
        self.sources = sources
        self.scope = scope or ReadScope(store_dir=self.store_dir)
        self.tenant = tenant
        self.bytes_read = 0
        self._count_lock = threading.Lock()

    def scoped(self, tenant: Tenant) -> FileReader:
        """This reader for `tenant` (the same roots, stores and line index cache)."""
        reader = FileReader(
            self.roots,
            self.policy,
            store_dir=self.store_dir,
            index_cache=self.index_cache,
            sources=self.sources,
            scope=self.scope,
            tenant=tenant,
        )
        return reader

    @classmethod
    def on_store(
        cls,
        backend: Backend,
        roots: Sequence[Path],
        policy: ToolResultPolicy,
        *,
        working_dir: Path,
    ) -> FileReader:
        """The reader of the agents of `backend`'s store in `working_dir`: files below `roots`,
        the store's saved outputs and its refs that are not files, and each tenant's records
        hidden from the others where the working dir keeps them (`ReadScope`)."""
        local = backend.store_dir is not None
        return cls(
            roots,
            policy,
            store_dir=backend.store_dir,
            sources=backend.source,
            scope=ReadScope(
                store_dir=backend.store_dir,
                dialog_dir=working_dir / "dialog" if local else None,
                media_dir=working_dir / "media",
                working_dir=working_dir,
            ),
        )

    @property
    def caller(self) -> Tenant | None:
        """The tenant this call reads for (`None`: no boundary)."""
        return self.tenant if self.tenant is not None else CALLER.get()

    def _inside(self, path: Path) -> bool:
        return any(path.is_relative_to(root) for root in self.roots)

    def locate(self, file_path: str) -> tuple[Path, Path]:
        """The root and the real path of `file_path`; relative paths are tried against each
        root in order. The real path has no symlink left (at the time of the call).

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
                root = next((root for root in self.roots if real.is_relative_to(root)), None)
                if root is not None:
                    inside_any = True
                    tenant = self.caller
                    if tenant is not None and self.scope.hidden(real, tenant):
                        continue  # another tenant's: as if it were not there
                    if real.exists():
                        return root, real
            except (OSError, ValueError) as exc:  # name too long, symlink loop, ...
                why = getattr(exc, "strerror", None) or exc
                raise ReadFileError(f"{file_path[:200]!r} cannot be resolved: {why}") from None
        if not inside_any:
            roots = ", ".join(str(root) for root in self.roots)
            raise ReadFileError(f"{file_path[:200]!r} is outside the readable roots ({roots})")
        raise ReadFileError(f"{file_path[:200]!r} does not exist")

    async def read_file(
        self,
        file_path: str,
        start_line: int = 1,
        line_offset: int = 0,
    ) -> ToolResponse:
        """Read a text file from `start_line` on. A long read is cut and ends with a notice
        giving the `start_line` (and `line_offset`) to go on from. Full tool outputs are saved
        under tool_result/.

        Args:
            file_path (str): absolute, or relative to the working directory.
            start_line (int): first line, from 1.
            line_offset (int): characters to skip in the first line.
        """
        try:
            text = await self.read_text(file_path, start_line, line_offset)
        except ReadFileError as exc:
            text = f"Error: {exc}"
        except Exception as exc:  # a bug or an exhausted machine: say so, never a bare "Error: "
            logger.warning("agentscope_ctx: read_file(%.200r) failed", file_path, exc_info=True)
            text = f"Error: reading {str(file_path)[:200]!r} failed ({type(exc).__name__}: {exc})"
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    async def read_text(
        self, file_path: str, start_line: object = 1, line_offset: object = 0
    ) -> str:
        """`read_now`, off the event loop."""
        return await asyncio.to_thread(self.read_now, file_path, start_line, line_offset)

    def read_now(
        self,
        file_path: str,
        start_line: object = 1,
        line_offset: object = 0,
        *,
        max_bytes: int | None = None,
    ) -> str:
        """What `read_file` shows (the excerpt, and the notice when there is more), for callers
        that are not the agent (the CLI's ``read``, the session viewer). Blocks on the file or
        the store. `max_bytes`: the excerpt's size (`None`: the policy's, as `read_file`).

        Raises:
            ReadFileError: the call cannot be answered (its message says why).
        """
        start = Position(
            _as_int("start_line", start_line, 1), _as_int("line_offset", line_offset, 0)
        )
        source = self._source(file_path)
        if source is not None:
            return self._read_stored(source, str(file_path).strip(), start, max_bytes)
        try:
            root, real = self.locate(file_path)
        except ReadFileError:
            gone = self._deleted_file(file_path)
            if gone is not None:  # past retention: say so, and when (docs/data.md)
                raise ReadFileError(gone) from None
            raise
        if max_bytes is None:
            max_bytes = self.policy.limits("read_file", {"file_path": str(real)}).recent
        tenant = self.caller
        if tenant is not None and tenant.scope != "shared" and self.scope.is_day(real):
            return self._read_day(file_path, root, real, tenant, start, max_bytes)
        return self._read(root, real, start, max_bytes)

    def _source(self, file_path: object) -> RangedSource | None:
        if self.sources is None or not isinstance(file_path, str):
            return None
        return self.sources(file_path.strip(), self.caller)

    def _read_stored(
        self, source: RangedSource, ref: str, start: Position, max_bytes: int | None
    ) -> str:
        """`ref` of a store that is not files, from `start` (see the module docstring)."""
        if max_bytes is None:
            max_bytes = self.policy.limits("read_file", {"file_path": ref}).recent
        try:
            return excerpt(source, ref, start, max_bytes)
        except KeyError:
            told = getattr(source, "deleted", None)  # a tombstone: deleted by retention
            stone = told(ref) if callable(told) else None
            if isinstance(stone, Tombstone):
                raise ReadFileError(gone_text(ref, stone)) from None
            raise ReadFileError(f"{ref!r} does not exist (or is no longer kept)") from None
        except ValueError as exc:
            raise ReadFileError(str(exc)) from None

    def _deleted_file(self, file_path: object) -> str | None:
        """What a read of a saved output or dialog day that retention deleted answers, told
        only to a tenant who saw it (`stores._tombstones`); `None`: no tombstone."""
        if not isinstance(file_path, str) or "\0" in file_path:
            return None
        try:
            given = Path(file_path.strip()).expanduser()
            bases = [given] if given.is_absolute() else [root / given for root in self.roots]
            for path in bases:
                real = path.parent.resolve() / path.name
                if not self._inside(real):
                    continue
                tenant = self.caller
                stone = read_local(real)
                if stone is None:
                    continue
                own = self.store_dir is not None and real.parent == self.store_dir
                if own and tenant is not None and tenant.scope != "shared":
                    tags = name_tags(real.name)
                    if tags is None or not tenant.sees_tags(*tags):
                        continue
                if not stone.told(tenant):
                    continue
                return gone_text(file_path.strip(), stone)
        except (OSError, ValueError, RuntimeError):
            return None
        return None

    def _read_day(
        self,
        file_path: str,
        root: Path,
        real: Path,
        tenant: Tenant,
        start: Position,
        max_bytes: int,
    ) -> str:
        """A local day of the dialog as `tenant` sees it (`DialogDayView`); a day without its
        records reads as a missing file."""
        fd, name = _opened(root, real)
        try:
            self._check_opened(fd, name)
            with open(fd, "rb", closefd=False) as file:
                data = file.read()
        except OSError as exc:
            raise ReadFileError(f"cannot read {name}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)
        with self._count_lock:
            self.bytes_read += len(data)
        try:
            view = DialogDayView(data, tenant)
        except KeyError:
            raise ReadFileError(f"{file_path[:200]!r} does not exist") from None
        try:
            return excerpt(view, str(real), start, max_bytes)
        except ValueError as exc:
            raise ReadFileError(str(exc).replace(repr(str(real)), name)) from None

    def _read(self, root: Path, real: Path, start: Position, max_bytes: int) -> str:
        fd, name = _opened(root, real)
        try:
            info = self._check_opened(fd, name)
            source = ByteSource(open(fd, "rb", buffering=0, closefd=False))
            try:
                return self._excerpt(source, info, real, start, max_bytes)
            finally:
                with self._count_lock:
                    self.bytes_read += source.bytes_read
        except OSError as exc:
            raise ReadFileError(f"cannot read {name}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)

    def _check_opened(self, fd: int, name: str) -> os.stat_result:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ReadFileError(f"{name} is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            kind = KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise ReadFileError(f"{name} is {kind}; only regular files can be read")
        if info.st_nlink > 1:
            raise ReadFileError(
                f"{name} has {info.st_nlink} hard links: it may be another name of a file "
                "outside the readable roots, so it is not read (copy it to read it)"
            )
        try:
            opened = Path(os.readlink(PROC_FD / str(fd)))
        except OSError:  # no /proc here: the walk by directory fds is the check
            return info
        if not self._inside(opened):
            raise ReadFileError(f"{name} was moved outside the readable roots; it is not read")
        return info

    def _excerpt(
        self, source: ByteSource, info: os.stat_result, real: Path, start: Position, max_bytes: int
    ) -> str:
        name = repr(str(real))
        index = self.index_cache.get(source, info)
        if index.lines == 0:
            return f"({name} is empty)"
        own = self.store_dir is not None and real.parent == self.store_dir
        if index.binary and not own:  # saved outputs are text, whatever bytes they hold
            raise ReadFileError(f"{name} is a binary file; it cannot be shown")
        if start.line > index.lines:
            raise ReadFileError(
                f"start_line={start.line} is past the end of {name} ({index.lines} lines)"
            )
        try:
            at = index.locate(source, start)
        except LineEndError as exc:
            raise ReadFileError(
                f"line_offset={start.offset} is past the end of line {start.line} "
                f"({exc.length} characters)"
            ) from None
        except UnicodeDecodeError:
            raise ReadFileError(f"{name} is not UTF-8 text; it cannot be shown") from None
        except EOFError:
            raise ReadFileError(f"{name} changed while it was being read; try again") from None
        want = max_bytes + 8  # over max_bytes even if the decoder holds back a split character
        window = source.read(at, want)
        at_eof = len(window) < want or not source.read(at + want, 1)
        try:
            rest = codecs.getincrementaldecoder("utf-8")().decode(window, final=at_eof)
        except UnicodeDecodeError:
            raise ReadFileError(f"{name} is not UTF-8 text; it cannot be shown") from None
        # When the window stops short of the end, `rest` is over `max_bytes`: it is cut, and
        # the excerpt is a whole prefix of the rest of the file, as the chain needs.
        output = excerpt_with_notice(
            rest, max_bytes=max_bytes, file_path=str(real), start=start, source_lines=index.lines
        )
        if output != rest and (parsed := parse_notice(output)) is not None:
            index.remember(parsed[1].next, at + parsed[1].n_bytes)
        return output


def _opened(root: Path, real: Path) -> tuple[int, str]:
    """`real` opened below `root` (its descriptor) and its name as messages quote it."""
    name = repr(str(real))
    try:
        return open_below(root, real), name
    except OSError as exc:
        raise ReadFileError(open_error(name, exc)) from None
