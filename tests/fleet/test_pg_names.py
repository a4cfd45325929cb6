"""A NUL or a lone surrogate in a session id or an agent name (issue 29 item 7).

PostgreSQL's text takes neither, and every dialog write of such an agent failed (0 rows,
nothing found; the local store wrote them all). A config refuses both, naming the field; a
name given at run time (an agent's own name is not config) is stored escaped, reversibly
(`stores.postgres._names`), so the writes succeed and reads and searches find them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentscope_ctx._agent_config import AgentSection
from agentscope_ctx.core._errors import ConfigError
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.stores.factory import open_stores
from agentscope_ctx.stores.postgres._names import MARK, db_name, name_from_db
from tests.fleet.postgres_server import PostgresServer
from tests.support.lines import Msg

ENV = "AGENTSCOPE_CTX_TEST_PGPASSWORD"


@given(name=st.text(), other=st.text())
@example(name="bot\x00", other="bot\ud800")
@example(name=MARK + "x", other=MARK + MARK + "x")
@example(name="a\\0000", other="a\x00")
def test_a_stored_name_is_storable_one_to_one_and_reads_back(name: str, other: str) -> None:
    stored = db_name(name)
    assert stored is not None and "\x00" not in stored
    stored.encode("utf-8")  # no lone surrogate
    assert name_from_db(stored) == name
    assert (db_name(other) == stored) == (other == name)
    if "\x00" not in name and MARK not in name[:1] and name == db_name(name):
        assert not any("\ud800" <= c <= "\udfff" for c in name)


@pytest.mark.parametrize("bad", ["s\x00ess", "s\ud800ess"])
def test_a_config_refuses_a_nul_or_a_lone_surrogate_naming_the_field(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"NUL|surrogate") as info:
        ContextConfig(recall={"session": bad})
    assert info.value.field == "recall.session"
    with pytest.raises(ConfigError, match=r"NUL|surrogate|unicode") as named:
        AgentSection(name=bad)
    assert named.value.field == "name"


@pytest.mark.parametrize(
    ("agent", "session"),
    [("bot\x00x", "s-1"), ("bot", "s\ud800x"), ("b\udcff\x00", "s\x00\\0000")],
)
def test_odd_names_given_at_run_time_are_written_and_found(
    tmp_path: Path,
    pg_server: PostgresServer,
    pg_password: str,
    pg_schema: str,
    agent: str,
    session: str,
) -> None:
    store = {"kind": "postgres", "dsn": pg_server.dsn, "password_env": ENV}
    config = ContextConfig(working_dir=tmp_path, store={**store, "schema_name": pg_schema})
    stores = open_stores(config, agent=agent, session=session)
    # a neighbour whose names collapse to the same text if the odd characters were replaced
    plain = open_stores(config, agent="bot\ufffdx", session="s\ufffdx")
    try:
        msgs = [Msg("user", f"the wombat number {n}", "user") for n in range(12)]
        assert asyncio.run(stores.dialog.append(msgs)) == 12
        assert asyncio.run(plain.dialog.append([Msg("user", "a wombat next door", "user")])) == 1
        ref = stores.outputs.save("the wombat log\n")
        read, _ = stores.dialog.read()
        assert [m.id for m in read][:12] == [m.id for m in msgs]
        found = stores.search.search(
            "wombat", Filters(agent=agent, session=session), limit=20, catch_up_seconds=None
        )
        paths = {str(hit.path) for hit in found.hits}
        assert len(found.hits) == 13 and ref in paths, found.hits
        assert {hit.agent for hit in found.hits} == {agent}
        texts = [line for hit in found.hits for _, line in hit.lines]
        assert not any("next door" in text for text in texts)
    finally:
        stores.close()
        plain.close()
