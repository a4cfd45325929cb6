"""A local search answers from the committed index plus its tail (issue 46 item 11,
`_search_tail`): what the files hold past the index is matched in memory, never committed by
the search; a tail chunk is a hit exactly when it is one indexed, for the same tenants."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from threading import get_ident
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentscope_ctx.core.search._background as background_module
import agentscope_ctx.stores._search as search_module
import agentscope_ctx.stores._search_record as record_module
import agentscope_ctx.stores._search_tail_output as output_module
import agentscope_ctx.stores._search_turns as turns
from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._search import SearchIndex, SearchResult
from agentscope_ctx.stores._tool_results import ToolResultStore
from tests.stores.test_search_turns import a_search_running


@pytest.fixture(autouse=True)
def no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The background indexing runs only when a test runs it (`catch_up`)."""
    monkeypatch.setattr(background_module, "ENABLED", False)


def dialog(index: SearchIndex, agent: str = "a", session: str = "s1") -> DialogStore:
    fields = {"agent": agent, "session": session}
    return DialogStore(index.root, record_fields=fields, on_append=index.dialog_appended)


def outputs(index: SearchIndex, agent: str = "a", session: str = "s1") -> ToolResultStore:
    return ToolResultStore(
        index.root,
        7,
        on_saved=lambda p: index.output_saved(p, agent=agent, session=session),
        owner=(agent, session),
    )


def found(result: SearchResult) -> set[tuple[str, str, int, int]]:
    return {(h.path.name, h.kind, h.start_line, h.line_offset) for h in result.hits}


@contextmanager
def holding(root: Path) -> Iterator[None]:
    """Another connection holds the index database's write lock (another process indexing)."""
    name = (root / "index" / "current").read_text().strip()
    other = sqlite3.connect(root / "index" / name, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield
        other.execute("ROLLBACK")
    finally:
        other.close()


async def test_a_record_another_handle_appended_is_found_with_no_commit(tmp_path: Path) -> None:
    writer, searcher = SearchIndex(tmp_path), SearchIndex(tmp_path)  # two handles of one store
    try:
        await dialog(writer).append([Msg("user", "the quokka record", "user")])
        first = searcher.search("quokka")
        assert [h.kind for h in first.hits] == ["dialog"]
        work = dict(searcher.search_work.items())
        assert work == {"searches": 1, "files_indexed": 0, "commits": 0, "tail_files": 1}
        writer.catch_up()  # the background's commit
        again = searcher.search("quokka")
        assert found(again) == found(first)
        assert searcher.search_work.tail_files == 1 and searcher.search_work.commits == 0
    finally:
        writer.close()
        searcher.close()


async def test_a_search_answers_from_the_tail_while_another_writer_holds_the_index(
    tmp_path: Path,
) -> None:
    """Before, a search waited for the writer its catch-up time, then answered from the
    index without what it lacked (`busy`)."""
    index = SearchIndex(tmp_path)
    try:
        outputs(index).save("an okapi output\n")
        with holding(tmp_path):
            outputs(index).save("an okapi output saved meanwhile\n")  # not indexed: busy
            await dialog(index).append([Msg("user", "an okapi record meanwhile", "user")])
            result = index.search("okapi", catch_up_seconds=0.5)
        assert not result.busy
        assert sorted(h.kind for h in result.hits) == ["dialog", "tool_result", "tool_result"]
        assert index.search_work.commits == 0
    finally:
        index.close()


async def test_tail_chunks_keep_the_tenant_boundary(tmp_path: Path) -> None:
    index, other = SearchIndex(tmp_path), SearchIndex(tmp_path)
    try:
        index.catch_up()  # the index made
        for agent, session in (("a", "s1"), ("a", "s2"), ("b", "s1")):
            await dialog(other, agent, session).append(
                [Msg("user", f"the heron of {agent} {session}", "user")]
            )
            with holding(tmp_path):  # not indexed at its save: its owner kept by `index`
                outputs(index, agent, session).save(f"a heron output of {agent} {session}\n")
        views = {}
        for step in ("tail", "index"):
            views[step] = {
                (agent, session, scope): found(
                    index.search(
                        "heron", Filters(tenant=Tenant.of(agent, session, scope=scope)), limit=20
                    )
                )
                for agent, session in (("a", "s1"), ("b", "s1"))
                for scope in ("session", "agent", "shared")
            }
            if step == "tail":
                assert index.search_work.tail_files == 4 * 6  # the dialog day, three outputs
                index.catch_up()
        assert views["tail"] == views["index"]
        assert len(views["tail"][("a", "s1", "session")]) == 2  # its record and its output
        assert len(views["tail"][("a", "s1", "agent")]) == 4  # its two sessions'
        assert len(views["tail"][("b", "s1", "shared")]) == 6
        assert index.search_work.commits == 0
    finally:
        index.close()
        other.close()


async def test_a_tail_past_its_bound_is_indexed_by_the_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No record is ever missed: past `TAIL_BYTES` the search indexes what is missing (a
    commit), as it did before, and reads the rest into its tail."""
    monkeypatch.setattr(search_module, "TAIL_BYTES", 64)
    writer, searcher = SearchIndex(tmp_path), SearchIndex(tmp_path)
    try:
        await dialog(writer).append([Msg("user", f"the ibis number {k}", "user") for k in range(5)])
        assert len(searcher.search("ibis", limit=10).hits) == 5
        assert searcher.search_work.commits == 1
    finally:
        writer.close()
        searcher.close()


WORDS = ["alpha", "alps", "alpine", "beta", "gamma", "été", "ete", "東京", "京都", "x1", "x10"]
_TEXT = st.lists(st.sampled_from([*WORDS, "東", "京"]), min_size=1, max_size=8).map(" ".join)
_QUERY = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(["alp*", "x1*", "alpin*", "東*", "ét*"]),
    st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS)).map(lambda p: f'"{p[0]} {p[1]}"'),
    st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS)).map(" ".join),
    st.sampled_from(['"東京"', '"京都"', "東京都", '"beta gam*"', '"alpha alp*"']),
)


@settings(max_examples=25, deadline=None)
@given(
    records=st.lists(_TEXT, min_size=1, max_size=6, unique=True),
    queries=st.lists(_QUERY, max_size=6),
)
def test_the_tail_and_the_index_give_the_same_hits(records: list[str], queries: list[str]) -> None:
    """The same query on the same records, read into the tail then committed: the same hits
    (words, phrases, prefixes, CJK, accents; all terms, else any). The records differ (a hit
    showing the line a better one shows is left out, and which of two ties is first is
    not the same in the tail)."""
    queries = [*queries, "alpha", '"東京"', "alp*"]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        writer, searcher = SearchIndex(root), SearchIndex(root)
        try:
            msgs = [Msg("user", text, "user") for text in records]
            asyncio.run(dialog(writer).append(msgs))
            unindexed = ToolResultStore(root, 7, owner=("a", "s1"))  # not told to the index
            unindexed.save("\n".join(records[::-1]) + "\n")
            tail = {q: found(searcher.search(q, limit=20)) for q in queries}
            assert searcher.search_work.tail_files == 2 * len(queries)
            assert searcher.search_work.commits == 0
            writer.catch_up()
            indexed = {q: found(searcher.search(q, limit=20)) for q in queries}
            assert searcher.search_work.tail_files == 2 * len(queries)  # none left past it
        finally:
            writer.close()
            searcher.close()
    assert tail == indexed


async def test_an_output_without_an_owner_is_claimed_in_the_tail_then_in_the_background(
    tmp_path: Path,
) -> None:
    """A committed output the index knows no owner of (a lost index made again, issue 46 item
    7) is its tenant's by its name: before, the tenant's search wrote the claim (a commit in
    its path); now it reads the output into its tail as claimed, and the background writes
    the claim."""
    index = SearchIndex(tmp_path)
    try:
        path = ToolResultStore(tmp_path, 7, owner=("a", "s1")).save("an okapi output\n")
        index.catch_up()  # indexed, its owner unknown (the index was not told)
        tenant = Tenant.of("a", "s1")
        result = index.search("okapi", Filters(tenant=tenant))
        assert [h.path for h in result.hits] == [path]
        assert index.search("okapi", Filters(tenant=Tenant.of("b", "s1"))).hits == []
        assert index.search_work.commits == 0 and index.search_work.tail_files == 1
        while index._background_step():
            pass
        owners = index.db.run(
            lambda db: db.execute("SELECT agent, session FROM docs WHERE kind = 'tool_result'")
        ).fetchall()
        assert owners == [(tenant.agent, tenant.session)]
        assert [h.path for h in index.search("okapi", Filters(tenant=tenant)).hits] == [path]
        assert index.search_work.tail_files == 1  # committed, owned: nothing read again
    finally:
        index.close()


async def test_a_search_never_writes_the_owners_its_handle_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owners a handle kept while the index was busy are read into a search's tail and
    written by the background (here `catch_up`), never in the search's path: an owner learnt
    late rewrites its output's chunks in the text index (12 s for a 2 MB output in one live
    benchmark search, issue 46 item 11)."""
    index = SearchIndex(tmp_path)
    writes: list[str] = []
    write_pending = index._write_pending
    monkeypatch.setattr(
        index, "_write_pending", lambda db: (writes.append("write"), write_pending(db))[1]
    )
    try:
        index.catch_up()  # the index made
        untold = ToolResultStore(tmp_path, 7, owner=("a", "s1"))  # the index is not told
        path = untold.save("an okapi output\n")
        index.catch_up()
        with holding(tmp_path):  # the owner told while the index is busy: kept
            index.output_saved(path, agent="a", session="s1")
        writes.clear()
        tenant = Filters(tenant=Tenant.of("a", "s1", scope="session"))
        assert [h.path for h in index.search("okapi", tenant).hits] == [path]
        assert writes == [] and index.search_work.commits == 0
        index.catch_up()  # what the background does
        assert writes and not index._kept.pending
        owners = index.db.run(
            lambda db: db.execute(
                "SELECT agent, session FROM docs WHERE path = ?", (f"tool_result/{path.name}",)
            ).fetchall()
        )
        assert set(owners) == {("a", "s1")}
        assert [h.path for h in index.search("okapi", tenant).hits] == [path]
    finally:
        index.close()


async def test_the_records_past_the_index_are_parsed_once_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each search read every record past the committed index again (JSON, stamps, chunks,
    tokens: at 100k messages with ten handles writing, most of a slow search, issue 46 item
    11): a record is parsed once, whichever handle searches, and one written again in place
    (a forget's new file given the old inode) is read again."""
    parsed: list[int] = []
    parse = record_module.parse_record
    monkeypatch.setattr(
        record_module, "parse_record", lambda *a: (parsed.append(a[1]), parse(*a))[1]
    )
    writer, one, two = SearchIndex(tmp_path), SearchIndex(tmp_path), SearchIndex(tmp_path)
    try:
        await dialog(writer).append(
            [Msg("user", f"the egret number {k}", "user") for k in range(5)]
        )
        assert len(one.search("egret", limit=10).hits) == 5
        assert len(parsed) == 5
        assert len(two.search("egret", limit=10).hits) == 5
        await dialog(writer).append([Msg("user", "one more egret", "user")])
        assert len(one.search("egret", limit=10).hits) == 6
        assert parsed == [1, 2, 3, 4, 5, 6]  # only the new one
        writer.catch_up()  # committed: nothing left in the tail
        assert len(two.search("egret", limit=10).hits) == 6
        assert two.search_work.tail_files == 1 and len(parsed) == 6  # the first search
        await dialog(writer).append([Msg("user", "an egret after the commit", "user")])
        assert len(one.search("egret", limit=10).hits) == 7 and parsed[6:] == [7]
        day = next((tmp_path / "dialog").glob("*.jsonl"))
        lines = day.read_bytes().splitlines(keepends=True)
        with open(day, "r+b") as file:  # the same inode, the newest record another one
            file.truncate(sum(map(len, lines[:-1])))
            file.seek(0, 2)
            file.write(lines[-1].replace(b"an egret after", b"a heron after"))
        assert [h.path.name for h in one.search("heron").hits] == [day.name]
        assert len(one.search("egret", limit=10).hits) == 6
    finally:
        for index in (writer, one, two):
            index.close()


async def test_an_output_past_the_index_is_read_once_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each search read, chunked and tokenized again the outputs its tail holds (up to 2 MB;
    the most of a slow search at 100k messages once the records were parsed once, issue 46
    item 11): an output is read once for every handle of the process, each search owning
    its chunks as its own tail's database says (here the tenant's claim, by the name)."""
    reads: list[int] = []
    read = output_module._read
    monkeypatch.setattr(output_module, "_read", lambda *a: (reads.append(a[2][0]), read(*a))[1])
    writer, one, two = SearchIndex(tmp_path), SearchIndex(tmp_path), SearchIndex(tmp_path)
    mine, theirs = (Filters(tenant=Tenant.of(a, "s1")) for a in ("a", "b"))
    try:
        writer.catch_up()  # the index made
        path = ToolResultStore(tmp_path, 7, owner=("a", "s1")).save(
            "".join(f"line {k} of an ocelot output\n" for k in range(2000))
        )  # not told to the index: its owner is the tenant its name carries
        assert len(one.search("ocelot", mine).hits) == 5
        assert len(two.search("ocelot", mine, limit=7).hits) == 7
        assert two.search("ocelot", theirs).hits == []
        assert reads == [0]
        writer.catch_up()
        assert [h.path for h in one.search('"line 1999"', mine).hits] == [path]
        assert reads == [0]  # committed with no owner: claimed in the tail, from memory
        assert one.search_work.tail_files == 2
    finally:
        for index in (writer, one, two):
            index.close()


def test_the_indexing_hands_the_interpreter_to_a_search_at_each_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a search of the process runs, the indexing on other threads hands it the
    interpreter lock at each chunk it adds and indexes (`_search_turns.yield_to_searches`):
    else each file or SQLite read of the search waited out the switch interval (5 ms) behind
    the indexing's Python; the search's own tail never yields to itself."""
    handed: list[int] = []
    monkeypatch.setattr(turns, "time", SimpleNamespace(sleep=lambda _: handed.append(get_ident())))
    index = SearchIndex(tmp_path)
    lines = "".join(f"line {k} of a lynx output\n" for k in range(300))
    try:
        index.catch_up()
        ToolResultStore(tmp_path, 7, owner=("a", "s1")).save(lines)  # not told: its tail
        index.catch_up()
        assert handed == []  # no search runs
        with a_search_running(tmp_path):
            ToolResultStore(tmp_path, 7, owner=("a", "s1")).save(lines)
            index.catch_up()
        assert len(handed) >= 2 * 10 and set(handed) == {get_ident()}  # chunks added, indexed
        handed.clear()
        ToolResultStore(tmp_path, 7, owner=("a", "s1")).save(lines)
        assert len(index.search("lynx", Filters(tenant=Tenant.of("a", "s1"))).hits) == 5
        assert index.search_work.tail_files >= 1 and handed == []  # (the claimed ones too)
    finally:
        index.close()
