"""A process forked while one of its threads is inside `_search_turns.searching` (the
background indexing polls it every few milliseconds) searches in the child: the lock the
parent held at the fork was held forever in the child, whose first search hung (the forked
writers of tests/stores/test_search.py::test_two_processes_indexing_at_once, now and then)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import agentscope_ctx.stores._search_turns as turns
from tests.stores.test_search import HANG_SECONDS


def _search_once(root: str) -> None:
    with turns.searching(Path(root)):
        pass


def test_a_child_forked_while_the_lock_is_held_can_search(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    with turns._searches_lock:  # as a background thread holds it at the fork
        child = context.Process(target=_search_once, args=(str(tmp_path),))
        child.start()
    child.join(HANG_SECONDS)  # a liveness guard: the child returns at once
    hung = child.exitcode is None
    if hung:
        child.kill()
        child.join()
    assert not hung and child.exitcode == 0, "the forked child hung on the parent's lock"
