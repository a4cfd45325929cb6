"""Search while other handles of the store write (issue 46, item 11): what a search does in
its own path (`SearchIndex.search_work`), and that what a save could not index is left to
the background indexing, not to the next search."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

import agentscope_ctx.core.search._background as background_module
import agentscope_ctx.stores._search as search_module
import agentscope_ctx.stores._search_text_batch as text_batch_module
from agentscope_ctx.core._entry import Msg
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._search import SearchIndex, SearchResult
from agentscope_ctx.stores._search_catch_up import searches_waiting, searching
from agentscope_ctx.stores._tool_results import ToolResultStore


@pytest.fixture(autouse=True)
def no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The background indexing runs only when a test runs its steps (as its thread would)."""
    monkeypatch.setattr(background_module, "ENABLED", False)


def kicks(index: SearchIndex, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The times `index`'s background indexing is asked to run (recorded, not started)."""
    told: list[int] = []
    monkeypatch.setattr(index.background, "kick", lambda: told.append(1))
    return told


def run_background(index: SearchIndex) -> int:
    """Run `index`'s background indexing to its end, as its thread does; its steps."""
    steps = 1
    while index._background_step():
        steps += 1
    return steps


@contextmanager
def holding(root: Path) -> Iterator[None]:
    """Another connection holds the index database's write lock (a writer of another
    process or handle, indexing)."""
    name = (root / "index" / "current").read_text().strip()
    other = sqlite3.connect(root / "index" / name, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield
        other.execute("ROLLBACK")
    finally:
        other.close()


def outputs(root: Path, index: SearchIndex, agent: str) -> ToolResultStore:
    return ToolResultStore(root, 7, on_saved=lambda p: index.output_saved(p, agent=agent))


async def test_a_search_counts_what_it_read_in_its_own_path(tmp_path: Path) -> None:
    """What another handle appended is read into the search's tail (`_search_tail`), never
    committed by it: before, each such search indexed it with a commit of its own."""
    writer, searcher = SearchIndex(tmp_path), SearchIndex(tmp_path)  # two handles of one store
    try:
        dialog = DialogStore(
            tmp_path, record_fields={"agent": "a"}, on_append=writer.dialog_appended
        )
        await dialog.append([Msg("user", "the quokka record", "user")])  # left to the background
        first = searcher.search("quokka")
        assert [h.kind for h in first.hits] == ["dialog"]
        again = searcher.search("quokka")
        assert again.hits == first.hits
        assert dict(searcher.search_work.items()) == {
            "searches": 2,
            "files_indexed": 0,
            "commits": 0,
            "tail_files": 2,  # the day file, read past the index by each search
        }
        run_background(writer)
        committed = searcher.search("quokka").hits
        assert [replace(h, score=0) for h in committed] == [replace(h, score=0) for h in first.hits]
        assert committed[0].score == pytest.approx(first.hits[0].score, rel=1e-6)  # BM25 alike
        assert searcher.search_work.tail_files == 2  # committed: nothing past the index
    finally:
        writer.close()
        searcher.close()


def test_a_save_the_index_was_too_busy_for_is_indexed_by_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A save's notification never waits: when another writer holds the index it is skipped.
    Before, nothing was told to catch up, and the next search of any handle indexed the
    output in its own path, with a text index commit (some 100 ms to seconds on a busy
    disk: the slow first searches after the others wrote); now the saving handle's
    background indexing is started, and the next search finds the output indexed."""
    saver, searcher = SearchIndex(tmp_path), SearchIndex(tmp_path)
    try:
        outputs(tmp_path, saver, "a").save("an earlier output\n")  # the index exists
        told = kicks(saver, monkeypatch)
        with holding(tmp_path):
            path = outputs(tmp_path, saver, "a").save("the wombat output\n")
        assert told == [1]  # skipped, and left to the background indexing
        assert run_background(saver) == 1
        result = searcher.search("wombat")
        assert [h.path for h in result.hits] == [path]
        assert result.hits[0].agent == "a"  # the owner kept while the index was busy
        assert (searcher.search_work.files_indexed, searcher.search_work.commits) == (0, 0)
    finally:
        saver.close()
        searcher.close()


def test_a_save_indexed_at_once_asks_the_background_for_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    saver, searcher = SearchIndex(tmp_path), SearchIndex(tmp_path)
    try:
        told = kicks(saver, monkeypatch)
        path = outputs(tmp_path, saver, "a").save("the numbat output\n")
        assert told == []
        assert [h.path for h in searcher.search("numbat").hits] == [path]
        assert (searcher.search_work.files_indexed, searcher.search_work.commits) == (0, 0)
    finally:
        saver.close()
        searcher.close()


async def test_the_background_indexing_lets_a_waiting_search_go_first(tmp_path: Path) -> None:
    """Before, a search waiting for the index (here for its own handle, as for one of its
    background steps) found the other handles' background steps taking the index before it,
    one after another, each with its commit: a chain of seconds on a busy disk. Now each
    background step of the process takes nothing while a search of its index waits, and the
    search reads what it needs into its tail."""
    writer, searcher = SearchIndex(tmp_path), SearchIndex(tmp_path)
    try:
        dialog = DialogStore(
            tmp_path, record_fields={"agent": "a"}, on_append=writer.dialog_appended
        )
        await dialog.append([Msg("user", "the bilby record", "user")])
        answer: list[SearchResult] = []
        searcher.db._lock.acquire()  # the searcher's handle is busy: its search waits
        try:
            thread = threading.Thread(target=lambda: answer.append(searcher.search("bilby")))
            thread.start()
            while not searches_waiting(searcher.root) and thread.is_alive():  # until it waits
                time.sleep(0.001)
            assert writer._background_step() is True  # more to do, later
            assert writer._indexed == 0  # it took nothing
        finally:
            searcher.db._lock.release()
        thread.join()
        assert [h.kind for h in answer[0].hits] == ["dialog"]
        assert (searcher.search_work.files_indexed, searcher.search_work.commits) == (0, 0)
        assert searcher.search_work.tail_files == 1
        assert not searches_waiting(searcher.root)
        assert run_background(writer) == 1  # now it takes the record, in one step
        assert writer._indexed == 1
    finally:
        writer.close()
        searcher.close()


def test_a_forked_child_does_not_wait_for_its_parents_searches(tmp_path: Path) -> None:
    """A child forked while a search of its parent runs has not that search's thread: its
    background indexing must not wait for it."""
    with searching(tmp_path):
        assert searches_waiting(tmp_path)
        with multiprocessing.get_context("fork").Pool(1) as pool:
            assert pool.apply(searches_waiting, (tmp_path,)) is False
    assert not searches_waiting(tmp_path)


HANG_SECONDS = 30.0


class SlowMerges:
    """Tantivy's writer, its merges held until `done` is set (as a large merge on a busy
    machine: seconds to a minute)."""

    def __init__(self, writer: object, done: threading.Event) -> None:
        self._writer, self._done = writer, done

    def wait_merging_threads(self) -> None:
        self._done.wait(HANG_SECONDS)  # bounded: a search waiting for them fails, not hangs
        self._writer.wait_merging_threads()  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._writer, name)


async def test_a_search_waits_for_the_merges_of_its_commit_only_until_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, a search that indexed what it needed waited for the merges its commit started,
    however long they took (they grow with the index: 77 s once at 10,000 messages on this
    machine under load); now it waits until its catch-up's deadline at most, and they finish
    on their own thread, whose writer the next commit waits for. Saves and the background
    indexing wait for them as before. (A search commits only what is past its tail's bound:
    here everything.)"""
    monkeypatch.setattr(search_module, "TAIL_BYTES", 0)
    index = SearchIndex(tmp_path)
    try:
        outputs(tmp_path, index, "a").save("the first output\n")
        dialog = DialogStore(
            tmp_path, record_fields={"agent": "a"}, on_append=index.dialog_appended
        )
        await dialog.append([Msg("user", "the dunnart record", "user")])
        done = threading.Event()
        real = text_batch_module._writer
        monkeypatch.setattr(
            text_batch_module, "_writer", lambda *args: SlowMerges(real(*args), done)
        )
        result = index.search("dunnart", catch_up_seconds=1.0)  # its merges are held
        assert [h.kind for h in result.hits] == ["dialog"]  # committed: found
        assert index.search_work.commits == 1
        merging = index.db.run(lambda db: db.text.merging)
        assert merging is not None and merging.is_alive()  # the search went on without them
        done.set()
        index.close()  # waits for them
        assert not merging.is_alive()
        assert [h.kind for h in index.search("dunnart").hits] == ["dialog"]
    finally:
        done.set()
        index.close()
