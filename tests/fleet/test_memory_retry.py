"""A memory write whose transaction the server aborts for the others' sake (a deadlock, a
serialization failure) is run again, not lost.

Two workers' `remember` and the memory's indexing, on one PostgreSQL store, once ended in
"cannot save to pg-memory:MEMORY.md ... deadlock detected (SQLSTATE 40P01)" under load
(`test_memory.py::test_remember_on_two_workers_keeps_every_fact`): the fact was lost, the model
told so. PostgreSQL's rule for both errors is to run the transaction again. Here the real
server raises them, on the first one or two updates of the document, from a trigger counting
with a sequence (a sequence is not rolled back with the aborted transaction).
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from agentscope_ctx.core._errors import PersistenceError
from agentscope_ctx.stores.memory_seam import MEMORY_DOC
from agentscope_ctx.stores.postgres._engine import engine_of
from agentscope_ctx.stores.postgres._memory import PostgresMemoryDocs
from tests.fleet.pg_config import PgStore
from tests.fleet.postgres_server import PASSWORD


def _abort_updates(pg_store: PgStore, times: int, sqlstate: str) -> None:
    """The next `times` updates of a memory document fail on the server with `sqlstate`."""
    s = pg_store.schema
    with psycopg.connect(pg_store.server.dsn, password=PASSWORD, autocommit=True) as conn:
        conn.execute(f"CREATE SEQUENCE {s}.aborts")
        conn.execute(
            f"""CREATE FUNCTION {s}.abort_update() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF nextval('{s}.aborts') <= {times} THEN
                    RAISE EXCEPTION 'aborted by the test' USING ERRCODE = '{sqlstate}';
                END IF;
                RETURN NEW;
            END $$"""
        )
        conn.execute(
            f"CREATE TRIGGER abort_update BEFORE UPDATE ON {s}.memory_docs "
            f"FOR EACH ROW EXECUTE FUNCTION {s}.abort_update()"
        )


def _docs(pg_store: PgStore, tmp_path: Path) -> PostgresMemoryDocs:
    docs = PostgresMemoryDocs(engine_of(pg_store.config(tmp_path)), "alice/assistant")
    docs.update(MEMORY_DOC, lambda current: "# Memory\n")  # the schema and the row made
    return docs


@pytest.mark.parametrize("sqlstate", ["40P01", "40001"])
def test_a_write_the_server_aborted_is_run_again(
    tmp_path: Path, pg_store: PgStore, sqlstate: str
) -> None:
    docs = _docs(pg_store, tmp_path)
    _abort_updates(pg_store, 2, sqlstate)
    assert docs.update(MEMORY_DOC, lambda current: current + "- the user prefers pytest\n")
    assert docs.read(MEMORY_DOC) == "# Memory\n- the user prefers pytest\n"
    docs.append("2026-12-06.md", lambda current: "- a note\n")
    assert docs.read("2026-12-06.md") == "- a note\n"


def test_a_write_aborted_every_time_says_so_and_changes_nothing(
    tmp_path: Path, pg_store: PgStore
) -> None:
    docs = _docs(pg_store, tmp_path)
    _abort_updates(pg_store, 1_000, "40P01")
    with pytest.raises(PersistenceError, match=r"cannot write .MEMORY\.md. of the memory"):
        docs.update(MEMORY_DOC, lambda current: current + "- lost\n")
    assert docs.read(MEMORY_DOC) == "# Memory\n"


def test_any_other_error_is_not_run_again(tmp_path: Path, pg_store: PgStore) -> None:
    docs = _docs(pg_store, tmp_path)
    _abort_updates(pg_store, 1, "23514")  # check_violation: running it again cannot help
    calls: list[str] = []

    def change(current: str) -> str:
        calls.append(current)
        return current + "- once\n"

    with pytest.raises(PersistenceError):
        docs.update(MEMORY_DOC, change)
    assert calls == ["# Memory\n"]
