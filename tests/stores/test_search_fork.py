"""A process forked while one of its threads is inside `_search_turns.searching` (the
background indexing polls it every few milliseconds) searches in the child: the lock the
parent held at the fork was held forever in the child, whose first search hung (the forked
writers of tests/stores/test_search.py::test_two_processes_indexing_at_once, now and then)."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path

import agentscope_ctx.stores._search_record as record_module
import agentscope_ctx.stores._search_tail_output as output_module
import agentscope_ctx.stores._search_turns as turns
from agentscope_ctx.core._entry import Msg
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._search import SearchIndex
from agentscope_ctx.stores._tool_results import ToolResultStore
from tests.stores.test_search import HANG_SECONDS


def _forked(target: Callable[[str], None], root: Path) -> BaseProcess:
    """`target(root)` in a child forked now (while the caller holds what it holds)."""
    child = multiprocessing.get_context("fork").Process(target=target, args=(str(root),))
    child.start()
    return child


def _ended(child: BaseProcess) -> bool:
    """Whether `child` ended well; killed when it has not ended after `HANG_SECONDS` (a
    liveness guard: it returns at once)."""
    child.join(HANG_SECONDS)
    if child.exitcode is None:
        child.kill()
        child.join()
        return False
    return child.exitcode == 0


def _search_once(root: str) -> None:
    with turns.searching(Path(root)):
        pass


def test_a_child_forked_while_the_lock_is_held_can_search(tmp_path: Path) -> None:
    with turns._searches_lock:  # as a background thread holds it at the fork
        child = _forked(_search_once, tmp_path)
    assert _ended(child), "the forked child hung on the parent's lock"


def _search_tail(root: str) -> None:
    index = SearchIndex(Path(root))
    try:
        assert len(index.search("okapi").hits) == 2  # a record and an output, from the tail
    finally:
        index.close()


def test_a_child_forked_while_a_tail_memo_is_held_can_search(tmp_path: Path) -> None:
    """The memos of the tail (`_search_record`, `_search_tail_output`) are locked while a
    search reads them: a child forked then held their locks forever (the first CI run of
    0d5029c: a forked writer of test_two_processes_indexing_at_once hung, 1 of 1,356)."""
    SearchIndex(tmp_path).close()  # the index made, then records and an output past it
    asyncio.run(DialogStore(tmp_path).append([Msg("user", "the okapi record", "user")]))
    ToolResultStore(tmp_path, 7).save("an okapi output\n")
    with record_module._MEMO.lock, output_module._MEMO.lock:  # as a search holds them
        child = _forked(_search_tail, tmp_path)
    assert _ended(child), "the forked child hung on the parent's memo"


def test_a_child_forked_while_the_kept_owners_are_locked_can_search(tmp_path: Path) -> None:
    """The owners kept while the index was busy are one set per working dir, shared by the
    process's handles (`_search_kept`), whose threads lock it to keep or write them: a child
    forked then would hold that lock forever, its first search hanging."""
    parent = SearchIndex(tmp_path)  # the working dir's kept owners, which the child inherits
    asyncio.run(DialogStore(tmp_path).append([Msg("user", "the okapi record", "user")]))
    ToolResultStore(tmp_path, 7).save("an okapi output\n")
    try:
        with parent._kept.lock:  # as a handle's thread holds it at the fork
            child = _forked(_search_tail, tmp_path)
        assert _ended(child), "the forked child hung on the parent's kept owners"
    finally:
        parent.close()
