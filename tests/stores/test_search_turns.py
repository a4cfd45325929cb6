"""A search goes first (`stores._search_turns`, issue 46 item 11): while a search of the
process runs on one thread, the indexing on the others hands it the interpreter lock at each
chunk (local: `tests/stores/test_search_tail.py`; PostgreSQL's blocks: here), never a thread
to itself, and nobody when no search runs."""

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
    assert len(handed) >= sum(b.count for b in blocks) > 100 and set(handed) == {get_ident()}


def test_a_search_never_hands_the_interpreter_to_itself(handed: list[int]) -> None:
    with turns.searching(("postgres", "agentscope_ctx")):
        cut_blocks(DATA, 0, 1)  # (a search's own catch-up indexes dialog rows so)
        turns.yield_to_searches()
    assert handed == []
    assert not turns._searches  # none left marked
