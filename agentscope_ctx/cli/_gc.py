"""`agentscope-ctx gc`: retention, run by hand or from cron (docs/data.md).

Saved outputs past ``--retention-days`` (else ``retention.outputs_days``, else
``tool_result.retention_days``), and, without ``--agent``, every other kind the config's
``retention`` section limits (dialog days, daily notes, steps), on the working dir or the
fleet store. Run offline, it cannot see the contexts of running agents: it deletes only what
is past its age (a live agent keeps the expired outputs its messages still point to, and
cleans up itself). Each run writes one audit line (`stores._audit`).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..core._errors import ContextError
from ..core._tenant import Tenant
from ..stores._audit import AuditFile, audit, caller, open_audit
from ..stores._retention import RetentionDays, RetentionReport, local_retention
from ._common import (
    CliError,
    _fleet,
    _load_config,
    _size,
    _state_dir,
    _tool_result_files,
    cli_tenant,
)

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig
    from ..stores._audit import AuditSink

__all__ = ["_cmd_gc"]

_NAMES = {"dialog": "dialog record(s)", "memory": "daily note(s)", "steps": "steps record(s)"}


def _cmd_gc(args: argparse.Namespace) -> int:
    loaded = _load_config(args.config)
    tenant = cli_tenant(args)
    days = args.retention_days
    if days is None:  # without a config, the defaults: tool_result.retention_days (7)
        days = RetentionDays.of(loaded).outputs if loaded else 7.0
    if days is not None and days <= 0:
        raise CliError(f"--retention-days must be > 0, got {days!r}", code=2)
    # without a config the other kinds are kept forever (the retention section's defaults),
    # and the config models are not loaded (a quick command: tests/edge/test_startup.py)
    others = RetentionDays()
    if tenant is None and loaded is not None:
        others = replace(RetentionDays.of(loaded), outputs=None)
    now = time.time()
    report = RetentionReport()
    sink: AuditSink
    if loaded is not None and loaded.store.kind == "postgres":
        kept, what = _fleet_gc(loaded, days, others, tenant, now, report)
        sink, store = open_audit(loaded), "postgres"
    else:
        path = _state_dir(args.working_dir, loaded)
        kept, what = _local_gc(path, days, others, tenant, now, report)
        sink, store = AuditFile(Path(path).expanduser().resolve()), "local"
    outputs_bytes = report.bytes
    for kind in _NAMES:  # the other kinds' bytes, counted apart from the outputs'
        outputs_bytes -= report.sizes.get(kind, 0)
    whom = None
    if tenant is not None:
        whom = {"user": args.user, "agent": args.agent, "session": args.session}
    audit(
        sink,
        "retention",
        who=caller("cli"),
        store=store,
        tenant=whom,
        counts=report.counts,
        bytes_=report.bytes,
    )
    if getattr(args, "json", False):
        print(json.dumps({"version": 1, "removed": report.counts, "bytes": report.bytes}))
        return 0
    if days is None:
        print(f"gc: saved outputs are kept forever (retention.outputs_days: 0); {kept}")
    else:
        removed = report.counts["outputs"]
        print(f"gc: removed {removed} {what} {days:g} days ({_size(outputs_bytes)}); {kept}")
    for kind, name in _NAMES.items():
        limit = getattr(others, kind)
        if limit is not None:
            size = _size(report.sizes.get(kind, 0))
            print(f"gc: removed {report.counts[kind]} {name} older than {limit:g} days ({size})")
    return 0


def _fleet_gc(
    config: ContextConfig,
    days: float | None,
    others: RetentionDays,
    tenant: Tenant | None,
    now: float,
    report: RetentionReport,
) -> tuple[str, str]:
    from ..stores.postgres._retention import pg_retention

    outputs_days = days if days is not None else float("inf")
    retention = config.tool_result.model_copy(update={"retention_days": outputs_days})
    backend = _fleet(config.model_copy(update={"tool_result": retention}))
    outputs = backend.outputs(tenant=tenant)
    try:
        _, size_before, _, _ = outputs.stats()
        gone = outputs.cleanup([], now=now)
        backend.search.drop_outputs(gone)
        left, size_left, _, _ = outputs.stats()
        report.add("outputs", len(gone), max(size_before - size_left, 0))
        if others != RetentionDays():
            report.merge(pg_retention(backend.search.engine, others, now=now))
    except ContextError as exc:
        raise CliError(str(exc)) from None
    finally:
        backend.close()
    return f"{left} kept", "saved output(s) unused for over"


def _local_gc(
    path: Path,
    days: float | None,
    others: RetentionDays,
    tenant: Tenant | None,
    now: float,
    report: RetentionReport,
) -> tuple[str, str]:
    from ..stores._tool_results import ToolResultStore

    store = ToolResultStore(path, days if days is not None else float("inf"))
    sizes = {p.resolve(): p.stat().st_size for p in _tool_result_files(path)}
    removed = [p for p in store.cleanup(referenced=[], only=tenant, now=now) if p.suffix == ".txt"]
    report.add("outputs", len(removed), sum(sizes.get(p.resolve(), 0) for p in removed))
    if others != RetentionDays():
        search = None
        if (path / "index").is_dir():  # its entries of what is deleted go too
            from ..stores._search import SearchIndex

            search = SearchIndex(path)
        try:
            report.merge(local_retention(path, others, now=now, search=search))
        finally:
            if search is not None:
                search.close()
    return f"{len(_tool_result_files(path))} kept", "tool_result file(s) older than"
