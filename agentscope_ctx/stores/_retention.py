"""Retention on a schedule (DESIGN.md §19, docs/data.md): each kind of record deleted past
its age (`core.config._config_retention.RetentionConfig`), on a local working dir here, on
the fleet store by `postgres._retention`.

What a run deletes, locally:

- ``outputs``: saved outputs unused for `outputs` days, never one a live context points to
  (`referenced`), each leaving a tombstone (`_tombstones`) so that its notice reads as
  deleted by retention, and when;
- ``dialog``: whole days ``dialog/YYYY-MM-DD.jsonl`` whose last moment (the next local
  midnight) is more than `dialog` days ago, each leaving a tombstone naming the owners of
  its records;
- ``memory``: the daily notes ``memory/YYYY-MM-DD.md`` by the same rule (MEMORY.md is kept);
- ``steps``: the steps records (``usage/steps/``) whose ``at`` is more than `steps` days ago.

The search index drops what is gone (`SearchSeam.drop_outputs`, then a catch-up, which drops
the entries of deleted files). Ages count back from `now`, given by the caller (a test's
clock).
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ..core._private import file_lock, write_atomic
from ..core._tenant import owner_tag
from ._dialog_record import decode_owned
from ._tombstones import write_local
from ._tool_results import ToolResultStore

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..core.config._config import ContextConfig
    from .seams import SearchSeam

__all__ = ["KINDS", "RetentionDays", "RetentionReport", "day_expired", "local_retention"]

logger = logging.getLogger("agentscope_ctx")

KINDS = ("dialog", "outputs", "memory", "steps")
_DAY_FILE = re.compile(r"(\d{4}-\d{2}-\d{2})\.jsonl")
_NOTE_FILE = re.compile(r"(\d{4}-\d{2}-\d{2})\.md")


@dataclass(frozen=True)
class RetentionDays:
    """The age limit of each kind, in days (`None`: kept forever)."""

    dialog: float | None = None
    outputs: float | None = None
    memory: float | None = None
    steps: float | None = None

    @classmethod
    def of(cls, config: ContextConfig, *, outputs: float | None = None) -> RetentionDays:
        """The limits `config` sets (`outputs`: the CLI's ``--retention-days``)."""
        kept = config.retention
        return cls(
            dialog=kept.dialog_days or None,  # 0 or null: forever
            outputs=outputs if outputs else kept.outputs(config.tool_result.retention_days),
            memory=kept.memory_days or None,
            steps=kept.steps_days or None,
        )


@dataclass
class RetentionReport:
    """What a run deleted: records by kind, their bytes, and the outputs' refs."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    bytes: int = 0
    outputs: list[str] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    """Bytes by kind."""

    def add(self, kind: str, records: int, size: int) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + records
        self.sizes[kind] = self.sizes.get(kind, 0) + size
        self.bytes += size

    def merge(self, other: RetentionReport) -> None:
        """Add what `other` deleted."""
        for kind, n in other.counts.items():
            self.add(kind, n, other.sizes.get(kind, 0))
        self.outputs += other.outputs


def day_expired(day: str, days: float, now: float) -> bool:
    """Whether the local day ``YYYY-MM-DD`` ended (its next midnight) over `days` days
    before `now`."""
    try:
        start = datetime.combine(date.fromisoformat(day), datetime.min.time())
    except ValueError:
        return False
    return (start + timedelta(days=1)).timestamp() <= now - days * 86_400


def local_retention(
    working_dir: Path,
    days: RetentionDays,
    *,
    now: float,
    referenced: Iterable[str] = (),
    search: SearchSeam | None = None,
) -> RetentionReport:
    """Apply `days` to the working dir (see the module docstring); what was deleted."""
    report = RetentionReport()
    if days.outputs is not None:
        store = ToolResultStore(working_dir, days.outputs)
        sizes = _sizes(store.dir)
        removed = store.cleanup(list(referenced), now=now)
        gone = [p for p in removed if p.suffix == ".txt"]
        report.add("outputs", len(gone), sum(sizes.get(p.name, 0) for p in gone))
        report.outputs = [str(p) for p in gone]
    if days.dialog is not None:
        _dialog(working_dir / "dialog", days.dialog, now, report)
    if days.memory is not None:
        _notes(working_dir / "memory", days.memory, now, report)
    if days.steps is not None:
        _steps(working_dir / "usage" / "steps", days.steps, now, report)
    if search is not None and (
        report.outputs or report.counts["dialog"] or report.counts["memory"]
    ):
        search.drop_outputs(report.outputs)
        try:
            search.catch_up(seconds=None)  # drops the entries of the deleted files
        except Exception as exc:
            logger.warning("agentscope_ctx: retention: the search index catches up later: %s", exc)
    return report


def _sizes(folder: Path) -> dict[str, int]:
    try:
        return {e.name: e.stat(follow_symlinks=False).st_size for e in os.scandir(folder)}
    except OSError:
        return {}


def _dialog(folder: Path, days: float, now: float, report: RetentionReport) -> None:
    if not folder.is_dir() or folder.is_symlink():
        return
    with file_lock(folder / ".lock"):  # the dialog store's writers' lock
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            match = _DAY_FILE.fullmatch(entry.name)
            if not match or not entry.is_file(follow_symlinks=False):
                continue
            if not day_expired(match.group(1), days, now):
                continue
            path = folder / entry.name
            data = path.read_bytes()
            owners = set()
            records = 0
            for raw in data.splitlines():
                if raw.strip():
                    records += 1
                    _, agent, session = decode_owned(raw)
                    owners.add((owner_tag(agent), owner_tag(session)))
            path.unlink()
            write_local(path, reason="retention", at=now, size=len(data), owners=owners)
            report.add("dialog", records, len(data))


def _notes(folder: Path, days: float, now: float, report: RetentionReport) -> None:
    if not folder.is_dir() or folder.is_symlink():
        return
    with file_lock(folder / ".lock"):  # the memory files' writers' lock
        for entry in os.scandir(folder):
            match = _NOTE_FILE.fullmatch(entry.name)
            if match and entry.is_file(follow_symlinks=False):
                if day_expired(match.group(1), days, now):
                    size = entry.stat(follow_symlinks=False).st_size
                    (folder / entry.name).unlink()
                    report.add("memory", 1, size)


def _steps(root: Path, days: float, now: float, report: RetentionReport) -> None:
    if not root.is_dir():
        return
    cutoff = now - days * 86_400
    for path in sorted(root.glob("*/*.jsonl")):
        if path.is_symlink() or not path.is_file():
            continue
        lines = path.read_bytes().splitlines(keepends=True)
        kept = [line for line in lines if not _step_older(line, cutoff)]
        if len(kept) == len(lines):
            continue
        report.add("steps", len(lines) - len(kept), sum(map(len, lines)) - sum(map(len, kept)))
        if kept:
            write_atomic(path, b"".join(kept))
        else:
            path.unlink()


def _step_older(line: bytes, cutoff: float) -> bool:
    try:
        at = json.loads(line).get("at")
        return bool(datetime.fromisoformat(str(at)).timestamp() < cutoff)
    except (ValueError, AttributeError, TypeError):
        return False
