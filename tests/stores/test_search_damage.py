"""The local text index damaged while a worker has it open (issue 46 item 8): for each kind
of damage (`tests/support/index_damage.KINDS`: each segment file truncated, zeroed, garbled or
deleted; ``meta.json`` truncated, garbled or deleted), the worker keeps answering, says the
index was damaged, rebuilds it, and finds every record and output again, owners kept, the
background indexer going on. Run in a child process: a truncated file under Tantivy's memory
maps killed the process with SIGBUS, which must not kill the test runner."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agentscope_ctx.stores._search_guard import tantivy_errors
from agentscope_ctx.stores._search_tantivy import (
    TextIndexError,
    _register,
    create_index,
    is_panic,
    open_index,
)
from tests.support.index_damage import KINDS

if TYPE_CHECKING:
    from tests.support.forked import Forker

ROOT = Path(__file__).resolve().parents[2]


def damaged_runs(forker: Forker, *args: str) -> dict[str, dict[str, object]]:
    """Run the damage harness in a child process (forked after ``import agentscope``: a fresh
    interpreter's import took 2.5 s a run on 1.x, at a load of 6); its report per kind."""
    child = forker.run(["-m", "tests.support.index_damage", *args], cwd=ROOT, timeout=600)
    reports = {r["kind"]: r for r in map(json.loads, child.stdout.splitlines())}
    asked = [a for a in args if not a.startswith("--")] or list(KINDS)
    missing = [kind for kind in asked if kind not in reports]
    assert not missing, (
        f"the worker died (exit {child.returncode}) at {missing[0]!r}: {child.stderr[-2000:]}"
    )
    return reports


def test_each_kind_of_damage_while_open_is_rebuilt_and_found_again(forker: Forker) -> None:
    reports = damaged_runs(forker)
    assert len(KINDS) == 27
    failed = {kind: r for kind, r in reports.items() if r["ok"] is not True}
    assert not failed
    for kind, report in reports.items():
        assert "the search index was damaged" in str(report["first"]), kind


def test_a_truncated_file_met_by_a_save_and_the_background_first(forker: Forker) -> None:
    kinds = [k for k in KINDS if k.startswith("truncate:")] + ["zero:store", "delete:idx"]
    reports = damaged_runs(forker, "--save-first", *kinds)
    assert {kind: r["ok"] for kind, r in reports.items()} == dict.fromkeys(kinds, True)


def test_without_inotify_the_files_stat_finds_the_damage(forker: Forker) -> None:
    kinds = [k for k in KINDS if k.endswith((":idx", ":store"))] + ["delete:meta.json"]
    reports = damaged_runs(forker, "--no-watch", *kinds)
    assert {kind: r["ok"] for kind, r in reports.items()} == dict.fromkeys(kinds, True)
    assert all("the search index was damaged" in str(r["first"]) for r in reports.values())


def test_only_the_guard_reloads_an_open_index(tmp_path: Path) -> None:
    """Tantivy's reader reloaded itself on a commit (a thread of its own polls ``meta.json``),
    mapping and reading new segments no `MappedFiles.check` had stamped: a file damaged at
    that moment killed the damage harness's worker with SIGBUS now and then under load (3 of
    some 40 runs of its truncations, 2026-12-07; none in 180 after). An index the package opens is reloaded by the guard alone.
    A reader opened with Tantivy's default beside it shows the commit was seen (its poll runs
    every 500 ms: two commits, each waited for, leave the package's reader time for a poll)."""
    import tantivy

    create_index(tmp_path / "t")
    ours = open_index(tmp_path / "t")
    theirs = _register(tantivy.Index.open(str(tmp_path / "t")))  # Tantivy's default
    writer = ours.writer(heap_size=15_000_000, num_threads=1)
    for count in (1, 2):
        writer.add_document(tantivy.Document(terms=f"okapi {count}"))
        writer.commit()
        while theirs.searcher().num_docs < count:  # until its poll has seen the commit
            time.sleep(0.01)
    writer.wait_merging_threads()
    assert ours.searcher().num_docs == 0  # not reloaded behind the guard's back
    ours.reload()
    assert ours.searcher().num_docs == 2


PanicException = type("PanicException", (BaseException,), {"__module__": "pyo3_runtime"})


def test_a_panic_of_the_bindings_is_a_damaged_index_and_nothing_else_is(tmp_path: Path) -> None:
    assert is_panic(PanicException("index out of bounds"))
    with pytest.raises(TextIndexError, match=r"corrupt.*panicked"):
        with tantivy_errors(tmp_path):
            raise PanicException("index out of bounds: the len is 8 but the index is 8")
    with pytest.raises(TextIndexError, match="corrupt"):
        with tantivy_errors(tmp_path):
            raise ValueError("Failed to open file for read")
    for exc in (KeyboardInterrupt(), SystemExit(1), asyncio.CancelledError(), GeneratorExit()):
        assert not is_panic(exc)
        with pytest.raises(type(exc)):
            with tantivy_errors(tmp_path):
                raise exc
