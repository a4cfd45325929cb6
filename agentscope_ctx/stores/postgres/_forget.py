"""`forget_postgres`: a `ForgetTarget`'s rows removed from the fleet store (docs/data.md).

The working dir's ``usage/`` and ``media/`` (each worker keeps its own) first, as on the
local store, while the rows still tell whose they are; then one transaction in the
maintenance scope (every tenant's rows visible to it):

1. the owners to forget: the (agent key, session) pairs of ``dialog_days``, ``outputs``,
   ``owners``, ``chunks`` and ``memory_docs`` that are the target's (compared in Python, on
   the names as `_names` reads them back);
2. ``DELETE`` from ``dialog`` and ``outputs`` first: their rows are what the index's
   catch-up locks (``FOR UPDATE SKIP LOCKED``) while it indexes them, so the delete waits
   for a catch-up under way to commit its chunks, and a later catch-up finds no row to
   index: a forgotten record never comes back from one;
3. then ``output_chunks`` (by the ``ON DELETE CASCADE`` of ``outputs``), ``owners``,
   ``chunks`` (the owners', and those of the deleted outputs and records by source),
   ``dialog_days``, ``steps`` (the owners' agent names and sessions, as the rows name
   them), retention's ``tombstones`` of the owners (they name them), and, when no session
   is named, the owners' ``memory_docs`` and their chunks (long-term memory is per agent
   key, shared by its sessions: a session's forget leaves it).

After the commit, each touched table is vacuumed (``VACUUM (ANALYZE)``: the dead rows are
removed and their space is reusable; the statistics no longer sample them), or with
`vacuum_full` rewritten (``VACUUM (FULL, ANALYZE)``: new table and index files, the old ones
deleted; each table locked meanwhile). The WAL and backups keep what they kept
(docs/data.md).

Killed in the middle, the transaction is rolled back or committed whole; running the forget
again completes it (a vacuum is run at every forget).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core._errors import PersistenceError
from .._forget_target import ForgetReport, ForgetTarget, Step
from ._engine import PostgresEngine, engine_of
from ._names import db_name, name_from_db
from ._tenant import transaction

if TYPE_CHECKING:
    from ...core.config._config import ContextConfig

__all__ = ["TABLES", "forget_postgres"]

TABLES = (
    "dialog",
    "dialog_days",
    "outputs",
    "output_chunks",
    "owners",
    "chunks",
    "steps",
    "memory_docs",
)
"""The tables a forget deletes from (and vacuums)."""
_PAIRS = "(agent, session) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"


def forget_postgres(
    config: ContextConfig,
    target: ForgetTarget,
    *,
    dry_run: bool = False,
    vacuum_full: bool = False,
    on_step: Step | None = None,
) -> ForgetReport:
    """Forget `target` in the store `config` names (see the module docstring).

    Raises:
        PersistenceError: the store cannot be reached or written (running it again is safe).
    """
    from .._forget_local import forget_media, forget_pages, forget_usage_files

    engine = engine_of(config)
    report = ForgetReport(target, "postgres", dry_run)
    step = on_step or (lambda kind: None)
    try:
        try:
            with transaction(engine, None) as conn:
                _owner_role(conn, engine.schema)
                owners = _owners(conn, engine.schema, target)
        except PersistenceError:
            raise
        except Exception as exc:
            raise engine.error("cannot forget", exc) from None
        root = Path(config.working_dir).expanduser().resolve()
        forget_media(root, target, owners, report, dry_run)  # while the rows still tell whose
        forget_usage_files(root, target, owners, report, dry_run)
        forget_pages(root, target, owners, report, dry_run)
        step("files")
        try:
            with transaction(engine, None) as conn:
                owners |= _owners(conn, engine.schema, target)
                _delete(conn, engine.schema, target, owners, report)
                if dry_run:
                    raise _DryRun
        except _DryRun:
            pass
        except Exception as exc:
            raise engine.error("cannot forget", exc) from None
        step("rows")
        if not dry_run:
            _vacuum(engine, full=vacuum_full)
        step("vacuum")
    finally:
        engine.close()
    return report


class _DryRun(Exception):
    """Rolls a dry run's transaction back."""


def _owner_role(conn: Any, s: str) -> None:
    """A forget sees every tenant's rows and vacuums the tables: only the role that owns the
    schema (or one with its privileges) may, as retention.

    Raises:
        PersistenceError: the role has not the owner's privileges.
    """
    row = conn.execute(
        "SELECT pg_has_role(n.nspowner, 'USAGE') FROM pg_catalog.pg_namespace AS n "
        "WHERE n.nspname = %s",
        (s,),
    ).fetchone()
    if row is not None and not row[0]:
        raise PersistenceError(
            f"forget needs the role that owns the schema {s!r} (the migration role): this "
            "role sees only its own tenant's rows and cannot vacuum (docs/data.md)"
        )


def _owners(conn: Any, s: str, target: ForgetTarget) -> set[tuple[str, str]]:
    """The target's (agent key, session) pairs, as names (not as stored)."""
    rows: list[tuple[Any, Any]] = []
    for table in ("dialog_days", "outputs", "owners", "chunks", *_tombstones(conn, s)):
        rows += conn.execute(f"SELECT DISTINCT agent, session FROM {s}.{table}").fetchall()
    if target.session is None:
        rows += [(a, "") for (a,) in conn.execute(f"SELECT DISTINCT agent FROM {s}.memory_docs")]
    owners: set[tuple[str, str]] = set()
    for agent, session in rows:
        name, sid = name_from_db(agent), name_from_db(session) or ""
        if name is not None and target.owns(name, sid):
            owners.add((name, sid))
    if target.key is not None and target.session is not None:
        owners.add((target.key, target.session))
    return owners


def _stored(owners: set[tuple[str, str]]) -> tuple[list[str], list[str]]:
    pairs = sorted(owners)
    return [db_name(a) or "" for a, _ in pairs], [db_name(x) or "" for _, x in pairs]


def _delete(
    conn: Any, s: str, target: ForgetTarget, owners: set[tuple[str, str]], report: ForgetReport
) -> None:
    agents, sessions = _stored(owners)
    pairs = (agents, sessions)
    rows = conn.execute(
        f"DELETE FROM {s}.dialog WHERE {_PAIRS} RETURNING seq, octet_length(record)", pairs
    ).fetchall()
    report.add("dialog", len(rows), sum(int(n) for _, n in rows))
    dialog_sources = [f"pg-dialog:{seq}" for seq, _ in rows]
    outputs = conn.execute(
        f"DELETE FROM {s}.outputs WHERE {_PAIRS} RETURNING id, size", pairs
    ).fetchall()
    report.add("outputs", len(outputs), sum(int(n) for _, n in outputs))
    ids = [str(i) for i, _ in outputs]
    conn.execute(f"DELETE FROM {s}.output_chunks WHERE id = ANY(%s)", (ids,))  # (cascaded)
    conn.execute(f"DELETE FROM {s}.owners WHERE {_PAIRS} OR id = ANY(%s)", (*pairs, ids))
    sources = [f"pg-output:{i}" for i in ids] + dialog_sources
    memory = "" if target.session is None else " AND source NOT LIKE 'pg-memory:%%'"
    chunks = conn.execute(
        f"DELETE FROM {s}.chunks WHERE ({_PAIRS}{memory}) OR source = ANY(%s) RETURNING id",
        (*pairs, sources),
    ).fetchall()
    report.add("index", len(chunks))
    days = conn.execute(f"DELETE FROM {s}.dialog_days WHERE {_PAIRS} RETURNING day", pairs)
    report.add("dialog_days", len(days.fetchall()))
    _steps(conn, s, target, owners, report)
    for table in _tombstones(conn, s):  # retention's, of the owners' deleted records
        gone = conn.execute(f"DELETE FROM {s}.{table} WHERE {_PAIRS} RETURNING ref", pairs)
        report.add("tombstones", len(gone.fetchall()))
    if target.session is None:
        keys = sorted({db_name(a) or "" for a, _ in owners})
        docs = conn.execute(
            f"DELETE FROM {s}.memory_docs WHERE agent = ANY(%s) RETURNING octet_length(body)",
            (keys,),
        ).fetchall()
        report.add("memory", len(docs), sum(int(n) for (n,) in docs))
        conn.execute(
            f"DELETE FROM {s}.chunks WHERE agent = ANY(%s) AND source LIKE 'pg-memory:%%'",
            (keys,),
        )


def _steps(
    conn: Any, s: str, target: ForgetTarget, owners: set[tuple[str, str]], report: ForgetReport
) -> None:
    from .._forget_local import usage_match

    match = usage_match(target, owners)
    key = "coalesce(record::jsonb ->> 'key', '')"
    found = conn.execute(f"SELECT DISTINCT agent, session, {key} FROM {s}.steps").fetchall()
    chosen = [(a, x, k) for a, x, k in found if match(name_from_db(a), name_from_db(x), k or None)]
    if not chosen:
        return
    rows = conn.execute(
        f"DELETE FROM {s}.steps WHERE (agent, session, {key}) IN "
        "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[])) RETURNING octet_length(record)",
        ([a for a, _, _ in chosen], [x for _, x, _ in chosen], [k for _, _, k in chosen]),
    ).fetchall()
    report.add("steps", len(rows), sum(int(n) for (n,) in rows))


def _tombstones(conn: Any, s: str) -> list[str]:
    """``["tombstones"]`` when retention made its table in the schema (`_tombstones`)."""
    row = conn.execute("SELECT to_regclass(%s)", (f"{s}.tombstones",)).fetchone()
    return ["tombstones"] if row is not None and row[0] is not None else []


def _vacuum(engine: PostgresEngine, *, full: bool) -> None:
    """Vacuum the touched tables (outside a transaction: the pool's connections are
    autocommit)."""
    how = "FULL, ANALYZE" if full else "ANALYZE"
    try:
        with engine.connection() as conn:
            for table in (*TABLES, *_tombstones(conn, engine.schema)):
                conn.execute(f"VACUUM ({how}) {engine.schema}.{table}")
    except Exception as exc:
        raise engine.error("cannot vacuum after the forget", exc) from None
