"""A rebuilt local index keeps the owners of the saved outputs (issue 46 item 7): the newest
outputs, which no dialog record names yet, are still found by their own session's search,
and never by another's, after the index is damaged or deleted and made again."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._search import Filters, SearchIndex
from agentscope_ctx.stores._tool_results import ToolResultStore

SESSIONS = ("s1", "s2")


def text_dir(root: Path) -> Path:
    name = (root / "index" / "current").read_text().strip()
    return root / "index" / ("tantivy-" + name[len("search-") : -len(".sqlite3")])


def db_file(root: Path) -> Path:
    return root / "index" / (root / "index" / "current").read_text().strip()


async def two_sessions(index: SearchIndex) -> dict[str, Path]:
    """Each session: a dialog record, then its newest output (which no record names)."""
    newest = {}
    for session in SESSIONS:
        dialog = DialogStore(
            index.root,
            record_fields={"agent": "alice", "session": session},
            on_append=index.dialog_appended,
        )
        await dialog.append([Msg("user", f"the dialog of {session} mentions the okapi", "user")])
        store = ToolResultStore(
            index.root,
            7,
            on_saved=lambda p, s=session: index.output_saved(p, agent="alice", session=s),
            owner=("alice", session),
        )
        newest[session] = store.save("".join(f"row {i}\n" for i in range(30)) + "an okapi\n")
        index.describe_output(newest[session], tool="fetch_logs", args=f"day={session}")
    return newest


def found(index: SearchIndex, session: str) -> set[tuple[str, str]]:
    filters = Filters(tenant=Tenant.of("alice", session))
    result = index.search("okapi", filters, limit=10, catch_up_seconds=None)
    return {(h.kind, h.path.name) for h in result.hits}


def owners(root: Path) -> dict[str, tuple[str | None, ...]]:
    with sqlite3.connect(db_file(root)) as db:
        rows = db.execute(
            "SELECT path, agent, session, tool FROM docs WHERE kind = 'tool_result'"
        ).fetchall()
    return {Path(path).name: tuple(rest) for path, *rest in rows}


def _delete_index(root: Path) -> None:
    shutil.rmtree(root / "index")


def _garble_database(root: Path) -> None:
    path = db_file(root)
    data = bytearray(path.read_bytes())
    data[:100] = b"\x00" * 100  # its header: not a database
    path.write_bytes(bytes(data))
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def _delete_text_meta(root: Path) -> None:
    (text_dir(root) / "meta.json").unlink()


def _rebuild(root: Path) -> None:
    SearchIndex(root).rebuild()


@pytest.mark.parametrize(
    "damage",
    [_delete_index, _garble_database, _delete_text_meta, _rebuild],
    ids=lambda f: f.__name__,
)
async def test_each_session_finds_its_newest_output_after_a_rebuild(
    tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    index = SearchIndex(tmp_path)
    newest = await two_sessions(index)
    expected = {
        s: {("dialog", p.name) for p in (tmp_path / "dialog").glob("*.jsonl")}
        | {("tool_result", newest[s].name)}
        for s in SESSIONS
    }
    assert {s: found(index, s) for s in SESSIONS} == expected
    index.close()
    damage(tmp_path)
    fresh = SearchIndex(tmp_path)
    assert {s: found(fresh, s) for s in SESSIONS} == expected
    kept = owners(tmp_path)
    for session in SESSIONS:
        assert kept[newest[session].name][:2] == ("alice", session)
    if damage is not _delete_index and damage is not _garble_database:
        # the database was readable: what it knew of each output (its tool too) is kept
        assert {kept[newest[s].name][2] for s in SESSIONS} == {"fetch_logs"}
    fresh.close()


async def test_an_output_of_another_session_is_not_claimed(tmp_path: Path) -> None:
    """After the index is lost, a session's search claims only the outputs whose name carries
    its own tags; the other session's stays unowned until its own search (or a record)."""
    index = SearchIndex(tmp_path)
    newest = await two_sessions(index)
    index.close()
    _delete_index(tmp_path)
    fresh = SearchIndex(tmp_path)
    assert ("tool_result", newest["s1"].name) in found(fresh, "s1")
    kept = owners(tmp_path)
    assert kept[newest["s1"].name][:2] == ("alice", "s1")
    assert kept[newest["s2"].name][:2] == (None, None)
    everyone = fresh.search("okapi", Filters(tenant=Tenant.of("bob", "s2")), limit=10)
    assert everyone.hits == []
    fresh.close()
