"""What the commands of `agentscope-ctx` share: its errors, the working directories it finds
or makes, sizes and ages as shown."""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._tenant import Scope, Tenant

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig

DEFAULT_WORKING_DIR = Path("~/.agentscope_ctx")
DEMO_DIR = Path("agentscope_ctx_demo")
"""Where `demo` writes by default (in the current directory); when it is taken, the next
free ``agentscope_ctx_demo_2``, ``_3``, ... beside it."""
_STATE_DIRS = ("dialog", "tool_result", "memory", "usage")


class CliError(Exception):
    """A failure reported as one line on stderr; `code` is the exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class UsageError(CliError):
    """A usage error found after parsing: shown with the command's usage, exit code 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=2)


def _retention_days(text: str) -> float:
    """`--retention-days`: a finite number of days > 0."""
    try:
        days = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days; got {text!r}") from None
    if not math.isfinite(days) or days <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of days > 0; got {text!r}")
    return days


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number; got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected a number >= {minimum}; got {text!r}")
    return value


def _positive_int(text: str) -> int:
    """A whole number >= 1 (``--start-line``)."""
    return _int_at_least(text, 1)


def _non_negative_int(text: str) -> int:
    """A whole number >= 0 (``--line-offset``)."""
    return _int_at_least(text, 0)


def _looks_like_path(word: str) -> bool:
    return word in (".", "..") or word.startswith(("/", "~", "./", "../"))


# -- helpers ---------------------------------------------------------------------------


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _age(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86_400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:.1f} days"


def _load_config(path: str | None) -> ContextConfig | None:
    if path is None:
        return None
    from ..core.config._config import ContextConfig

    return ContextConfig.from_yaml(path)


def _holds_state(path: Path) -> bool:
    return path.is_dir() and any((path / name).is_dir() for name in _STATE_DIRS)


def _demo_dirs() -> list[Path]:
    """The demo runs in the current directory, newest first."""
    name = DEMO_DIR.name
    runs = [p for p in Path.cwd().glob(f"{name}*") if re.fullmatch(rf"{name}(_\d+)?", p.name)]
    return sorted((p for p in runs if _holds_state(p)), key=_mtime, reverse=True)


def _mtime(path: Path) -> float:
    report = path / "report.svg"
    return (report if report.exists() else path).stat().st_mtime


def _new_demo_dir(parent: Path | None = None) -> Path:
    """`DEMO_DIR` (in `parent`, default the current directory) if absent or empty, else the
    first free ``agentscope_ctx_demo_N`` beside it."""
    base = DEMO_DIR if parent is None else parent / DEMO_DIR
    n = 1
    while True:
        path = base if n == 1 else Path(f"{base}_{n}")
        if not path.exists() or (path.is_dir() and not any(path.iterdir())):
            return path
        n += 1


def newest_demo_run() -> Path | None:
    """The newest demo run in the current directory, named on stderr, when the default
    working dir holds no state; else `None`. Every command that falls back on the
    default working dir falls back on this next (docs/cli.md, "Which working dir")."""
    if _holds_state(DEFAULT_WORKING_DIR.expanduser()):
        return None
    demos = _demo_dirs()
    if not demos:
        return None
    print(
        f"agentscope-ctx: no state in the default {DEFAULT_WORKING_DIR}: using the "
        f"newest demo run {demos[0]}",
        file=sys.stderr,
    )
    return demos[0]


def _state_dir(arg: str | None, config: ContextConfig | None) -> Path:
    """The working dir to act on: it must exist and hold an agentscope_ctx state.

    `arg` (WORKING_DIR as typed) must be a directory, else it is a usage error (exit 2).
    Without it, the config's working_dir; without a config, the default ``~/.agentscope_ctx``,
    or, when that holds no state, the newest demo run in the current directory (every command
    alike), named on stderr.
    """
    if arg is not None:
        given = Path(arg).expanduser()
        if not given.exists():
            raise UsageError(f"WORKING_DIR {arg!r} does not exist")
        if not given.is_dir():
            raise UsageError(f"WORKING_DIR {arg!r} is not a directory")
    raw = Path(arg) if arg else (config.working_dir if config else DEFAULT_WORKING_DIR)
    path = raw.expanduser()
    if arg is None and config is None and not _holds_state(path):
        demo = newest_demo_run()
        if demo is not None:
            return demo
        raise CliError(
            f"no agentscope_ctx state in the default working dir {str(path)!r}; pass "
            f"WORKING_DIR (`agentscope-ctx demo` prints its own as 'working dir: ...')"
        )
    if not path.exists():
        raise CliError(f"working dir {str(path)!r} does not exist")
    if not path.is_dir():
        raise CliError(f"working dir {str(path)!r} is not a directory")
    present = [name for name in _STATE_DIRS if (path / name).exists()]
    if not present:
        raise CliError(
            f"working dir {str(path)!r} holds no agentscope_ctx state "
            "(no dialog/, tool_result/ or memory/)"
        )
    for name in present:
        if not (path / name).is_dir():
            raise CliError(f"working dir {str(path)!r} is corrupt: {name} is not a directory")
    return path


def _tool_result_files(path: Path) -> list[Path]:
    folder = path / "tool_result"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".txt")


# -- commands --------------------------------------------------------------------------


def _fleet(config: ContextConfig | None) -> Any:
    """The fleet store's seams when the config names one (``store.kind: postgres``), else
    `None` (the working dir's files)."""
    if config is None or config.store.kind != "postgres":
        return None
    from ..stores.factory import open_backend

    return open_backend(config)


def cli_tenant(args: argparse.Namespace) -> Tenant | None:
    """The tenant ``--agent`` (``--user``, ``--session``) names: every session of the agent,
    or that session only; `None` (the whole store) without ``--agent``.

    Raises:
        CliError: ``--user`` without ``--agent``.
    """
    agent = getattr(args, "agent", None)
    if agent is None:
        if getattr(args, "user", None) is not None:
            raise CliError("--user needs --agent (the user's agent)", code=2)
        return None
    session = getattr(args, "session", None)
    scope: Scope = "agent" if session is None else "session"
    return Tenant.of(agent, session, user=getattr(args, "user", None), scope=scope)
