"""The background retention task (DESIGN.md §19, docs/data.md): with the hourly cleanup of
saved outputs (`_cleanup`: once per process and store, sparing what live contexts point to),
the other kinds past their age (`RetentionConfig`: dialog, daily notes, steps), then one
audit line when anything was deleted (`stores._audit`, ``who``: ``task:<pid>``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from ..core.config._config import ContextConfig
from ..stores._audit import AuditSink, audit, caller, open_audit
from ..stores._retention import RetentionReport
from ..stores._tombstones import Tombstone, read_local
from ..stores.factory import Backend

__all__ = ["retention_task"]

logger = logging.getLogger("agentscope_ctx")


def retention_task(backend: Backend, config: ContextConfig) -> Callable[[float, list[str]], None]:
    """What runs after each cleanup of `backend`'s outputs: `run(now, deleted refs)`."""
    sinks: list[AuditSink] = []

    def run(now: float, refs: list[str]) -> None:
        report = backend.retention(now) if backend.retention is not None else RetentionReport()
        report.add("outputs", len(refs), sum(map(lambda ref: _deleted_bytes(backend, ref), refs)))
        if not any(report.counts.values()):
            return
        if not sinks:
            sinks.append(open_audit(config))
        audit(
            sinks[0],
            "retention",
            who=caller("task"),
            store=backend.kind,
            counts=report.counts,
            bytes_=report.bytes,
        )

    return run


def _deleted_bytes(backend: Backend, ref: str) -> int:
    """The size of the deleted output `ref`, as its tombstone keeps it (0: unknown)."""
    source = backend.source(ref)
    if source is None:
        stone = read_local(Path(ref))
    else:
        told = getattr(source, "deleted", None)
        stone = told(ref) if callable(told) else None
    return int(stone.size or 0) if isinstance(stone, Tombstone) else 0
