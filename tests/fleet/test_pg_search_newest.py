"""The PostgreSQL search ranks a bounded set, the newest matches of the caller's own chunks
(`_search_sql.ranked_sql`, `CANDIDATES`), and schema 3 indexes each owner's chunks newest
first: an older schema gets the index in place. Real PostgreSQL (`tests/fleet/conftest`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentscope_ctx import ContextConfig
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.stores.factory import open_stores
from agentscope_ctx.stores.postgres import _search_sql


def _config(tmp_path: Path, pg_server: Any, pg_schema: str) -> ContextConfig:
    store = {
        "kind": "postgres",
        "dsn": pg_server.dsn,
        "password_env": "AGENTSCOPE_CTX_TEST_PGPASSWORD",
        "schema_name": pg_schema,
    }
    return ContextConfig(working_dir=tmp_path, store=store)


def _text(hit: Any) -> str:
    return "\n".join(text for _, text in hit.lines)


def _lines(word: str, chunks: int) -> str:
    """An output of `chunks` index chunks (16 lines each), `word` on every line."""
    return "".join(f"{n:06d} {word} filler line\n" for n in range(chunks * 16))


def test_an_old_hit_of_the_caller_is_found_under_newer_matches_of_others(
    tmp_path: Path, pg_server: Any, pg_password: str, pg_schema: str, monkeypatch: Any
) -> None:
    """More chunks than a search ranks match the word, all newer and another session's: the
    caller's own old chunk is still its hit (its filters choose the candidates, not after)."""
    monkeypatch.setattr(_search_sql, "CANDIDATES", 20)
    config = _config(tmp_path, pg_server, pg_schema)
    mine = open_stores(config, agent="bench", session="s1")
    other = open_stores(config, agent="bench", session="s2")
    try:
        mine.outputs.save("the needle is here: sharedword once\n")
        other.outputs.save(_lines("sharedword", 60))
        other.search.catch_up()
        as_mine = Filters(tenant=Tenant.of("bench", "s1"))
        hits = mine.search.search("sharedword", as_mine, limit=5).hits
        assert [_text(h) for h in hits] == ["the needle is here: sharedword once"]
        # the other session sees its newest ones, not the caller's
        hits = other.search.search("sharedword", Filters(session="s2"), limit=3).hits
        assert len(hits) == 3 and all("needle" not in _text(h) for h in hits)
    finally:
        mine.close()
        other.close()


def test_the_candidates_are_the_newest_matches(
    tmp_path: Path, pg_server: Any, pg_password: str, pg_schema: str, monkeypatch: Any
) -> None:
    """A word in more chunks than `CANDIDATES`: the hits come from the newest ones (the
    oldest output's chunks are not ranked), and a rarer word still finds the oldest."""
    monkeypatch.setattr(_search_sql, "CANDIDATES", 16)
    config = _config(tmp_path, pg_server, pg_schema)
    stores = open_stores(config, agent="bench", session="s1")
    try:
        stores.outputs.save(_lines("commonword oldestonly", 20))
        stores.outputs.save(_lines("commonword", 20))
        stores.search.catch_up()
        hits = stores.search.search("commonword", limit=5).hits
        assert len(hits) == 5 and not any("oldestonly" in _text(h) for h in hits)
        hits = stores.search.search("oldestonly", limit=5).hits
        assert len(hits) == 5 and all("oldestonly" in _text(h) for h in hits)
    finally:
        stores.close()


def test_a_version_2_schema_gets_the_newest_first_index(
    tmp_path: Path, pg_server: Any, pg_password: str, pg_schema: str
) -> None:
    """Schema 3: a store made by version 2 (an index of owners without the order) is brought
    up to 3 by the first worker that opens it; what it held is still found."""
    import psycopg

    from agentscope_ctx.stores.postgres._schema import _DDL, _TENANTS, SCHEMA_VERSION

    s = pg_schema
    with psycopg.connect(pg_server.dsn, password=pg_password, autocommit=True) as conn:
        conn.execute("SELECT set_config('agentscope_ctx.scope', 'all', false)")
        conn.execute(_DDL.format(s=s))  # version 2's tables, as version 2 made them
        conn.execute(_TENANTS.format(s=s))
        conn.execute(f"CREATE INDEX chunks_by_owner ON {s}.chunks (agent, session)")
        conn.execute(f"INSERT INTO {s}.schema_version (version) VALUES (2)")
        conn.execute(
            f"INSERT INTO {s}.chunks (kind, source, start_line, line_offset, body, terms, "
            "agent, session, role) VALUES ('tool_result', 'pg-output:x', 1, 0, "
            "'kept from version two', to_tsvector('simple', 'kept from version two'), "
            "'bench', 's1', 'tool')"
        )
    stores = open_stores(_config(tmp_path, pg_server, s), agent="bench", session="s1")
    try:
        hits = stores.search.search("version two", limit=5).hits
        assert [_text(h) for h in hits] == ["kept from version two"]
        with stores.search.engine.connection() as conn:  # type: ignore[attr-defined]
            versions = conn.execute(f"SELECT version FROM {s}.schema_version").fetchall()
            indexes = conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s "
                "AND tablename = 'chunks' ORDER BY indexname",
                (s,),
            ).fetchall()
        assert max(v for (v,) in versions) == SCHEMA_VERSION == 8
        names = {name: sql for name, sql in indexes}
        assert "chunks_by_owner" not in names
        assert names["chunks_by_owner_id"].endswith("(agent, session, id)")
        with stores.search.engine.connection() as conn:  # type: ignore[attr-defined]
            methods = conn.execute(
                "SELECT a.attname, a.attcompression FROM pg_attribute AS a "
                "WHERE a.attrelid = %s::regclass AND a.attname IN ('body', 'terms') "
                "ORDER BY a.attname",
                (f"{s}.chunks",),
            ).fetchall()
        assert methods == [("body", "l"), ("terms", "l")]  # lz4 (this server has it)
    finally:
        stores.close()


def test_the_ranked_query_names_only_the_filters_given() -> None:
    """The SQL holds a condition for each filter given and none for the others (a plan
    fitted to them: no ``IS NULL OR`` the planner cannot see through)."""
    sql = _search_sql.ranked_sql("s", {"t_agent", "t_session"})
    assert "c.agent = %(t_agent)s" in sql and "c.session = %(t_session)s" in sql
    assert "%(role)s" not in sql and "%(since)s" not in sql and "IS NULL OR" not in sql
