"""`open_backend`, what a manager's storage is made of: locally today's classes themselves
(so the local default behaves as it always did), each fitting its seam; on PostgreSQL the
three seams on one engine, and `read_file`'s route to refs that are not files."""

from __future__ import annotations

from pathlib import Path

from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._search import SearchIndex
from agentscope_ctx.stores._tool_results import ToolResultStore
from agentscope_ctx.stores.factory import open_backend
from agentscope_ctx.stores.seams import DialogSeam, OutputSeam, SearchSeam
from tests.fleet.pg_config import PgStore


def test_the_local_backend_is_todays_classes_and_they_fit_the_seams(tmp_path: Path) -> None:
    backend = open_backend(ContextConfig(working_dir=tmp_path))
    seen: list[object] = []
    outputs, dialog = backend.outputs("a1", None, seen.append), backend.dialog({"agent": "a1"})
    assert type(outputs) is ToolResultStore and isinstance(outputs, OutputSeam)
    assert type(dialog) is DialogStore and isinstance(dialog, DialogSeam)
    assert type(backend.search) is SearchIndex and isinstance(backend.search, SearchSeam)
    ref = outputs.save("one\ntwo\n")
    assert seen == [ref] and backend.store_dir == ref.parent  # today's Path, today's dir
    assert backend.source(str(ref)) is None  # read_file reads it as a file, as today
    assert backend.dialog_days is None  # the guide names dialog/ as today
    backend.close()


def test_the_postgres_backend_routes_its_refs_to_its_stores(
    tmp_path: Path, pg_store: PgStore
) -> None:
    config = ContextConfig(
        working_dir=tmp_path,
        store=pg_store.fields(),
    )
    backend = open_backend(config)
    outputs = backend.outputs("a1", None, None)
    assert isinstance(outputs, OutputSeam) and isinstance(backend.search, SearchSeam)
    assert isinstance(backend.dialog(), DialogSeam)
    ref = outputs.save("one\ntwo\n")
    assert isinstance(ref, str) and ref.startswith("pg-output:")
    assert backend.source(ref) is not None and backend.source("pg-dialog:2026-12-02")
    assert backend.source(str(tmp_path / "x.txt")) is None  # files stay files
    assert backend.source("pg-dialog:2026-13-45") is None  # not a day
    assert backend.store_dir is None and backend.dialog_days == "pg-dialog:YYYY-MM-DD"
    assert not list(tmp_path.iterdir())  # nothing under working_dir
    backend.close()
