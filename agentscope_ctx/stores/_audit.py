"""The audit trail of what deletes or hands back a session's data (DESIGN.md §19): one line
per `forget`, retention run, export and import, never the data itself.

One line (version `AUDIT_VERSION`)::

    {"v": 1, "at": "2026-12-06T16:00:00.000+00:00", "action": "retention",
     "who": "cli:alice", "store": "local",
     "tenant": {"user": null, "agent": null, "session": null},
     "counts": {"dialog": 12, "outputs": 3}, "bytes": 48211}

- ``action``: ``forget``, ``retention``, ``export`` or ``import`` (another action may be
  added; a reader keeps what it does not know);
- ``who``: the caller as it names itself (the CLI: ``cli:<OS user>``; the background task:
  ``task:<pid>``);
- ``tenant``: what it acted on (``null``: every one), as the caller named it;
- ``counts``: how many records of each kind (``dialog``, ``outputs``, ``summaries``,
  ``steps``, ``memory``, ...); ``bytes``: how many bytes of data they held.

Where it goes, besides the log (logger ``agentscope_ctx.audit``, INFO):

- a local working dir: ``WORKING_DIR/audit.jsonl``, appended, mode ``0600``;
- the PostgreSQL store: the ``audit`` table of its schema (`postgres._audit`), one row per
  line: ``SELECT line FROM <schema>.audit ORDER BY id``.

A line that cannot be written is logged as a warning; the action it records is not undone.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..core._private import FILE_MODE, tighten_fd

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig

__all__ = [
    "AUDIT_FILE",
    "AUDIT_VERSION",
    "AuditFile",
    "AuditSink",
    "audit",
    "audit_line",
    "caller",
    "open_audit",
]

logger = logging.getLogger("agentscope_ctx.audit")

AUDIT_VERSION = 1
AUDIT_FILE = "audit.jsonl"
"""The local audit file, in the working dir."""
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class AuditSink(Protocol):
    """Where audit lines are kept (a file, a table)."""

    def write(self, line: Mapping[str, Any]) -> None:
        """Keep `line`.

        Raises:
            OSError, PersistenceError: it could not be kept.
        """
        ...


def caller(kind: str = "cli") -> str:
    """The ``who`` of a line: ``cli:<OS user>``, or ``task:<pid>`` for a background task."""
    if kind == "task":
        return f"task:{os.getpid()}"
    try:
        user = getpass.getuser()
    except Exception:  # no user name (a container's uid without an entry)
        user = str(os.getuid()) if hasattr(os, "getuid") else "?"
    return f"{kind}:{user}"


def audit_line(
    action: str,
    *,
    who: str,
    store: str,
    tenant: Mapping[str, str | None] | None = None,
    counts: Mapping[str, int] | None = None,
    bytes_: int = 0,
    now: datetime | None = None,
) -> dict[str, Any]:
    """One audit line (see the module docstring)."""
    at = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    whom = {"user": None, "agent": None, "session": None, **(tenant or {})}
    return {
        "v": AUDIT_VERSION,
        "at": at.isoformat(timespec="milliseconds"),
        "action": action,
        "who": who,
        "store": store,
        "tenant": whom,
        "counts": {str(kind): int(n) for kind, n in (counts or {}).items()},
        "bytes": int(bytes_),
    }


class AuditFile:
    """``audit.jsonl`` of a working dir: one JSON line per action, appended, ``0600``."""

    def __init__(self, working_dir: Path) -> None:
        self.path = Path(working_dir) / AUDIT_FILE

    def write(self, line: Mapping[str, Any]) -> None:
        data = (json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, FILE_MODE)
        try:
            tighten_fd(fd, self.path)
            os.write(fd, data)  # one write of one line: appends never interleave
        finally:
            os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        """Every line written, oldest first (unreadable lines skipped)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        lines = []
        for raw in text.split("\n"):  # (not splitlines: U+2028 in a name is text)
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict):
                lines.append(record)
        return lines


def open_audit(config: ContextConfig) -> AuditSink:
    """The audit sink of `config`'s store: the ``audit`` table on PostgreSQL, else
    ``audit.jsonl`` in the working dir."""
    if config.store.kind == "postgres":
        from .postgres._audit import PostgresAudit
        from .postgres._engine import engine_of

        return PostgresAudit(engine_of(config))
    return AuditFile(Path(config.working_dir).expanduser().resolve())


def audit(
    sink: AuditSink | None,
    action: str,
    *,
    who: str,
    store: str,
    tenant: Mapping[str, str | None] | None = None,
    counts: Mapping[str, int] | None = None,
    bytes_: int = 0,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Write one audit line to the log and to `sink` (`None`: the log only); the line.
    Never raises: a line that cannot be kept is logged as a warning."""
    line = audit_line(
        action, who=who, store=store, tenant=tenant, counts=counts, bytes_=bytes_, now=now
    )
    logger.info("agentscope_ctx audit: %s", json.dumps(line, ensure_ascii=False, sort_keys=True))
    if sink is not None:
        try:
            sink.write(line)
        except Exception as exc:
            logger.warning("agentscope_ctx: cannot write the audit line of %s: %s", action, exc)
    return line
