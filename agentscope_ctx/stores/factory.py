"""`open_stores`: the three seams of a config (``store.kind``), wired as the manager wires them
today: the dialog store and the output store name the agent and the session on what they
save, and tell the search index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core._config import ContextConfig
from ..core._failures import FailureLog
from .seams import DialogSeam, OutputSeam, SearchSeam

__all__ = ["Stores", "open_stores"]


@dataclass
class Stores:
    """The seams of one agent (the search index is shared by the agents of a store)."""

    dialog: DialogSeam
    outputs: OutputSeam
    search: SearchSeam
    close: Callable[[], None]


def open_stores(
    config: ContextConfig,
    *,
    agent: str | None = None,
    session: str | None = None,
    failures: FailureLog | None = None,
) -> Stores:
    """The dialog store, output store and search index `config.store` names.

    Nothing is connected or created until first use; for ``postgres``, psycopg is imported
    then.
    """
    fields = {k: v for k, v in (("agent", agent), ("session", session)) if v is not None}
    retention = config.tool_result.retention_days
    if config.store.kind == "postgres":
        from .postgres import (
            PostgresDialogStore,
            PostgresEngine,
            PostgresOutputStore,
            PostgresSearchIndex,
        )

        assert config.store.dsn is not None  # the config refuses postgres without one
        engine = PostgresEngine(
            config.store.dsn,
            password_env=config.store.password_env,
            schema=config.store.schema_name,
            connect_timeout=config.store.connect_timeout_seconds,
        )
        pg_search = PostgresSearchIndex(engine, failures=failures)
        pg_outputs = PostgresOutputStore(
            engine,
            retention,
            agent=agent,
            session=session,
            on_saved=lambda ref: pg_search.output_saved(ref, agent=agent, session=session),
        )
        pg_dialog = PostgresDialogStore(
            engine, record_fields=fields, on_append=pg_search.dialog_appended
        )
        return Stores(pg_dialog, pg_outputs, pg_search, engine.close)

    from .local import LocalDialogStore, LocalOutputStore, LocalSearchIndex

    working_dir = Path(config.working_dir).resolve()
    search = LocalSearchIndex(working_dir, failures=failures)
    outputs = LocalOutputStore(
        working_dir,
        retention,
        on_saved=lambda path: search.output_saved(str(path), agent=agent, session=session),
    )
    dialog = LocalDialogStore(working_dir, record_fields=fields, on_append=search.dialog_appended)
    return Stores(dialog, outputs, search, search.close)
