"""The local search's text index (Tantivy, `stores/_search_tantivy`) beside its SQLite
metadata: what a crash between their two commits leaves, a text index lost or damaged,
another process holding Tantivy's writer, and another process's commits seen by a reader."""

from __future__ import annotations

import multiprocessing
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import agentscope_ctx.core.search._background as background_module
import agentscope_ctx.stores._search_db as search_db
import agentscope_ctx.stores._search_query as query_module
import agentscope_ctx.stores._search_tantivy as search_tantivy
import agentscope_ctx.stores._search_text_batch as batch_module
from agentscope_ctx.core.search._index_pieces import piece_lines
from agentscope_ctx.core.search._search_text import chunk_lines, tokens
from agentscope_ctx.stores._search import Filters, SearchIndex
from agentscope_ctx.stores._search_tantivy import (
    ANALYZER,
    PRELOAD,
    chunk_terms,
    preload,
    query_tokens,
)
from agentscope_ctx.stores._search_text_batch import locate
from agentscope_ctx.stores._tool_results import ToolResultStore

HOLDER = """
import sys, tantivy
index = tantivy.Index.open(sys.argv[1])
writer = index.writer(heap_size=15_000_000, num_threads=1)
print("READY", flush=True)
sys.stdin.read()
"""


def save(index: SearchIndex, text: str, agent: str = "alice") -> Path:
    store = ToolResultStore(
        index.root, 7, on_saved=lambda p: index.output_saved(p, agent=agent), owner=(agent, "")
    )
    return store.save(text)


def text_dir(root: Path) -> Path:
    name = (root / "index" / "current").read_text().strip()
    return root / "index" / ("tantivy-" + name[len("search-") : -len(".sqlite3")])


def text_hits(index: SearchIndex, word: str) -> int:
    """How many chunks of the text index hold `word` (duplicates included)."""

    def count(db: search_db.IndexConnection) -> int:
        import tantivy

        db.index.reload()
        query = tantivy.Query.term_query(db.index.schema, "terms", word)
        return int(db.index.searcher().search(query, 100).count)

    return index.db.run(count)


def _crash_after_text_commit(root: str) -> None:
    """Index `root` and die between Tantivy's commit and SQLite's (a forked child)."""
    apply = batch_module.TextBatch.apply

    def apply_then_die(self: batch_module.TextBatch, *args: object) -> None:
        apply(self, *args)  # type: ignore[arg-type]
        os._exit(17)

    batch_module.TextBatch.apply = apply_then_die  # type: ignore[method-assign]
    SearchIndex(Path(root)).catch_up()


def test_a_crash_between_the_two_commits_neither_duplicates_nor_loses_a_hit(
    tmp_path: Path,
) -> None:
    index = SearchIndex(tmp_path)
    first = save(index, "".join(f"line {i} of the first log\n" for i in range(50)) + "kudu 1\n")
    assert len(index.search("kudu").hits) == 1
    index.close()
    (tmp_path / "dialog").mkdir()
    (tmp_path / "dialog" / "2026-12-02.jsonl").write_text(
        '{"v": 1, "agent": "alice", "msg": {"role": "user", "content": "the kudu again"}}\n'
    )
    ToolResultStore(tmp_path, 7, owner=("alice", "")).save("a second kudu log\n")
    for _ in range(2):  # the same crash twice: each time the same chunks are committed again
        child = multiprocessing.get_context("fork").Process(
            target=_crash_after_text_commit, args=(str(tmp_path),)
        )
        child.start()
        child.join(60)
        assert child.exitcode == 17
    fresh = SearchIndex(tmp_path)
    hits = fresh.search("kudu", limit=10).hits
    assert sorted(h.kind for h in hits) == ["dialog", "tool_result", "tool_result"]
    assert len({(h.path, h.start_line) for h in hits}) == 3
    assert text_hits(fresh, "kudu") == 3  # each chunk once in the text index
    assert first in {h.path for h in hits}


def _damage_missing(path: Path) -> None:
    shutil.rmtree(path)


def _damage_meta(path: Path) -> None:
    (path / "meta.json").write_text("{not json")


def _damage_no_meta(path: Path) -> None:
    (path / "meta.json").unlink()


def _damage_segments(path: Path) -> None:
    for file in path.iterdir():
        if file.suffix in (".idx", ".term", ".store", ".pos", ".fast", ".fieldnorm"):
            file.unlink()


@pytest.mark.parametrize(
    "damage", [_damage_missing, _damage_meta, _damage_no_meta, _damage_segments]
)
def test_a_missing_or_damaged_text_index_is_rebuilt_from_the_files(
    tmp_path: Path, damage: object
) -> None:
    index = SearchIndex(tmp_path)
    path = save(index, "".join(f"row {i} nothing here\n" for i in range(40)) + "the dugong\n")
    before = [(h.path, h.start_line) for h in index.search("dugong").hits]
    assert [p for p, _ in before] == [path]
    index.close()
    damage(text_dir(tmp_path))  # type: ignore[operator]
    fresh = SearchIndex(tmp_path)
    assert [(h.path, h.start_line) for h in fresh.search("dugong").hits] == before
    assert [(h.path, h.start_line) for h in index.search("dugong").hits] == before


def test_another_process_holding_the_text_writer_is_caught_up_later(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path)
    save(index, "the first quokka\n")
    assert len(index.search("quokka").hits) == 1
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(text_dir(tmp_path))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "READY"
        save(index, "the second quokka\n")  # the save is not held up: caught up later
        held = index.search("quokka", catch_up_seconds=0.3)
        assert not held.busy and len(held.hits) == 2  # the second read into its tail
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(30)
    assert len(index.search("quokka").hits) == 2


def _index_one(root: str) -> None:
    index = SearchIndex(Path(root))
    save(index, "the serval of another process\n", agent="bob")
    index.search("serval")
    index.close()


def test_a_reader_sees_the_commits_of_another_process(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path)
    save(index, "the first serval\n")
    assert len(index.search("serval").hits) == 1
    child = multiprocessing.get_context("fork").Process(target=_index_one, args=(str(tmp_path),))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    # no catch-up of its own: what it finds, it reads from the other process's commit
    hits = index.search("serval", Filters(agent="bob"), catch_up_seconds=0).hits
    assert [h.agent for h in hits] == ["bob"]


_WORDS = st.text(alphabet="abcXYZ019 _-.,éÉïﬁἈθῆ中文数据日本한국\u0301\n", max_size=120)


@given(_WORDS | st.text(max_size=200))
@example("Hello_World x-y 42abc")
@example("\U0002ee5e")  # unassigned, in a CJK range: a token of ours, a token of the analyzer
@example("中0")  # a CJK character beside a digit
@example("ÉCOLE naïve ﬁle Ἀθῆναι ab中文数据x日本")
def test_the_text_index_holds_our_tokens(text: str) -> None:
    """What Tantivy indexes of a chunk is what a query for it searches; on ASCII text, and on
    letters, digits and CJK, these are our tokens (`_search_text.tokens`)."""
    assert ANALYZER.analyze(chunk_terms(text)) == query_tokens(text)
    if all(c.isascii() or c in "éÉïﬁἈθῆ中文数据日本\u0301" for c in text):
        apart = re.sub("[中文数据日本]", " \\g<0> ", text)  # a CJK character: a token
        assert query_tokens(text) == tokens(apart)


def _long_line(parts: list[str], size: int) -> str:
    """`parts` in turn, again and again, to `size` characters: a line about `CHUNK_CHARS` or
    past it, its spaces where the parts put them (none when they have none). Drawn a
    character at a time, 2,000-5,000 of them, such lines took 12 of the test's 12 s in data
    generation, and 69 draws overran (-n 0, load 7, 2026-12-07)."""
    text = "".join(parts)
    return (text * (size // len(text) + 1))[:size]


_LINE = st.text(alphabet="ab é中\t", max_size=40) | st.builds(
    _long_line,
    st.lists(st.text(alphabet="xy ", min_size=1, max_size=300), min_size=1, max_size=4),
    st.integers(2000, 5000),
)


@given(st.lists(_LINE, min_size=1, max_size=40), st.booleans())
@example(["a" * 4100], True)
def test_a_saved_outputs_chunks_are_read_back_from_its_file(lines: list[str], end: bool) -> None:
    """The text of a saved output's chunks is not stored: each is found in the piece, at the
    bytes that decode to it (also the pieces of a long line)."""
    data = ("\n".join(lines) + ("\n" if end else "")).encode()
    where = locate(data, 1000, 7)
    for chunk in chunk_lines(piece_lines(data), 7):
        place = where(chunk)
        assert place is not None
        assert data[place[0] - 1000 : place[0] - 1000 + place[1]].decode() == chunk.text


def test_a_chunk_with_a_crlf_or_a_bad_byte_keeps_its_text(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path)
    save(index, "the first line\r\nthe eland here\r\n")
    bad = ToolResultStore(tmp_path, 7, owner=("alice", "")).save("x")
    bad.write_bytes(b"an \xff byte and the eland\n")
    hits = index.search("eland").hits
    assert sorted(text for h in hits for _, text in h.lines if "eland" in text) == [
        "an \ufffd byte and the eland",
        "the eland here",
    ]


# -- prefixes (``word*``): a term of the ``prefixes`` field, a regex past PREFIX_CHARS -----------

_CORPUS = [
    "Configuration loaded from w0123 and W0145",
    "deployment of w0199 finished; Deploy again",
    "supercalifragilistic expialidocious x1",
    "数据库 连接 数据 ok",
    "conficker config configs confidential",
    "w2 w20 w201 w2010 w20105 w201055 w2010555",
    "a ab abc abcd abcde abcdef abcdefg abcdefgh",
]


@pytest.fixture(scope="module")
def corpus_index(tmp_path_factory: pytest.TempPathFactory) -> SearchIndex:
    index = SearchIndex(tmp_path_factory.mktemp("prefixes"))
    for line in _CORPUS:  # a file each: one chunk each
        save(index, line + "\n")
    return index


_STARTS = sorted({t[:k] for line in _CORPUS for t in tokens(line) for k in range(1, len(t) + 1)})


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(_STARTS) | st.text(alphabet="abcdwxyz0125数据", min_size=1, max_size=10),
    st.booleans(),
)
@example("abcdefg", False)  # one past PREFIX_CHARS: the term and the regex
@example("w201055", True)
@example("conf", False)
@example("数", False)
@example("数据", False)  # two tokens (a CJK character each): "数" then a word starting "据"
def test_a_prefix_finds_the_chunks_with_a_word_that_starts_so(
    corpus_index: SearchIndex, start: str, upper: bool
) -> None:
    """``start*`` finds exactly the chunks holding a token that starts with `start`, whether
    `start` is within PREFIX_CHARS characters (a term of ``prefixes``) or longer (that term and
    Tantivy's regex over the words); case does not matter. A `start` of several tokens (CJK
    characters are a token each) is a phrase whose last word is the prefix."""
    query = (start.upper() if upper else start) + "*"
    result = corpus_index.search(query, limit=50)
    found = {line for hit in result.hits for _, line in hit.lines}
    *first, last = tokens(start)

    def holds(words: list[str]) -> bool:
        n = len(first)
        return any(
            words[i : i + n] == first and words[i + n].startswith(last)
            for i in range(len(words) - n)
        )

    assert found == {line for line in _CORPUS if holds(tokens(line))}


def test_an_index_of_the_version_before_prefixes_is_made_again(tmp_path: Path) -> None:
    """An index made before the ``prefixes`` field (SQLite ``user_version`` 2) is replaced and
    made again from the files, so that a prefix query finds what it holds."""
    index = SearchIndex(tmp_path)
    save(index, "deployment of w0199 finished\n")
    index.close()
    name = (tmp_path / "index" / "current").read_text().strip()
    conn = sqlite3.connect(tmp_path / "index" / name)
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    again = SearchIndex(tmp_path)
    try:
        assert [line for hit in again.search("w01*").hits for _, line in hit.lines] == [
            "deployment of w0199 finished"
        ]
        assert (tmp_path / "index" / "current").read_text().strip() != name
    finally:
        again.close()


def _text_maps(index_dir: Path) -> dict[str, list[str]]:
    """This process's maps of the files in `index_dir`: each file's maps' ``VmFlags``."""
    prefix = os.path.realpath(index_dir) + os.sep
    maps: dict[str, list[str]] = {}
    name = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if re.match(r"[0-9a-f]+-[0-9a-f]+$", fields[0]):
            name = fields[5] if len(fields) == 6 and fields[5].startswith(prefix) else None
        elif name and fields[0] == "VmFlags:":
            maps.setdefault(Path(name).name, []).append(line)
    return maps


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux's /proc")
def test_a_search_reads_the_index_at_random_and_a_merge_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every segment file a search maps is advised MADV_RANDOM (smaps' "rr"), so that a cold
    # page is read alone, not with the disk's readahead window: the first segment, and the
    # one a later commit adds; while the writer writes and merges (reading whole segments),
    # they have the kernel's usual readahead, and after it they are random again (here at
    # any size: `ADVISE_BYTES`, below). The background indexing is off: a step of its own
    # (its writer advises the maps for reading in order until its commit) ran at times while
    # the maps were read here, in a whole suite's worker under load
    monkeypatch.setattr(query_module, "ADVISE_BYTES", 0)
    monkeypatch.setattr(background_module, "ENABLED", False)
    index = SearchIndex(tmp_path)
    save(index, "the first serval\n")
    assert len(index.search("serval").hits) == 1
    first = _text_maps(text_dir(tmp_path))
    assert {name.rsplit(".", 1)[1] for name in first} >= {"idx", "term", "store", "fieldnorm"}
    seen: list[dict[str, list[str]]] = []
    document = batch_module._document

    def document_seen(*args: object) -> object:
        seen.append(_text_maps(text_dir(tmp_path)))
        return document(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(batch_module, "_document", document_seen)
    save(index, "a second serval\n")
    writing = [f for each in seen[0].values() for f in each]
    assert writing and not any(" rr" in f for f in writing), seen[0]
    after = [f for each in _text_maps(text_dir(tmp_path)).values() for f in each]
    assert after and all(" rr" in f for f in after)
    assert len(index.search("serval").hits) == 2
    maps = _text_maps(text_dir(tmp_path))
    assert {n.split(".")[0] for n in maps} > {n.split(".")[0] for n in first}  # a new segment
    flags = [f for each in maps.values() for f in each]
    assert flags and all(" rr" in f for f in flags), maps
    index.close()


def test_a_search_advises_the_maps_for_a_large_new_segment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each search after a commit read the process's memory maps (`advise_maps`): 16-46 ms
    with ten handles' segments mapped, under the maps' lock every mmap of the process takes
    (issue 46 item 11), for a commit's small segment that costs at most its size read ahead.
    A search advises them when its reload mapped `ADVISE_BYTES` of new files."""
    advised: list[Path] = []
    monkeypatch.setattr(query_module, "advise_maps", lambda d, **_: advised.append(d) or 0)
    monkeypatch.setattr(query_module, "ADVISE_BYTES", 256 << 10)
    index = SearchIndex(tmp_path)
    try:
        save(index, "the first serval\n")
        assert len(index.search("serval").hits) == 1
        save(index, "a second serval\n")
        assert len(index.search("serval").hits) == 2
        assert advised == []  # a few KB of new files each time
        save(index, "".join(f"serval number {k} of {k * 7919 % 10007}\n" for k in range(40000)))
        assert index.search("serval").hits
        assert advised == [text_dir(tmp_path)]
    finally:
        index.close()


def test_each_commit_asks_for_the_files_every_search_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After each commit the writer asks the kernel to read the segments' term dictionaries,
    field norms and fast fields into the page cache (`preload`), the newest segment's first,
    within `PRELOAD_BYTES`; their postings, positions and stored texts are left to the
    searches that read them."""
    asked: list[int] = []
    real = batch_module.preload
    monkeypatch.setattr(batch_module, "preload", lambda path: asked.append(real(path)) or 0)
    index = SearchIndex(tmp_path)
    try:
        save(index, "the first serval\n")
        assert len(index.search("serval").hits) == 1
        save(index, "a second serval\n")
        assert len(index.search("serval").hits) == 2
        files = [p for p in text_dir(tmp_path).iterdir() if p.name.endswith(PRELOAD)]
        assert {p.suffix for p in files} == set(PRELOAD)
        assert len(asked) >= 2 and asked[-1] == sum(p.stat().st_size for p in files) > 0
        segments: dict[str, list[Path]] = {}
        for path in files:
            segments.setdefault(path.stem, []).append(path)
        assert len(segments) == 2
        newest = max(segments.values(), key=lambda each: max(p.stat().st_mtime for p in each))
        monkeypatch.setattr(search_tantivy, "PRELOAD_BYTES", sum(p.stat().st_size for p in newest))
        assert preload(text_dir(tmp_path)) == search_tantivy.PRELOAD_BYTES  # the newest only
        monkeypatch.setattr(search_tantivy, "PRELOAD_BYTES", 0)
        assert preload(text_dir(tmp_path)) == 0
        assert preload(tmp_path / "gone") == 0
    finally:
        index.close()
