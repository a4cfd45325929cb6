"""`agentscope-ctx read`: follow a notice (or a search hit) from the shell, as an agent follows
it with `read_file`: the same reader, the same excerpt; the notice becomes the command that
reads on."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.truncation._truncation import Position, parse_notice
from ._common import DEFAULT_WORKING_DIR, CliError, UsageError, _load_config, newest_demo_run

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig
    from ..recall._read_file import FileReader

__all__ = ["read_command"]

STORE_PREFIXES = ("pg-output:", "pg-dialog:")
"""Refs that name a record of the fleet store, not a file: read with the config naming it."""


def read_command(ref: str, at: Position, config_path: str | None = None) -> str:
    """The shell command that shows `ref` from `at` (a search hit's or a notice's "read on")."""
    words = ["agentscope-ctx", "read", ref, "--start-line", str(at.line)]
    if at.offset:
        words += ["--line-offset", str(at.offset)]
    if config_path is not None:
        words += ["--config", config_path]
    return shlex.join(words)


def _reader(
    ref: str, where: str | None, config: ContextConfig | None
) -> tuple[FileReader, Callable[[], None]]:
    """A `FileReader` for a person, and what closes it: the working dir and the current
    directory, the working dir's ``tool_result/`` (saved outputs), the folder of a file named
    by its path (the operator may read what they name, as with ``cat``; a ``tool_result/``
    folder so named is read as saved outputs, whatever working dir it is in), and the fleet
    store's refs when the config names one."""
    from ..core.config._config import ContextConfig
    from ..core.ladder._tool_policy import ToolResultPolicy
    from ..recall._read_file import FileReader

    settings = config or ContextConfig()
    if where is not None:
        working_dir = Path(where).expanduser()
        if not working_dir.is_dir():
            why = "does not exist" if not working_dir.exists() else "is not a directory"
            raise UsageError(f"WORKING_DIR {where!r} {why}")
    elif config is not None:
        working_dir = Path(config.working_dir).expanduser()
    else:  # the default, or the newest demo run, as for every command
        working_dir = DEFAULT_WORKING_DIR.expanduser()
        named_here = Path(ref).expanduser().is_absolute() or Path(ref).exists()
        if not named_here and not ref.startswith(STORE_PREFIXES):  # `tool_result/….txt`
            working_dir = newest_demo_run() or working_dir  # as a demo's report prints it
    roots = [working_dir, Path.cwd(), *settings.read_roots]
    store_dir = working_dir / "tool_result"
    named = Path(ref).expanduser()
    if named.is_absolute() and not ref.startswith(STORE_PREFIXES):
        roots.append(named.parent)
        if named.parent.name == store_dir.name:  # a saved output, whichever working dir's:
            store_dir = named.parent  # text, whatever bytes it holds (a NUL too)
    sources, close = None, lambda: None
    if ref.startswith(STORE_PREFIXES):
        if settings.store.kind != "postgres":
            raise UsageError(
                f"{ref!r} names a record of the fleet store: give --config FILE naming it "
                "(store: {kind: postgres, ...})"
            )
        from ..stores.factory import open_backend

        backend = open_backend(settings)
        sources, close = backend.source, backend.close
    reader = FileReader(
        roots,
        ToolResultPolicy(settings.tool_result),
        store_dir=store_dir,
        sources=sources,
    )
    return reader, close


def _cmd_read(args: argparse.Namespace) -> int:
    from ..recall._read_file import ReadFileError

    refs = list(args.refs)
    if len(refs) > 2:
        raise UsageError(f"expected [WORKING_DIR] REF; got {len(refs)} arguments")
    where = refs.pop(0) if len(refs) == 2 else None
    ref = refs[0]
    if not ref.strip():
        raise UsageError("REF is empty")
    config = _load_config(args.config)
    reader, close = _reader(ref, where, config)
    try:
        text = reader.read_now(ref, args.start_line, args.line_offset)
    except ReadFileError as exc:
        raise CliError(str(exc)) from None
    finally:
        close()
    parsed = parse_notice(text)
    if parsed is None:  # the rest of the file (or a short message about it)
        _show(text)
        return 0
    excerpt, notice = parsed
    _show(excerpt)
    last = notice.next.line - 1 if notice.next.offset == 0 else notice.next.line
    print(
        f"(lines {notice.start.line}-{last} of {notice.total_lines}; read on: "
        f"{read_command(notice.file_path, notice.next, args.config)})"
    )
    return 0


def _show(text: str) -> None:
    """`text` as it is, ending with one newline."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
