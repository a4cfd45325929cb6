"""The PostgreSQL store's engine: secrets never shown, schema made once by racing workers, the
`store` config section, an unreachable database, and a cheap import."""

from __future__ import annotations

import asyncio
import logging
import threading
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from agentscope_ctx.core._errors import ConfigError, OffloadError, PersistenceError
from agentscope_ctx.core._failures import FailureLog
from agentscope_ctx.core.config._config import ContextConfig, StoreConfig
from agentscope_ctx.stores.postgres import (
    PostgresDialogStore,
    PostgresEngine,
    PostgresOutputStore,
    PostgresSearchIndex,
)
from agentscope_ctx.stores.postgres._schema import SCHEMA_VERSION
from tests.fleet.postgres_server import PASSWORD, PostgresServer
from tests.support.forked import Forker
from tests.support.lines import Msg

ENV = "AGENTSCOPE_CTX_TEST_PGPASSWORD"


def _refusal(engine: PostgresEngine) -> PersistenceError:
    """The error `engine` raises on connecting (it must raise one)."""
    with pytest.raises(PersistenceError) as info:
        with engine.connection():
            pass
    return info.value


def _msg(msg_id: str, text: str) -> Msg:
    msg = Msg("user", text, "user")
    msg.id = msg_id
    return msg


@given(
    password=st.text(alphabet=st.characters(codec="ascii", exclude_characters="\x00"), min_size=4)
)
@example(password="scop")  # in any engine's repr ("agentscope_ctx"): not shown by knowing it
def test_an_engine_never_shows_a_password_it_knows(password: str) -> None:
    assume(password not in repr(PostgresEngine("host=nowhere")))
    quoted = password.replace("\\", "\\\\").replace("'", "\\'")
    engine = PostgresEngine(f"host=nowhere password='{quoted}'")
    assert password not in repr(engine) and "nowhere" not in repr(engine)
    text = engine.scrub(f"libpq said: bad option near {password}")
    assert password not in text


def test_wrong_password_error_and_logs_never_show_it(
    pg_server: PostgresServer,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    wrong = "Wr0ng-'pw\\secret"
    monkeypatch.setenv(ENV, wrong)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    engine = PostgresEngine(pg_server.dsn, password_env=ENV, schema=pg_schema)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(PersistenceError) as info:
        asyncio.run(PostgresDialogStore(engine).append([_msg("m", "x")]))
    assert "password authentication failed" in str(info.value)
    with pytest.raises(OffloadError) as saved:
        PostgresOutputStore(engine, 7).save("text")
    failures = FailureLog()
    index = PostgresSearchIndex(engine, failures=failures)
    index.dialog_appended()  # never raises: logged once
    for text in (str(info.value), repr(info.value), str(saved.value), caplog.text):
        assert wrong not in text and PASSWORD not in text
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert "search index not updated" in caplog.text


def test_a_password_inline_in_the_dsn_is_scrubbed_from_errors(
    pg_server: PostgresServer, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    engine = PostgresEngine(f"{pg_server.dsn} password=Inline-Secret9", schema=pg_schema)
    engine.close()
    shown = str(_refusal(engine))
    assert "Inline-Secret9" not in shown and "password authentication failed" in shown
    assert str(pg_server.root) not in shown
    # a DSN libpq cannot parse is echoed by libpq: never shown
    broken = PostgresEngine("host=x password=Inline-Secret9 nonsense", schema=pg_schema)
    assert "Inline-Secret9" not in str(_refusal(broken))


def test_the_password_comes_from_pgpassword_too(
    pg_server: PostgresServer, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    engine = PostgresEngine(pg_server.dsn, schema=pg_schema)
    dialog = PostgresDialogStore(engine)
    assert asyncio.run(dialog.append([_msg("p", "via PGPASSWORD")])) == 1


def test_a_missing_password_variable_is_named_not_shown(
    pg_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_PW", raising=False)
    engine = PostgresEngine(pg_server.dsn, password_env="NO_SUCH_PW")
    assert "'NO_SUCH_PW' is not set" in str(_refusal(engine))


def test_workers_racing_on_a_new_schema_make_it_once(
    pg_server: PostgresServer, pg_password: str, pg_schema: str
) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def start(n: int) -> None:
        engine = PostgresEngine(pg_server.dsn, password_env=ENV, schema=pg_schema)
        try:
            barrier.wait()
            asyncio.run(PostgresDialogStore(engine).append([_msg(f"r{n}", "race")]))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            engine.close()

    threads = [threading.Thread(target=start, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    engine = PostgresEngine(pg_server.dsn, password_env=ENV, schema=pg_schema)
    with engine.connection() as conn:
        rows = conn.execute(f"SELECT version FROM {pg_schema}.schema_version").fetchall()
    assert rows == [(SCHEMA_VERSION,)]  # one row: made once
    assert len(PostgresDialogStore(engine).ids()) == 6


def test_a_newer_schema_is_refused(
    pg_server: PostgresServer, pg_password: str, pg_schema: str
) -> None:
    engine = PostgresEngine(pg_server.dsn, password_env=ENV, schema=pg_schema)
    with engine.connection() as conn:
        conn.execute(f"INSERT INTO {pg_schema}.schema_version (version) VALUES (99)")
    fresh = PostgresEngine(pg_server.dsn, password_env=ENV, schema=pg_schema)
    assert "schema is version 99" in str(_refusal(fresh))


def test_the_whole_output_is_not_loaded_by_a_ranged_read_and_the_check_can_tell(
    pg_server: PostgresServer, pg_password: str, pg_schema: str
) -> None:
    """The memory bound of the contract test would catch a store that fetched it whole."""
    outputs = PostgresOutputStore(
        PostgresEngine(pg_server.dsn, password_env=ENV, schema=pg_schema), 7
    )
    ref = outputs.save(b"x" * (24 << 20))
    tracemalloc.start()
    try:
        outputs.read_range(ref, 20 << 20, 10)
        _, ranged = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        outputs.read_range(ref, 0, 24 << 20)  # what loading it whole costs
        _, whole = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ranged < (2 << 20) < (24 << 20) <= whole


def test_an_unreachable_database_raises_store_errors_and_the_index_never_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "pw-never-shown")
    engine = PostgresEngine(
        f"host={tmp_path} port=1 user=x dbname=x", password_env=ENV, connect_timeout=2
    )
    with pytest.raises(PersistenceError):
        asyncio.run(PostgresDialogStore(engine).append([_msg("u", "x")]))
    with pytest.raises(OffloadError):
        PostgresOutputStore(engine, 7).save("kept whole by the caller")
    index = PostgresSearchIndex(engine)
    index.output_saved("pg-output:" + "0" * 32, agent="a")
    index.dialog_appended()
    index.drop_outputs(["pg-output:" + "0" * 32])
    assert PostgresOutputStore(engine, 7).read_saved("pg-output:" + "0" * 32) is None
    assert PostgresOutputStore(engine, 7).cleanup([]) == []


# -- config ------------------------------------------------------------------------------------


def test_store_config_defaults_to_local() -> None:
    assert ContextConfig().store == StoreConfig(kind="local")


@pytest.mark.parametrize(
    ("store", "field", "fragment"),
    [
        ({"kind": "postgres"}, "store.dsn", "required"),
        ({"kind": "sqlite"}, "store.kind", "local"),
        (
            {"kind": "postgres", "dsn": "host=db", "schema_name": "Bad-Name"},
            "store.schema_name",
            "identifier",
        ),
        (
            {"kind": "postgres", "dsn": "host=db", "password_env": "1 X"},
            "store.password_env",
            "variable",
        ),
        ({"kind": "postgres", "dsn": "   "}, "store.dsn", "connection string"),
        (
            {"kind": "postgres", "dsn": "host=db", "connect_timeout_seconds": 0},
            "store.connect_timeout_seconds",
            "greater",
        ),
    ],
)
def test_bad_store_config_names_the_field(store: dict, field: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment) as info:
        ContextConfig(store=store)
    assert info.value.field == field


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://bob:Top-Secret1@db/app",
        "host=db password=Top-Secret1",
        "host=db PASSWORD='Top-Secret1'",
    ],
)
def test_a_password_in_the_config_is_refused_without_repeating_it(dsn: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        ContextConfig(store={"kind": "postgres", "dsn": dsn})
    assert info.value.field == "store.dsn" and "Top-Secret1" not in str(info.value)
    path = tmp_path / "c.yaml"
    path.write_text(f'store:\n  kind: postgres\n  dsn: "{dsn}"\n')
    with pytest.raises(ConfigError) as from_file:
        ContextConfig.from_yaml(path)
    assert "Top-Secret1" not in str(from_file.value)
    config = ContextConfig(store={"kind": "postgres", "dsn": "host=db"})
    with pytest.raises(ConfigError) as assigned:
        config.store.dsn = dsn
    assert "Top-Secret1" not in str(assigned.value) and config.store.dsn == "host=db"


def test_importing_the_stores_does_not_import_psycopg(forker: Forker, tmp_path: Path) -> None:
    code = (
        "import sys, agentscope_ctx, agentscope_ctx.stores.factory, agentscope_ctx.stores.local, "
        "agentscope_ctx.stores.postgres; print('psycopg' in sys.modules)"
    )
    out = forker.run(["-c", code], cwd=tmp_path)  # a fresh interpreter after import agentscope
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


# -- tokens ------------------------------------------------------------------------------------


@given(text=st.text(max_size=300))
def test_the_fast_tokens_are_the_search_texts_tokens(text: str) -> None:
    from agentscope_ctx.core.search._search_text import index_text, tokens
    from agentscope_ctx.stores.postgres._search_sql import lexemes

    assert lexemes(text) == tokens(index_text(text))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(text=st.text(alphabet=st.characters(codec="ascii"), max_size=400))
@example(text="1e5 0x1F 1.5 a-b foo_bar v1.2.3 x@y.com http://h/p 12345678901234567890 ÿ")
@example(text="0E0A")  # the parser splits it (0e0, a): such a chunk is sent as our literal
def test_ascii_chunks_indexed_by_postgres_parser_equal_our_tokens(
    pg_server: PostgresServer, pg_password: str, pg_schema: str, text: str
) -> None:
    """Where `chunk_row` lets the server's parser split a chunk's words, it splits them as we do."""
    from agentscope_ctx.core.search._search_text import Chunk
    from agentscope_ctx.stores.postgres._rows import chunk_row
    from agentscope_ctx.stores.postgres._search_sql import tsvector_text

    words = chunk_row("dialog", "d", Chunk(1, 0, text), ())[6]
    if words is None:  # sent as our own tsvector literal
        return
    engine = PostgresEngine(pg_server.dsn, password_env=ENV, schema=pg_schema)
    with engine.connection() as conn:
        ours, theirs = conn.execute(
            "SELECT %s::tsvector, to_tsvector('simple', %s::text)", (tsvector_text(text), words)
        ).fetchone()
    engine.close()
    assert ours == theirs
