"""Schema 4 keeps a saved output a row per block (`stores/postgres/_blocks`): the chunks a
search reads back from a block's bytes are the chunks of the output, whatever its lines
(Hypothesis); a phrase is checked on them; a schema-3 store (a row per chunk, its text in the
row) is indexed again in the background and every fact is still found, at the same line.
Real PostgreSQL (`tests/fleet/conftest`)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import agentscope_ctx.core.search._background as background_module
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.search._index_pieces import piece_lines
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.core.search._search_text import chunk_lines
from agentscope_ctx.stores.factory import Stores, open_stores
from agentscope_ctx.stores.postgres import _blocks
from agentscope_ctx.stores.postgres._rows import chunk_row
from agentscope_ctx.stores.postgres._search_sql import MAX_LEXEME, db_text, lexemes, query_needles
from tests.fleet.pg_config import PgStore
from tests.fleet.test_store_contract import make_msg

_PARTS = st.sampled_from(
    [b"word ", b"alpha beta ", b"\xe6\x95\xb0\xe6\x8d\xae\xe5\xba\x93", b"caf\xc3\xa9 ", b" ",
     b"\n", b"\n", b"\r\n", b"\r", b"\xff", b"\x00", b"x" * 700, b"long " * 300]
)  # fmt: skip


@given(
    parts=st.lists(_PARTS, max_size=120),
    block=st.sampled_from([2_100, 5_000, 9_000]),
    most=st.sampled_from([10, 12, 256]),  # (a line of 9,000 characters: 9 pieces at most)
    start=st.integers(0, 1 << 30),
    first=st.integers(1, 10_000),
)
@example(parts=[b"long " * 300] * 12 + [b"\xff"] + [b"long " * 300] * 4, block=5_000,
         most=256, start=0, first=1)  # fmt: skip
@example(parts=[b"word \n"] * 128 + [b"long " * 300] * 3 + [b"\n"], block=9_000, most=10,
         start=0, first=1)  # fmt: skip
def test_a_blocks_bytes_give_back_its_chunks(
    parts: list[bytes], block: int, most: int, start: int, first: int
) -> None:
    """Every block's bytes, read back, cut into the chunks of the output it holds, in order
    (long lines in pieces, exact or not, ``\\r\\n``, bad bytes), `most` at most; its tokens
    are theirs, each with the chunks it is in as its positions (the second example: a line
    whose pieces would make the block too many chunks begins the next block)."""
    data = b"".join(parts)
    with (
        mock.patch.object(_blocks, "BLOCK_CHARS", block),
        mock.patch.object(_blocks, "BLOCK_CHUNKS", most),
    ):
        blocks = _blocks.cut_blocks(data, start, first)
    got = []
    for b in blocks:
        assert start <= b.byte_start < b.byte_end <= start + len(data)
        chunks = _blocks.block_chunks(data[b.byte_start - start : b.byte_end - start], b)
        assert len(chunks) == b.count <= most
        where: dict[str, set[int]] = {}
        for number, c in enumerate(chunks, start=1):
            for w in lexemes(db_text(c.text)):
                where.setdefault(f"'{w[:MAX_LEXEME]}'", set()).add(number)
        terms: dict[str, set[int]] = {}
        for entry in b.terms.split():
            word, at = entry.rsplit(":", 1)
            terms.setdefault(word, set()).update(map(int, at.split(",")))
        assert terms == where
        got.extend(chunks)
    assert got == list(chunk_lines(piece_lines(data), first))


@pytest.fixture
def no_background(monkeypatch: pytest.MonkeyPatch) -> None:
    """No background indexing: the test's own catch-up indexes every output, inside its
    patches (`BLOCK_CHARS`). A save over `INDEX_AT_SAVE_BYTES` starts the background
    indexer, which holds the output's row while it indexes a piece: a catch-up passes over a
    row held (``SKIP LOCKED``) and returns with part of it left (issue 46, a busy machine)."""
    monkeypatch.setattr(background_module, "ENABLED", False)


def _index_all(stores: Stores) -> None:
    """Catch up until nothing is left to index (a catch-up may stop at its deadline)."""
    while stores.search.catch_up():
        pass


def _shown(hit: Any, text: str) -> int | None:
    """The line number the hit shows `text` at."""
    return next((n for n, line in hit.lines if text in line), None)


def test_a_phrase_is_checked_in_the_blocks_chunks(tmp_path: Path, pg_store: PgStore) -> None:
    """A block holds both words of a phrase, apart in one chunk and together in another: the
    phrase's hit is the chunk holding it; a phrase whose words are only apart is not found."""
    lines = [f"{n:05d} filler text here" for n in range(400)]
    lines[20] = "quota first then disk later"
    lines[300] = "ERROR: disk quota exceeded"
    stores = open_stores(pg_store.config(tmp_path), agent="a", session="s")
    try:
        stores.outputs.save("\n".join(lines) + "\n")
        result = stores.search.search('"disk quota"', limit=5)
        assert [_shown(h, "disk quota") for h in result.hits] == [301] and result.every
        assert not stores.search.search('"later quota"', limit=5).hits  # apart only
    finally:
        stores.close()


def _facts(rng: random.Random, count: int) -> list[tuple[str, int, str]]:
    """(fact word, its line, the output's text) of `count` outputs of some blocks each."""
    out = []
    for n in range(count):
        lines = [f"{k:05d} " + " ".join(rng.choice(("log", "row", "value")) for _ in range(8))
                 for k in range(rng.randint(2_000, 6_000))]  # fmt: skip
        at = rng.randrange(len(lines))
        word = f"factword{n}x{at}"
        lines[at] += f" {word}"
        out.append((word, at + 1, "\n".join(lines) + "\n"))
    return out


def test_a_schema_3_store_is_indexed_again_and_finds_every_fact(
    tmp_path: Path, pg_store: PgStore
) -> None:
    """A store as schema 3 left it (a row per chunk of each output, its text in the row) is
    brought up to 4 by the first worker that opens it: its old rows are searched until its
    outputs are indexed again (in pieces), then only blocks are; every fact is found at its
    line all along, and the index is smaller."""
    import psycopg

    s = pg_store.schema
    config = pg_store.config(tmp_path)
    facts = _facts(random.Random(30), 12)
    stores = open_stores(config, agent="a", session="s")
    refs = [stores.outputs.save(text) for _, _, text in facts]
    _index_all(stores)
    stores.close()
    with psycopg.connect(pg_store.server.dsn, password=pg_store.password, autocommit=True) as conn:
        conn.execute("SELECT set_config('agentscope_ctx.scope', 'all', false)")
        conn.execute(f"DELETE FROM {s}.chunks WHERE kind = 'tool_result'")
        conn.execute(
            f"ALTER TABLE {s}.chunks DROP COLUMN byte_start, DROP COLUMN byte_end, "
            "DROP COLUMN byte_skip, DROP COLUMN chunk_count"
        )
        conn.execute(f"DELETE FROM {s}.schema_version WHERE version > 3")
        conn.execute(f"INSERT INTO {s}.schema_version (version) VALUES (3) ON CONFLICT DO NOTHING")
        meta = ("a", "s", "tool", None, None, "2026-12-04 12:00:00")
        for ref, (_, _, text) in zip(refs, facts, strict=True):
            rows = [
                chunk_row("tool_result", ref, chunk, meta)[:13]
                for chunk in chunk_lines(text.split("\n")[:-1])
            ]  # as schema 3 indexed an output: a row per chunk, its text and positions
            with conn.cursor() as cursor:
                cursor.executemany(
                    f"INSERT INTO {s}.chunks (kind, source, start_line, line_offset, body, "
                    "terms, agent, session, role, tool, args, ts) VALUES (%s, %s, %s, %s, "
                    "%s, coalesce(%s::tsvector, to_tsvector('simple', %s::text)), %s, %s, "
                    "%s, %s, %s, %s)",
                    rows,
                )
        old_size = conn.execute(f"SELECT pg_total_relation_size('{s}.chunks')").fetchone()[0]
    mine = Filters(tenant=Tenant.of("a", "s"))
    stores = open_stores(config, agent="a", session="s")
    try:
        for n, (word, line, _) in enumerate(facts):  # the old rows, or the new (background)
            result = stores.search.search(word, mine, limit=5, catch_up_seconds=0)
            assert [_shown(h, word) for h in result.hits] == [line]
            assert result.pending or n  # the first: none indexed again yet
        stores.search.background.close()  # type: ignore[attr-defined]
        _index_all(stores)  # what the background left (its last step may still hold a row)
        for word, line, _ in facts:
            result = stores.search.search(word, mine, limit=5)
            assert [_shown(h, word) for h in result.hits] == [line] and not result.pending
        engine = stores.search.engine  # type: ignore[attr-defined]
        with engine.connection() as conn:
            conn.execute("SELECT set_config('agentscope_ctx.scope', 'all', false)")
            rows = conn.execute(
                f"SELECT count(*) FILTER (WHERE byte_start IS NULL), count(*) FROM {s}.chunks "
                "WHERE kind = 'tool_result'"
            ).fetchone()
            conn.execute(f"VACUUM FULL {s}.chunks")
            size = conn.execute(f"SELECT pg_total_relation_size('{s}.chunks')").fetchone()[0]
        assert rows[0] == 0 and rows[1] >= len(facts)  # blocks only, the chunk rows dropped
        assert size < old_size / 2
    finally:
        stores.close()


def test_a_schema_4_store_gets_the_words_its_parser_split_whole(
    tmp_path: Path, pg_store: PgStore
) -> None:
    """Schema 4 let PostgreSQL's parser split an ASCII chunk's words, and it split ``0e0a7``
    (``0e0`` and ``a7``): the first worker of version 5 makes those chunks' words whole, as
    `tsvector_text` writes them, and leaves every other row and the outputs' indexing alone."""
    import psycopg

    from agentscope_ctx.stores.postgres._search_sql import tsvector_text

    s = pg_store.schema
    config = pg_store.config(tmp_path)
    texts = {
        "split": "build 0E0A7 failed on node 12e3x; build 0E0A7 again",
        "kept": "deploy 1e5 to node a1e5b",
        "other": "数据库 0e0a7 迁移",  # not ASCII: our own literal, always
    }
    stores = open_stores(config, agent="a", session="s")
    asyncio.run(stores.dialog.append([make_msg(k, v) for k, v in texts.items()]))
    stores.outputs.save("an output: 7e7q\n")
    _index_all(stores)  # (one catch-up passes over a row the background indexer holds)
    stores.close()
    with psycopg.connect(pg_store.server.dsn, password=pg_store.password, autocommit=True) as conn:
        conn.execute("SELECT set_config('agentscope_ctx.scope', 'all', false)")
        conn.execute(  # as schema 4 indexed an ASCII chunk: the server's parser
            f"UPDATE {s}.chunks SET terms = to_tsvector('simple', body) "
            "WHERE byte_start IS NULL AND body !~ '[^\\x01-\\x7f]'"
        )
        conn.execute(f"DELETE FROM {s}.schema_version WHERE version > 4")
        conn.execute(f"INSERT INTO {s}.schema_version (version) VALUES (4) ON CONFLICT DO NOTHING")
        before = dict(conn.execute(f"SELECT body, terms::text FROM {s}.chunks").fetchall())
        outputs = conn.execute(f"SELECT id, indexed, indexed_bytes FROM {s}.outputs").fetchall()
    assert "'0e0':2,10" in before[texts["split"]]  # (the split this version mends)
    stores = open_stores(config, agent="a", session="s")
    try:
        for word in ("0E0A7", "12e3x", '"build 0e0a7 failed"', "a1e5b", "7e7q"):
            assert stores.search.search(word).hits, word
    finally:
        stores.close()
    with psycopg.connect(pg_store.server.dsn, password=pg_store.password, autocommit=True) as conn:
        conn.execute("SELECT set_config('agentscope_ctx.scope', 'all', false)")
        after = dict(conn.execute(f"SELECT body, terms::text FROM {s}.chunks").fetchall())
        assert conn.execute(f"SELECT id, indexed, indexed_bytes FROM {s}.outputs").fetchall() == (
            outputs
        )  # not indexed again
        for body in before:
            if body == texts["split"]:
                expected = conn.execute("SELECT %s::tsvector::text", (tsvector_text(body),))
                assert after[body] == expected.fetchone()[0]
            else:
                assert after[body] == before[body], body


_WORDS = st.sampled_from(
    ["error", "err", "timeout", "Café", "cafe", "数据库", "数据", "x" * 300, "w01", "STRASSE",
     "straße", "ﬁle", "file"]
)  # fmt: skip


@given(
    text=st.lists(
        _WORDS | st.sampled_from([" ", "\n", "-", "_", "É", "\u0301", "\u200b", "\x00"]),
        max_size=40,
    ).map("".join),
    terms=st.lists(
        st.tuples(st.lists(_WORDS, min_size=1, max_size=3), st.booleans()), min_size=1, max_size=3
    ),
    every=st.booleans(),
)
@example("the CAFE ok", [(["café"], False)], True)
@example("error-timeout", [(["err"], True), (["timeout"], False)], True)
@example("nai\u0308ve straße", [(["naive", "strasse"], False)], True)
@example("x" * 300 + " error", [(["x" * 300, "error"], False)], True)
def test_a_chunk_passed_over_by_its_text_is_one_its_tokens_do_not_hold(
    text: str, terms: list[tuple[list[str], bool]], every: bool
) -> None:
    """`_blocks._matches` passes over a chunk whose folded text does not hold a needle's
    tokens in order without cutting it in tokens: its answer is the token check's, whatever
    the text and the query (folding: case, ß, ligatures, combining marks; CJK, a long token,
    a prefix, a phrase)."""
    needles = query_needles(
        _blocks.Query(terms=tuple((" ".join(words), prefix) for words, prefix in terms))
    )
    patterns = [_blocks._pattern(needle) for needle, _ in needles]
    text = db_text(text)
    words = [w[:MAX_LEXEME] for w in lexemes(text)]
    found = [_blocks._holds(words, needle, prefix) for needle, prefix in needles]
    assert _blocks._matches(text, needles, patterns, every) == (all(found) if every else any(found))


def _lines_with(hits: Any, word: str) -> list[int | None]:
    return [_shown(h, word) for h in hits]


@pytest.mark.usefixtures("no_background")
def test_a_search_reads_only_the_blocks_its_hits_need(tmp_path: Path, pg_store: PgStore) -> None:
    """A block is read only while the hits are short, and only when a chunk of it has every
    word of the query (its tokens' positions are its chunks): a word in one chunk of each
    block is found reading 5 blocks for 5 hits (28 before: rows, not hits, were counted),
    and words never in one chunk but in one block's are found reading that block alone."""
    lines = [f"{n:05d} " + "filler " * 12 for n in range(6_000)]
    for at in range(100, 6_000, 200):  # one chunk of each block (4 KB: some 60 lines)
        lines[at] += f" needle{at}x needle"
    for at in range(30, 6_000, 60):
        lines[at] += " alpha"
        lines[at + 20] += " beta"  # another chunk
    lines[5_010] += " beta"  # one chunk with both
    stores = open_stores(pg_store.config(tmp_path), agent="a", session="s")
    try:
        with mock.patch.object(_blocks, "BLOCK_CHARS", 4 << 10):
            stores.outputs.save("\n".join(lines) + "\n")
            _index_all(stores)
        with mock.patch.object(_blocks, "_read", wraps=_blocks._read) as read:
            result = stores.search.search("needle", limit=5)
            assert len(result.hits) == 5 and None not in _lines_with(result.hits, "needle")
            assert read.call_count == 5
            read.reset_mock()
            result = stores.search.search("alpha beta", limit=5)
            assert _lines_with(result.hits, "alpha") == [5_011] and result.every
            assert read.call_count == 1
            read.reset_mock()
            assert not stores.search.search('"beta alpha"', limit=5).hits
            assert read.call_count == 1  # the one chunk with both: read, no phrase in it
    finally:
        stores.close()


def test_a_word_in_every_chunk_of_a_block_keeps_all_its_chunks(
    tmp_path: Path, pg_store: PgStore
) -> None:
    """A block holds `BLOCK_CHUNKS` (256) chunks at most: PostgreSQL keeps 256 positions of a
    token, so a word in every chunk has them all, and a fact in the last chunk of an output of
    300 chunks (two blocks) is found with it (with 300 to a block, it was lost)."""
    lines = [f"tick {n}" for n in range(300 * 16)]  # 16 lines to a chunk: 300 chunks
    lines[255 * 16 + 3] += " factone"  # chunk 256: the first block's last
    lines[299 * 16 + 3] += " facttwo"  # chunk 300
    stores = open_stores(pg_store.config(tmp_path), agent="a", session="s")
    try:
        stores.outputs.save("\n".join(lines) + "\n")
        _index_all(stores)
        for word, line in (("factone", 255 * 16 + 4), ("facttwo", 299 * 16 + 4)):
            result = stores.search.search(f"tick {word}", limit=5)
            assert _lines_with(result.hits, word) == [line] and result.every
    finally:
        stores.close()


@pytest.mark.usefixtures("no_background")
def test_blocks_indexed_without_their_chunks_are_still_searched(
    tmp_path: Path, pg_store: PgStore
) -> None:
    """Blocks indexed before their tokens' positions were their chunks (no positions: a store
    of an earlier version, or a worker of one still running) are searched as before: each
    of their chunks is checked."""
    import psycopg

    facts = _facts(random.Random(31), 3)
    stores = open_stores(pg_store.config(tmp_path), agent="a", session="s")
    try:
        for _, _, text in facts:
            stores.outputs.save(text)
        _index_all(stores)
        with psycopg.connect(
            pg_store.server.dsn, password=pg_store.password, autocommit=True
        ) as conn:
            conn.execute("SELECT set_config('agentscope_ctx.scope', 'all', false)")
            changed = conn.execute(
                f"UPDATE {pg_store.schema}.chunks SET terms = strip(terms) "
                "WHERE byte_start IS NOT NULL"
            ).rowcount
        assert changed > len(facts)
        for word, line, _ in facts:
            for query in (word, f"value {word}", f'"{word}"'):
                assert _lines_with(stores.search.search(query, limit=5).hits, word) == [line]
    finally:
        stores.close()


@pytest.mark.usefixtures("no_background")
def test_a_search_ranks_blocks_without_reading_their_tokens(
    tmp_path: Path, pg_store: PgStore
) -> None:
    """The ranked query ranks an output's blocks without reading their tokens (kept out of
    line: some 45 KB a block of 64 KB): of 100 blocks holding the word, besides what finding
    the candidates reads (the same plan, alone), it reads the tokens of the 28 rows it
    returns (which chunks hold the word). It read every candidate's to rank them."""
    from agentscope_ctx.core.search._search_text import parse_query
    from agentscope_ctx.stores.postgres._search_sql import ranked_rows
    from agentscope_ctx.stores.postgres._tenant import bind, stored_owner

    rng = random.Random(5)
    words = [f"u{rng.randrange(10**9)}" for _ in range(30_000)]  # blocks of distinct words
    lines = [" ".join(rng.choices(words, k=12)) + " common" for _ in range(13_000)]
    tenant = Tenant.of("a", "s")
    s = pg_store.schema
    stores = open_stores(pg_store.config(tmp_path), agent="a", session="s")
    try:
        with mock.patch.object(_blocks, "BLOCK_CHARS", 16 << 10):
            stores.outputs.save("\n".join(lines) + "\n")
            _index_all(stores)
        engine = stores.search.engine  # type: ignore[attr-defined]
        with engine.connection() as conn, conn.transaction():
            bind(conn, tenant)
            toast = conn.execute(
                "SELECT reltoastrelid FROM pg_class WHERE oid = %s::regclass", (f"{s}.chunks",)
            ).fetchone()[0]
            read: list[int] = []

            def pages(sql: str, params: Any = None) -> Any:
                query = "SELECT pg_stat_get_xact_blocks_fetched(%s)"
                start = int(conn.execute(query, (toast,)).fetchone()[0])
                out = conn.execute(sql, params).fetchall() if isinstance(sql, str) else sql()
                read.append(int(conn.execute(query, (toast,)).fetchone()[0]) - start)
                return out

            agent, session = stored_owner(tenant)
            params = {"t_agent": agent, "t_session": session, "limit": 28}
            rows = pages(lambda: ranked_rows(conn, s, params, parse_query("common"), True))
            conn.execute("SET LOCAL enable_indexscan = off")  # (as `ranked_rows` plans)
            pages(
                f"SELECT c.id FROM {s}.chunks AS c WHERE c.agent = %s AND c.session = %s "
                "AND c.terms @@ 'common'::tsquery ORDER BY c.id DESC LIMIT 500",
                (agent, session),
            )
            blocks = pages(
                f"SELECT count(*), sum(length(terms)) FROM {s}.chunks WHERE byte_start IS NOT NULL"
            )
        used, finding, everything = read
        assert blocks[0][0] >= 100 and len(rows) == 28
        assert 0 < used - finding < everything / 2
    finally:
        stores.close()
