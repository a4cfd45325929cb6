"""`forget`: remove every byte of one tenant from a store (DESIGN.md §19, docs/data.md).

The store-level entry point is `forget_store(config, target)`: it runs the store's own
deletion (`_forget_local.forget_local` for a working dir, `postgres._forget.forget_postgres`
for the fleet store; both also clear the working dir's ``usage/`` and ``media/``), then
writes one audit line (`_audit.audit`: who, which tenant, how many records of each kind and
how many bytes, never the data).

A `ForgetTarget` (`_forget_target`) names the tenant by its parts, as `core._tenant` does.

A forget is idempotent: run again after it was interrupted (a worker killed mid-forget), it
finds what is left and completes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ._audit import AuditSink, audit, open_audit
from ._forget_target import KINDS, ForgetReport, ForgetTarget, Step

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig
    from .seams import SearchSeam

__all__ = ["KINDS", "ForgetReport", "ForgetTarget", "by_kind", "forget_store"]

logger = logging.getLogger("agentscope_ctx")


def forget_store(
    config: ContextConfig,
    target: ForgetTarget,
    *,
    dry_run: bool = False,
    who: str = "api",
    search: SearchSeam | None = None,
    vacuum_full: bool = False,
    sink: AuditSink | None = None,
    on_step: Step | None = None,
) -> ForgetReport:
    """Forget `target` in the store `config` names (blocking: run it in a thread inside an
    event loop), then write its audit line (not for a `dry_run`).

    Args:
        config: The store (``store.kind``) and the working dir (its ``usage/``, ``media/``).
        target: The tenant.
        dry_run: Count what would be deleted; delete nothing, write no audit line.
        who: Who asks, as the audit line names it (the CLI: ``cli:<OS user>``).
        search: The local search index of a running manager (its background work and
            connection are reused); `None`: one is opened for the call.
        vacuum_full: PostgreSQL: ``VACUUM FULL`` the touched tables (rewrites them: the
            deleted rows' bytes leave the table files; locks each table meanwhile) instead
            of a plain ``VACUUM``.
        sink: Where the audit line goes (default: `open_audit(config)`).
        on_step: Called after each kind is deleted.

    Raises:
        PersistenceError: the store cannot be read or written (running it again is safe).
    """
    working_dir = Path(config.working_dir).expanduser().resolve()
    if config.store.kind == "postgres":
        from .postgres._forget import forget_postgres

        report = forget_postgres(
            config, target, dry_run=dry_run, vacuum_full=vacuum_full, on_step=on_step
        )
    else:
        from ._forget_local import forget_local
        from ._keys_local import migrate_keys

        if working_dir.is_dir():
            migrate_keys(working_dir)  # (the keys the target names are of version 2)
        report = forget_local(working_dir, target, dry_run=dry_run, search=search, on_step=on_step)
    if not dry_run:
        made = sink is None
        into = open_audit(config) if sink is None else sink
        try:
            audit(
                into,
                "forget",
                who=who,
                store=report.store,
                tenant=target.fields,
                counts={k: n for k, n in report.counts.items() if n},
                bytes_=report.total_bytes,
            )
        finally:
            engine = getattr(into, "engine", None) if made else None
            if engine is not None:  # the audit table's connections go back to the pool
                engine.close()
    return report


def by_kind(report: ForgetReport) -> Mapping[str, tuple[int, int]]:
    """(records, bytes) of each kind that has any."""
    return {k: (n, report.bytes.get(k, 0)) for k, n in report.counts.items() if n}
