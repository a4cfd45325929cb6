"""A tenant's local search ranks its newest matches (issue 30): when many of its chunks
match, a window of its newest eras holding `CANDIDATES` of them is ranked, not its whole
history; when few match, every one is, as before. Its eras' keys are its boundary, checked
again on each hit. A CJK phrase asks for its pairs. The eras and the candidates are made
small here, so that a few messages cover many eras."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import agentscope_ctx.core.search._background as background_module
import agentscope_ctx.stores._search_query as search_query
import agentscope_ctx.stores._search_tantivy as search_tantivy
import agentscope_ctx.stores._search_text_batch as search_text_batch
from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.search._search_text import storable
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._search import Filters, SearchIndex
from agentscope_ctx.stores._tool_results import ToolResultStore

ALICE = Filters(tenant=Tenant.of("alice", "s1"))


@contextmanager
def small_eras(era_chunks: int, candidates: int) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search_text_batch, "ERA_CHUNKS", era_chunks)
        patch.setattr(search_query, "ERA_CHUNKS", era_chunks)
        patch.setattr(search_query, "CANDIDATES", candidates)
        yield


def msg(text: str, n: int) -> Msg:
    message = Msg("someone", text, "user")
    message.timestamp = f"2026-12-05 10:{n // 60:02d}:{n % 60:02d}.000"
    return message


async def write(index: SearchIndex, agent: str, texts: list[tuple[str, int]]) -> None:
    dialog = DialogStore(
        index.root,
        record_fields={"agent": agent, "session": "s1"},
        on_append=index.dialog_appended,
    )
    await dialog.append([msg(text, n) for text, n in texts])


async def append(index: SearchIndex, agent: str, texts: list[tuple[str, int]]) -> None:
    await write(index, agent, texts)
    index.catch_up()  # committed: the window is the index's (a search ranks all of its tail)


async def test_many_matches_rank_the_newest_window_few_rank_all(tmp_path: Path) -> None:
    with small_eras(16, 20):
        index = SearchIndex(tmp_path)
        await append(index, "alice", [("kiwi kiwi kiwi kiwi emu", 0)])  # the best, and oldest
        await append(index, "alice", [(f"kiwi note {n}", n) for n in range(1, 101)])
        hits = index.search("kiwi", ALICE, limit=1).hits
        assert hits and "emu" not in hits[0].lines[0][1]  # 100 newer matches: a window
        assert all(h.ts is not None and h.ts >= "2026-12-05 10:01" for h in hits)
        assert "emu" in index.search("kiwi emu", ALICE, limit=1).hits[0].lines[0][1]
        assert index.search("emu", ALICE).hits  # a rare word in the oldest era
    with small_eras(16, 200):  # more candidates than matches: all are ranked
        hits = index.search("kiwi", ALICE, limit=1).hits
        assert hits and "emu" in hits[0].lines[0][1]


async def test_a_tenant_with_few_matches_among_many_finds_all_its_own(tmp_path: Path) -> None:
    """Bob's 300 newer matches are in his own eras, not in Alice's: her search finds her
    three, and his his newest."""
    with small_eras(16, 20):
        index = SearchIndex(tmp_path)
        await append(index, "alice", [(f"kiwi alice {n}", n) for n in range(3)])
        await append(index, "bob", [(f"kiwi bob {n}", n) for n in range(3, 303)])
        hits = index.search("kiwi", ALICE, limit=5).hits
        assert sorted(h.lines[0][1] for h in hits) == [f"kiwi alice {n}" for n in range(3)]
        assert len(index.search("kiwi", Filters(tenant=Tenant.of("bob", "s1"))).hits) == 5


def save(index: SearchIndex, text: str, agent: str, tags_of: str | None = None) -> Path:
    """Save `text` as an output of `agent` in ``s1``, named by the tags of `tags_of`'s."""
    store = ToolResultStore(
        index.root,
        7,
        on_saved=lambda p: index.output_saved(p, agent=agent, session="s1"),
        owner=(tags_of or agent, "s1"),
    )
    return store.save(text)


async def test_a_tenants_newest_window_is_its_newest_chunks_records_and_outputs(
    tmp_path: Path,
) -> None:
    """An owner's records and its saved outputs are counted in one key's eras, in the order
    written: a tenant's newest eras are its newest chunks, whether records or outputs (when
    they were counted apart, its newest window held its newest records however old they
    were beside its outputs)."""
    with small_eras(16, 20):
        index = SearchIndex(tmp_path)
        try:
            await append(index, "alice", [("kiwi kiwi kiwi kiwi emu", 0)])  # the best, oldest
            index.catch_up()
            save(index, "".join(f"kiwi line {n}\n" for n in range(480)), "alice")  # 30 chunks
            hits = index.search("kiwi", ALICE, limit=1).hits
            assert hits and hits[0].path.parent.name == "tool_result"
            assert "emu" in index.search("kiwi emu", ALICE, limit=1).hits[0].lines[0][1]
            searcher = search_tantivy.open_index(
                next((tmp_path / "index").glob("tantivy-*"))
            ).searcher()
            key = search_tantivy.era_key("alice", "s1")
            counts = [searcher.doc_freq("era", search_tantivy.era_term(key, k)) for k in range(3)]
            assert counts == [16, 15, 0]  # the record and the output's 30 chunks
        finally:
            index.close()


async def test_outputs_named_by_other_tags_are_in_their_own_eras(tmp_path: Path) -> None:
    """An output its owner did not name by its own tags (another tenant's name on it) is in
    a key of its own: no tenant's window holds it, and its owner does not see it."""
    with small_eras(16, 20):
        index = SearchIndex(tmp_path)
        try:
            save(index, "quokka in a misnamed output\n", "alice", tags_of="bob")
            save(index, "quokka in her own output\n", "alice")
            hits = index.search("quokka", ALICE).hits
            assert [h.lines[0][1] for h in hits] == ["quokka in her own output"]
            bob = Filters(tenant=Tenant.of("bob", "s1"))
            assert index.search("quokka", bob).hits == []  # not his either: alice owns it
            assert len(index.search("quokka").hits) == 2  # the operator's search sees both
        finally:
            index.close()


async def test_an_owner_stored_other_than_its_tenant_is_searched_by_clauses(
    tmp_path: Path,
) -> None:
    """A tenant whose agent key holds a lone surrogate is stored with U+FFFD in its place, so
    its tags are not its stored owner's own: its boundary goes to the index as clauses, and
    it finds its records and its outputs."""
    odd = "al\udc80ice"
    tenant = Filters(tenant=Tenant.of(odd, "s1"))
    assert search_query._keys(search_query.tenant_params(tenant.tenant, storable)) == []
    index = SearchIndex(tmp_path)
    try:
        await append(index, odd, [("quokka record", 0)])
        save(index, "quokka output\n", odd)
        found = sorted(h.lines[0][1] for h in index.search("quokka", tenant).hits)
        assert found == ["quokka output", "quokka record"]
        assert index.search("quokka", ALICE).hits == []
    finally:
        index.close()


async def test_a_word_others_use_found_in_a_tenants_oldest_era(tmp_path: Path) -> None:
    """When fewer than twice `CANDIDATES` matches of its own are expected, a tenant's search
    ranks all of its eras: its one old match is found however many other tenants' there are
    (before, the window was sized from the matches of every tenant and, expecting 500 in it,
    left out its oldest eras uncounted: Alice's old kiwi was not found)."""
    with small_eras(16, 20):
        index = SearchIndex(tmp_path)
        try:
            await append(index, "alice", [("kiwi in her first note", 0)])
            await append(index, "alice", [(f"her note {n}", n) for n in range(1, 160)])
            await append(index, "bob", [(f"kiwi bob {n}", n) for n in range(40)])
            hits = index.search("kiwi", ALICE).hits
            assert [h.lines[0][1] for h in hits] == ["kiwi in her first note"]
        finally:
            index.close()


def _search(index: SearchIndex, query: str, candidates: int) -> list[tuple[str, str]]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search_query, "CANDIDATES", candidates)
        hits = index.search(query, ALICE, limit=5).hits
    return [(h.agent or "", h.lines[0][1]) for h in hits]


@contextmanager
def searches_alone() -> Iterator[None]:
    """No background indexing: each search indexes what it lacks itself. These examples are
    about what a search finds; with a background step per append, each example's searches
    waited for the index's lock behind it (12 s of wall for 1.4 CPU-s in a loaded run)."""
    enabled, background_module.ENABLED = background_module.ENABLED, False
    try:
        yield
    finally:
        background_module.ENABLED = enabled


@settings(max_examples=25, deadline=None)
@given(
    history=st.lists(
        st.tuples(st.sampled_from(["alice", "bob"]), st.integers(0, 3), st.booleans()),
        min_size=10,
        max_size=100,
    ),
    commits=st.integers(1, 6),
)
@example(history=[("bob", 1, False)] * 40 + [("alice", 2, True)], commits=41)  # one a record
@example(history=[("alice", 1, False)] * 30 + [("alice", 3, True)], commits=3)
@example(history=[("alice", 3, True)] + [("alice", 1, False), ("bob", 1, True)] * 40, commits=5)
def test_the_window_changes_only_which_many_matches_are_ranked(
    history: list[tuple[str, int, bool]], commits: int
) -> None:
    """Whatever the history: a tenant sees only its own; a word it has is found; with at most
    `CANDIDATES` matches of its own, the hits are those of ranking every match. Each record
    is its own append; the index commits them in `commits` batches, the last before the
    searches: the eras fill across commits as within one (the test below checks the filling
    across writes). A commit per record, some 25 ms each, took 12 of the test's 13 s (470
    commits; -n 0, load 6, 2026-12-07); one example keeps it."""
    per_commit = -(-len(history) // commits)

    async def write_all(index: SearchIndex) -> None:
        for n, (agent, kiwis, emu) in enumerate(history):
            text = " ".join(["kiwi"] * kiwis + ["emu"] * emu + [f"m{n}"])
            await write(index, agent, [(text, n)])
            if (n + 1) % per_commit == 0 or n + 1 == len(history):
                index.catch_up()

    with tempfile.TemporaryDirectory() as tmp, small_eras(4, 6), searches_alone():
        index = SearchIndex(Path(tmp))
        try:
            asyncio.run(write_all(index))
            for word in ("kiwi", "emu"):
                mine = [a == "alice" and (k if word == "kiwi" else e) for a, k, e in history]
                hits = _search(index, word, 6)
                assert all(agent == "alice" for agent, _ in hits)
                assert bool(hits) == any(mine)
                if sum(map(bool, mine)) <= 6:
                    assert hits == _search(index, word, 10**6)
        finally:
            index.close()  # its background indexing, before the directory goes


async def test_an_owners_eras_fill_in_turn_across_writes(tmp_path: Path) -> None:
    """Each owner's chunks are counted into its eras as they are written, batch after batch
    (found again from the index at each write), `newest_era` finds the last, and its ``key``
    term holds them all."""
    with small_eras(16, 20):
        index = SearchIndex(tmp_path)
        try:
            for start in range(0, 50, 7):  # writes of 7 records, alice's and bob's in turn
                await append(index, "alice", [(f"a{n}", n) for n in range(start, start + 7)])
                index.catch_up()
                await append(index, "bob", [(f"b{n}", n) for n in range(start, start + 3)])
                index.catch_up()
            reader = search_tantivy.open_index(next((tmp_path / "index").glob("tantivy-*")))
            searcher = reader.searcher()
            counts = {
                agent: [
                    searcher.doc_freq(
                        "era", search_tantivy.era_term(search_tantivy.era_key(agent, "s1"), era)
                    )
                    for era in range(5)
                ]
                for agent in ("alice", "bob")
            }
            assert counts == {"alice": [16, 16, 16, 8, 0], "bob": [16, 8, 0, 0, 0]}
            keys = {  # all of an owner's eras at once: its key's one term
                agent: searcher.doc_freq("key", search_tantivy.era_key(agent, "s1"))
                for agent in ("alice", "bob")
            }
            assert keys == {"alice": 56, "bob": 24}
            newest = {
                agent: search_tantivy.newest_era(searcher, search_tantivy.era_key(agent, "s1"))
                for agent in ("alice", "bob", "carol")
            }
            assert newest == {"alice": 3, "bob": 1, "carol": -1}
        finally:
            index.close()


async def test_a_chunk_filed_under_another_owners_eras_is_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tenant's search finds its chunks by its eras' keys; each hit is checked again on its
    metadata row, so a chunk the index filed under the wrong key (here: every record under
    Alice's) is still not shown to her."""
    real = search_text_batch.chunk_era_key
    monkeypatch.setattr(
        search_text_batch, "chunk_era_key", lambda a, s, tags: real("alice", "s1", tags)
    )
    index = SearchIndex(tmp_path)
    try:
        await append(index, "bob", [("bob's secret quokka", 0)])
        await append(index, "alice", [("alice's own quokka", 1)])
        assert [h.lines[0][1] for h in index.search("quokka", ALICE).hits] == ["alice's own quokka"]
        assert index.search("secret", ALICE).hits == []
        bob = Filters(tenant=Tenant.of("bob", "s1"))
        assert index.search("secret", bob).hits == []  # filed under Alice's key: not found
        assert index.search("secret").hits  # the operator's search has no keys
    finally:
        index.close()


_CJK_TEXT = st.text(alphabet="数据库迁数据库 ,a1Ｘ한\u200b", min_size=1, max_size=30)


@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(_CJK_TEXT, min_size=1, max_size=4),
    at=st.integers(0, 3),
    start=st.integers(0, 30),
    length=st.integers(2, 4),
    other=st.text(alphabet="数据库迁a", min_size=2, max_size=4),
)
@example(texts=["数 据库"], at=0, start=0, length=3, other="")  # a space between two
@example(texts=["数据a库"], at=0, start=0, length=3, other="")
@example(texts=["数据库"], at=0, start=0, length=2, other="据数")  # not in a row: not found
def test_a_cjk_phrase_is_found_where_its_tokens_are_in_a_row(
    texts: list[str], at: int, start: int, length: int, other: str
) -> None:
    """A phrase of CJK characters asks for its pairs too (`cjk_pairs`): they never lose a
    chunk where the phrase's tokens are in a row, and the phrase is still checked. The
    phrase is cut from one of the texts, or (`other`) made up."""
    words = search_tantivy.query_tokens(texts[at % len(texts)])
    phrase = other or "".join(words[start % max(len(words), 1) :][:length])
    wanted = search_tantivy.query_tokens(phrase)
    if not wanted:
        return
    with tempfile.TemporaryDirectory() as tmp, searches_alone():
        index = SearchIndex(Path(tmp))
        try:
            asyncio.run(append(index, "alice", [(t, n) for n, t in enumerate(texts)]))
            found = {h.lines[0][1] for h in index.search(f'"{phrase}"', ALICE, limit=10).hits}
        finally:
            index.close()

    def holds(text: str) -> bool:
        tokens = search_tantivy.query_tokens(text)
        return any(tokens[k : k + len(wanted)] == wanted for k in range(len(tokens)))

    shown = {text.replace("\u200b", "") for text in found}
    assert shown == {text.replace("\u200b", "") for text in texts if holds(text)}
