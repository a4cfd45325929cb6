"""Damage the local search's text index while a worker has it open (issue 46 item 8), one
kind of damage at a time, and report what the worker then does: run as a script (a damage
that crashes the process, a SIGBUS from a truncated memory-mapped file, must not kill the test
runner): ``python -m tests.support.index_damage [--save-first] [--no-watch] [KIND ...]``, one
JSON line per kind (all of them by default; ``--save-first``: the damage is met by a save and
the background indexer before a search; ``--no-watch``: without inotify, the files checked by
their ``stat`` alone).

The kinds (`KINDS`): each of Tantivy's segment files (``.idx`` postings, ``.pos`` positions,
``.store`` stored fields, ``.term`` term dictionary, ``.fast`` fast fields, ``.fieldnorm``
field norms) truncated (to the page boundary below half its size: 0 for a small file),
zeroed (its bytes overwritten by zeros, its size kept), garbled (every other byte flipped)
or deleted; and ``meta.json`` truncated, garbled or deleted: 6 x 4 + 3 = 27.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.search._search_hits import format_result
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._search import Filters, SearchIndex
from agentscope_ctx.stores._tool_results import ToolResultStore

SEGMENT_FILES = ("idx", "pos", "store", "term", "fast", "fieldnorm")
DAMAGES = ("truncate", "zero", "garble", "delete")
KINDS = tuple(f"{d}:{e}" for e in SEGMENT_FILES for d in DAMAGES) + tuple(
    f"{d}:meta.json" for d in ("truncate", "garble", "delete")
)
SESSIONS = ("s1", "s2")


def text_dir(root: Path) -> Path:
    name = (root / "index" / "current").read_text().strip()
    return root / "index" / ("tantivy-" + name[len("search-") : -len(".sqlite3")])


def damage(root: Path, kind: str) -> list[str]:
    """Apply `kind` to the files of the text index; the names of the files damaged."""
    how, what = kind.split(":")
    folder = text_dir(root)
    files = [p for p in folder.iterdir() if p.name == what or p.suffix == "." + what]
    for path in files:
        if how == "delete":
            path.unlink()
            continue
        size = path.stat().st_size
        with open(path, "r+b") as file:
            if how == "truncate":
                file.truncate((size // 2) & ~4095)
            elif how == "zero":
                file.write(b"\0" * size)
            else:
                data = bytearray(file.read())
                for at in range(0, len(data), 2):
                    data[at] ^= 0xA5
                file.seek(0)
                file.write(bytes(data))
    return sorted(p.name for p in files)


async def fill(index: SearchIndex) -> dict[str, set[tuple[str, str]]]:
    """Two sessions of one agent: each a dialog record and its newest output (no record
    names it); what each session's search of ``okapi`` must find."""
    expected: dict[str, set[tuple[str, str]]] = {}
    for session in SESSIONS:
        dialog = DialogStore(
            index.root,
            record_fields={"agent": "alice", "session": session},
            on_append=index.dialog_appended,
        )
        await dialog.append([Msg("user", f"the okapi of {session}", "user")])
        store = ToolResultStore(
            index.root,
            7,
            on_saved=lambda p, s=session: index.output_saved(p, agent="alice", session=s),
            owner=("alice", session),
        )
        path = store.save("".join(f"row {i}\n" for i in range(300)) + f"an okapi of {session}\n")
        index.describe_output(path, tool="fetch_logs", args=None)
        expected[session] = {("tool_result", path.name)}
    for session in SESSIONS:
        expected[session] |= {("dialog", p.name) for p in (index.root / "dialog").glob("*.jsonl")}
    return expected


def found(index: SearchIndex, session: str, seconds: float | None) -> tuple[set, str]:
    filters = Filters(tenant=Tenant.of("alice", session))
    result = index.search("okapi", filters, limit=10, catch_up_seconds=seconds)
    hits = {(h.kind, h.path.name) for h in result.hits}
    text = format_result(result, "okapi", shared=False, max_bytes=4000)
    return hits, text


def owners(root: Path) -> dict[str, list[object]]:
    name = (root / "index" / "current").read_text().strip()
    with sqlite3.connect(root / "index" / name) as db:
        rows = db.execute(
            "SELECT DISTINCT path, agent, session, tool FROM docs WHERE kind = 'tool_result'"
        ).fetchall()
    return {Path(r[0]).name: list(r[1:]) for r in rows}


def later_output(index: SearchIndex) -> None:
    ToolResultStore(
        index.root,
        7,
        on_saved=lambda p: index.output_saved(p, agent="alice", session="s1"),
        owner=("alice", "s1"),
    ).save("a later okapi\n")
    index.dialog_appended()  # the background indexer runs


def settle(index: SearchIndex) -> None:
    """Wait until nothing reads the index's files: the background step in flight (the thread
    stops after it; the next save starts it again) and the merges a search's commit left
    running. The damage is then done while the index is open and idle, the case the package
    guards (`stores._search_guard`); a file truncated under a read already in flight is the
    race that module's docstring names (a SIGBUS of the worker, as of any program reading a
    file truncated under its maps), and a busy machine made this harness meet it now and then
    (a worker killed by SIGBUS, exit -7, in 2 of some 4 suite runs under load)."""
    index.background.close(timeout=60)
    db = index.db._db
    if db is not None:
        db.text.wait_merges()


def run(kind: str, save_first: bool = False) -> dict[str, object]:
    """Fill a store, search it (the maps open), damage it, then search on: what the first
    search after the damage answered, and whether a later one finds everything, owned."""
    with tempfile.TemporaryDirectory() as tmp:
        index = SearchIndex(Path(tmp))
        try:
            return _run(index, kind, save_first)
        finally:
            index.close()


def _run(index: SearchIndex, kind: str, save_first: bool) -> dict[str, object]:
    report: dict[str, object] = {"kind": kind, "save_first": save_first}
    if True:
        root = index.root
        expected = asyncio.run(fill(index))
        for session in SESSIONS:
            assert found(index, session, None)[0] == expected[session], "before the damage"
        settle(index)
        report["files"] = damage(root, kind)
        if save_first:  # the damage is met by a save (and the background indexer) first
            try:
                later_output(index)
                index.background.close(timeout=60)
            except BaseException as exc:
                report["first"] = f"raised {type(exc).__module__}.{type(exc).__name__}: {exc}"
                report["ok"] = False
                return report
        try:
            first, text = found(index, "s1", 10.0)
            report["first"] = text
        except BaseException as exc:  # what the worker would see: KeyboardInterrupt too
            report["first"] = f"raised {type(exc).__module__}.{type(exc).__name__}: {exc}"
            report["ok"] = False
            return report
        if not save_first:  # a save after the damage: the background indexer goes on
            later_output(index)
        index.background.close(timeout=60)
        later = {}
        try:
            for session in SESSIONS:
                later[session] = found(index, session, None)[0]
        except BaseException as exc:
            report["later"] = f"raised {type(exc).__module__}.{type(exc).__name__}: {exc}"
            report["ok"] = False
            return report
        kept = owners(root)
        report["later"] = {s: sorted(map(list, later[s])) for s in SESSIONS}
        report["owners"] = kept
        outputs_ok = all(
            kept.get(name, [None, None])[:2] == ["alice", s]
            for s in SESSIONS
            for kind_, name in expected[s]
            if kind_ == "tool_result"
        )
        report["ok"] = (
            all(expected[s] <= later[s] for s in SESSIONS)
            and not (later["s1"] & expected["s2"] - expected["s1"])
            and not (later["s2"] & expected["s1"] - expected["s2"])
            and len(later["s1"]) == len(expected["s1"]) + 1  # the later output too
            and outputs_ok
        )
    return report


if __name__ == "__main__":
    import faulthandler

    faulthandler.enable()  # a crash's stacks on stderr, also in a child forked by a `Forker`
    args = sys.argv[1:]
    save_first = "--save-first" in args
    if "--no-watch" in args:  # the files stat-ed at every check, as where inotify is not
        import agentscope_ctx.stores._search_guard as guard

        guard._inotify = lambda: None  # type: ignore[assignment]
    for name in [a for a in args if not a.startswith("--")] or KINDS:
        print(json.dumps(run(name, save_first)), flush=True)
