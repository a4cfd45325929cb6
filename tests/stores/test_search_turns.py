"""A search goes first (`stores._search_turns`, issue 46 item 11): while a search of the
process runs on one thread, the indexing on the others waits for it at its next chunk (once
per search, `HANDOFF_SECONDS` at most), then hands it the interpreter lock at each chunk
(local: `tests/stores/test_search_tail.py`; PostgreSQL's blocks: here), never a thread to
itself, and nobody when no search runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from threading import get_ident
from types import SimpleNamespace

import pytest

import agentscope_ctx.stores._search_turns as turns
from agentscope_ctx.stores.postgres._blocks import cut_blocks


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The threads that handed the interpreter over (`time.sleep(0)` in `yield_to_searches`)."""
    threads: list[int] = []
    monkeypatch.setattr(turns, "time", SimpleNamespace(sleep=lambda _: threads.append(get_ident())))
    return threads


@contextmanager
def a_search_running(key: object) -> Iterator[None]:
    """A search of the index `key` runs on another thread meanwhile."""
    running, done = threading.Event(), threading.Event()

    def search() -> None:
        with turns.searching(key):  # type: ignore[arg-type]
            running.set()
            done.wait()

    thread = threading.Thread(target=search)
    thread.start()
    running.wait()
    try:
        yield
    finally:
        done.set()
        thread.join()


DATA = "".join(f"line {k} of a marmot output\n" for k in range(2000)).encode()


def test_the_postgresql_blocks_are_cut_handing_the_interpreter_to_a_search(
    handed: list[int],
) -> None:
    cut_blocks(DATA, 0, 1)
    assert handed == []  # no search runs
    with a_search_running(("postgres", "agentscope_ctx")):
        blocks = cut_blocks(DATA, 0, 1)
    chunks = sum(b.count for b in blocks)
    # the first chunk waited for the search (`HANDOFF_SECONDS`: it never ends here), the others
    # handed the interpreter over
    assert len(handed) >= chunks - 1 and chunks > 100 and set(handed) == {get_ident()}


def test_an_indexing_thread_waits_until_the_search_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Handing the interpreter over at each chunk left a search competing for it with every
    indexing thread of the process (ten in the live benchmark: p95 73 ms at 100k messages on
    an idle machine); such a thread now waits while the search runs."""
    monkeypatch.setattr(turns, "HANDOFF_SECONDS", 600.0)  # (never reached: the search ends)
    events: list[str] = []

    def index() -> None:
        turns.yield_to_searches()
        events.append("indexed")

    with a_search_running("/work/x"):
        thread = threading.Thread(target=index)
        thread.start()
        while not turns._none_running._waiters:  # type: ignore[attr-defined]
            thread.join(0.001)  # (until it waits)
        events.append("search ended")
    thread.join()
    assert events == ["search ended", "indexed"]


def test_an_indexing_thread_waits_once_per_search(
    handed: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search that waits for what the indexing thread holds (the index's writer, a pool
    connection) costs it `HANDOFF_SECONDS` once, not at every chunk."""
    monkeypatch.setattr(turns, "HANDOFF_SECONDS", 0.0)
    with a_search_running("/work/x"):
        turns.yield_to_searches()  # waits (here: not at all)
        assert handed == []
        turns.yield_to_searches()
        turns.yield_to_searches()
        assert handed == [get_ident()] * 2  # then hands over only
        with a_search_running("/work/y"):
            turns.yield_to_searches()  # another search started: waits again
            assert handed == [get_ident()] * 2


def test_a_search_never_hands_the_interpreter_to_itself(handed: list[int]) -> None:
    with turns.searching(("postgres", "agentscope_ctx")):
        cut_blocks(DATA, 0, 1)  # (a search's own catch-up indexes dialog rows so)
        turns.yield_to_searches()
    assert handed == []
    assert not turns._searches  # none left marked
