"""The stores a config names (``store.kind``), behind the three seams.

`open_backend`: what a manager uses: the shared search index, and makers of the dialog and
output stores of each agent (they name the agent and the session on what they save, and tell
the index). Locally these are today's classes themselves (`DialogStore`, `ToolResultStore`,
`SearchIndex`: the local default behaves as it always did); for PostgreSQL, one engine serves
all three.

`open_stores`: the three seams of one agent, wired the same way, with `str` refs on both
kinds (the seams' contract tests, the benchmark, the CLI).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core._failures import FailureLog
from ..core._tenant import Tenant
from ..core.config._config import ContextConfig
from ._retention import RetentionDays, RetentionReport, local_retention
from ._steps_file import StepFile, StepSeam
from .memory_seam import MemorySeam
from .seams import DialogSeam, OutputSeam, RangedSource, SearchSeam

__all__ = ["Backend", "Stores", "open_backend", "open_stores"]

OnSaved = Callable[[Any], None]
"""Called with the ref of each saved output (locally its `Path`)."""


@dataclass
class Backend:
    """The storage of one manager (see the module docstring)."""

    kind: str
    search: SearchSeam
    """The search index, shared by the manager's agents."""
    make_dialog: Callable[[Mapping[str, str] | None, Callable[[], None] | None], DialogSeam]
    make_outputs: Callable[[str | None, str | None, OnSaved | None, Tenant | None], OutputSeam]
    close: Callable[[], None]
    store_dir: Path | None = None
    """The local ``tool_result/`` directory (`None` for a store that is not files)."""
    dialog_days: str | None = None
    """How the summary's guide names the dialog's days (`None`: the local day files)."""
    sources: list[Callable[[str, Tenant | None], RangedSource | None]] = field(default_factory=list)
    """What `read_file` reads a ref of this store with, besides files, as a tenant sees it
    (`None`: not ours)."""
    memory: Callable[[str], MemorySeam] | None = None
    """The long-term memory of an agent, by its name, one per agent on every worker (`None`:
    the working directory's ``memory/``, shared by the manager's agents)."""
    memory_agents: Callable[[], list[str]] | None = None
    """The agents that have a long-term memory in the store (`None`: not per agent)."""
    steps: StepSeam | None = None
    """Where each pipeline run is recorded for the session viewer (`None`: not recorded)."""
    scope: tuple[str, ...] = ()
    """What the outputs' retention covers, one cleanup per process for the managers on it
    (`services._cleanup`): the ``tool_result/`` directory, or the database and schema."""
    retention: Callable[[float], RetentionReport] | None = None
    """Retention of the other kinds (`RetentionConfig`: dialog, memory, steps), as of a time
    (epoch seconds), run after the outputs' cleanup (`None`: none configured)."""

    def dialog(
        self,
        record_fields: Mapping[str, str] | None = None,
        on_append: Callable[[], None] | None = None,
    ) -> DialogSeam:
        """A dialog store writing `record_fields` (agent, session) on each record."""
        return self.make_dialog(record_fields, on_append)

    def outputs(
        self,
        agent: str | None = None,
        session: str | None = None,
        on_saved: OnSaved | None = None,
        tenant: Tenant | None = None,
    ) -> OutputSeam:
        """An output store saving for `agent` in `session` (`on_saved(ref)` after each save),
        reading (and cleaning up) what `tenant` sees (`None`: every output)."""
        return self.make_outputs(agent, session, on_saved, tenant)

    def source(self, ref: str, tenant: Tenant | None = None) -> RangedSource | None:
        """The store `read_file` reads `ref` from, when it is not a file, showing what
        `tenant` may see (`None`: everything)."""
        for find in self.sources:
            found = find(ref, tenant)
            if found is not None:
                return found
        return None


def open_backend(config: ContextConfig, *, failures: FailureLog | None = None) -> Backend:
    """The storage `config.store` names. Nothing is connected or created until first use;
    for ``postgres``, psycopg is imported then."""
    days = RetentionDays.of(config)
    retention = days.outputs if days.outputs is not None else float("inf")  # 0: forever
    if config.store.kind == "postgres":
        from .postgres import (
            PostgresDialogStore,
            PostgresOutputStore,
            PostgresSearchIndex,
        )
        from .postgres._dialog import GUIDE, day_ref
        from .postgres._engine import engine_of
        from .postgres._memory import PostgresMemoryDocs, memory_agents
        from .postgres._outputs import output_id
        from .postgres._retention import pg_retention
        from .postgres._steps import PostgresStepLog

        assert config.store.dsn is not None  # the config refuses postgres without one
        engine = engine_of(config)  # the process's connections to the DSN, whatever the managers
        pg_search = PostgresSearchIndex(engine, failures=failures)
        return Backend(
            kind="postgres",
            search=pg_search,
            make_dialog=lambda fields, on_append: PostgresDialogStore(
                engine, record_fields=fields, on_append=on_append
            ),
            make_outputs=lambda agent, session, on_saved, tenant: PostgresOutputStore(
                engine, retention, agent=agent, session=session, on_saved=on_saved, tenant=tenant
            ),
            close=engine.close,
            dialog_days=GUIDE,
            steps=PostgresStepLog(engine),
            sources=[
                lambda ref, tenant: (
                    PostgresOutputStore(engine, retention, tenant=tenant)
                    if output_id(ref) is not None
                    else None
                ),
                lambda ref, tenant: (
                    PostgresDialogStore(engine, tenant=tenant) if day_ref(ref) is not None else None
                ),
            ],
            memory=lambda agent: PostgresMemoryDocs(engine, agent),
            memory_agents=lambda: memory_agents(engine),
            scope=("postgres", config.store.dsn, config.store.schema_name),
            retention=_others(days, lambda d, now: pg_retention(engine, d, now=now)),
        )

    from ._dialog import DialogStore
    from ._keys_local import migrate_keys
    from ._search import SearchIndex
    from ._tool_results import ToolResultStore

    working_dir = Path(config.working_dir).resolve()
    migrate_keys(working_dir)  # (once: a working dir of agent keys of version 1)
    search = SearchIndex(working_dir, failures=failures)
    return Backend(
        kind="local",
        search=search,
        make_dialog=lambda fields, on_append: DialogStore(
            working_dir, record_fields=fields, on_append=on_append
        ),
        make_outputs=lambda agent, session, on_saved, tenant: ToolResultStore(
            working_dir, retention, on_saved=on_saved, owner=(agent or "", session or "")
        ),
        close=search.close,
        store_dir=(working_dir / "tool_result").resolve(),
        steps=StepFile(working_dir),
        scope=("local", str((working_dir / "tool_result").resolve())),
        retention=_others(
            days, lambda d, now: local_retention(working_dir, d, now=now, search=search)
        ),
    )


def _others(
    days: RetentionDays, run: Callable[[RetentionDays, float], RetentionReport]
) -> Callable[[float], RetentionReport] | None:
    """The retention of the kinds other than outputs (theirs is the store's `cleanup`)."""
    others = replace(days, outputs=None)
    if others == RetentionDays():
        return None
    return lambda now: run(others, now)


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
    """The dialog store, output store and search index `config.store` names, for `agent`:
    what they save names the agent (and `session`) and is indexed at once. Refs are `str`.

    Nothing is connected or created until first use; for ``postgres``, psycopg is imported
    then.
    """
    from ._tool_results import ToolResultStore
    from .local import LocalOutputStore

    fields = {"agent": agent or "", "session": session or ""}
    backend = open_backend(config, failures=failures)
    search = backend.search

    def saved(ref: str | os.PathLike[str]) -> None:
        search.output_saved(os.fspath(ref), agent=agent, session=session)

    outputs = backend.outputs(agent, session, saved)
    if isinstance(outputs, ToolResultStore):  # the local store: its refs as `str`
        outputs = LocalOutputStore(outputs)
    return Stores(backend.dialog(fields, search.dialog_appended), outputs, search, backend.close)
