"""`forget_local`: a `ForgetTarget`'s bytes removed from a working dir (docs/data.md).

In this order, so that what tells whose a file is (the dialog records, the index's owners)
goes last and a forget run again after a kill finds what is left:

1. the owners to forget: the (agent key, session) pairs the dialog records and the search
   index's ``docs`` and ``owners`` rows name (a user's agent keys are known from these);
2. ``tool_result/`` files whose name carries a forgotten owner's tags, or whose owner the
   index names, and retention's tombstones of such outputs (``NAME.txt.deleted``: the same
   tags);
3. ``media/<agent tag>-<session tag>/`` folders;
4. the steps (``usage/steps/<session>/<agent>.jsonl``) and usage (``usage/*.json``)
   records: by the agent key a record carries (``key``), else by the owners' (agent name,
   session) pairs; their lines are filtered, a file left empty is removed; and the
   viewer's pages of the owners' sessions in the working dir (``*.html`` whose title names
   the session: ``view`` writes ``view.html`` there);
5. the dialog: under ``dialog/.lock`` (held exclusively, as an append holds it), each day
   file holding a forgotten record is written again (a new file renamed over it) with each
   such record's line left empty, so every other record keeps its line number (a search
   hit's pointer reads the same); a file left with no record is removed; a day's tombstone
   (``YYYY-MM-DD.jsonl.deleted``) no longer names the forgotten owners' tags;
6. the search index: while holding its write lock (so no catch-up that read the files
   before step 5 is still writing), a new generation replaces it (a new SQLite file and
   Tantivy directory; the old ones are deleted, `_search_db.IndexDatabase._replace`), then
   it is filled again from the files. The forgotten documents are not marked deleted in a
   segment: the segments and the database file holding them are gone. This costs a
   rebuild of the working dir's index, done at every forget (also one that finds nothing,
   so a forget killed after step 5 is completed by the next).

Long-term memory (``memory/MEMORY.md``, the daily notes, ``.consolidate.json``) belongs to
the working dir: its lines name no tenant, so a forget leaves it as it is and says so in
its report (docs/data.md).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core._errors import PersistenceError
from ..core._private import FILE_MODE, write_atomic
from ..core._tenant import owner_tag
from ._dialog_dir import DialogDir
from ._dialog_record import decode_owned
from ._forget_target import ForgetReport, ForgetTarget, Step
from ._tombstones import SUFFIX
from ._tool_results import name_tags

if sys.platform != "win32":
    import fcntl

__all__ = [
    "SHARED_MEMORY_NOTE",
    "forget_local",
    "forget_media",
    "forget_pages",
    "forget_usage_files",
    "usage_match",
]

SHARED_MEMORY_NOTE = (
    "memory: memory/ (MEMORY.md, the daily notes) belongs to the working dir and names no "
    "tenant: left as it is"
)
Owners = set[tuple[str, str]]


def forget_local(
    working_dir: Path,
    target: ForgetTarget,
    *,
    dry_run: bool = False,
    search: Any = None,
    on_step: Step | None = None,
) -> ForgetReport:
    """Forget `target` in `working_dir` (see the module docstring); `search` is the
    `SearchIndex` of the working dir to use (`None`: one opened for the call).

    Raises:
        PersistenceError: a file cannot be read or written (running it again is safe).
    """
    report = ForgetReport(target, "local", dry_run)
    step = on_step or (lambda kind: None)
    root = Path(working_dir)
    owners = _dialog_owners(root, target) | _index_owners(root, target)
    report.add("index", _index_entries(root, target))
    _outputs(root, target, owners, report, dry_run)
    step("outputs")
    forget_media(root, target, owners, report, dry_run)
    step("media")
    forget_usage_files(root, target, owners, report, dry_run)
    forget_pages(root, target, owners, report, dry_run)
    step("usage")
    _dialog(root, target, owners, report, dry_run)
    step("dialog")
    report.notes.append(SHARED_MEMORY_NOTE)
    if not dry_run:
        _purge_index(root, search, target, owners)
    step("index")
    return report


# -- who is forgotten ------------------------------------------------------------------------


def _dialog_owners(root: Path, target: ForgetTarget) -> Owners:
    owners: Owners = set()
    for _, raw in _records(root / "dialog"):
        if raw.strip():
            _, agent, session = decode_owned(raw)
            if target.owns(agent, session):
                owners.add((agent, session))
    return owners


def _records(folder: Path) -> Iterator[tuple[str, bytes]]:
    """Every line of every regular day file of `folder` (a symbolic link is not read)."""
    if not folder.is_dir() or folder.is_symlink():
        return
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb") as file:
                for raw in file:
                    yield entry.name, raw


@contextmanager
def _index_db(root: Path) -> Iterator[sqlite3.Connection | None]:
    """The current generation of the search index, read only (`None`: none readable)."""
    try:
        name = (root / "index" / "current").read_text(encoding="utf-8").strip()
        path = root / "index" / name
        if not path.is_file():
            raise FileNotFoundError(path)
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=60)
    except (OSError, sqlite3.Error):
        yield None
        return
    try:
        yield db
    finally:
        db.close()


def _index_owners(root: Path, target: ForgetTarget) -> Owners:
    owners: Owners = set()
    with _index_db(root) as db:
        if db is None:
            return owners
        try:
            rows = db.execute(
                "SELECT DISTINCT agent, session FROM docs UNION "
                "SELECT DISTINCT agent, session FROM owners"
            ).fetchall()
        except sqlite3.Error:
            return owners
    for agent, session in rows:
        if target.owns(agent, session or ""):
            owners.add((agent, session or ""))
    return owners


def _index_entries(root: Path, target: ForgetTarget) -> int:
    with _index_db(root) as db:
        if db is None:
            return 0
        try:
            rows = db.execute(
                "SELECT agent, session, count(*) FROM docs GROUP BY agent, session"
            ).fetchall()
        except sqlite3.Error:
            return 0
    return sum(n for agent, session, n in rows if target.owns(agent, session or ""))


def _output_owners(root: Path, target: ForgetTarget) -> set[str]:
    """The ``tool_result/`` names the index says are the target's."""
    with _index_db(root) as db:
        if db is None:
            return set()
        try:
            rows = db.execute("SELECT name, agent, session FROM owners").fetchall()
        except sqlite3.Error:
            return set()
    return {
        str(name).removeprefix("tool_result/")
        for name, agent, session in rows
        if target.owns(agent, session or "")
    }


def _tagged(target: ForgetTarget, owners: Owners, tags: tuple[str, str]) -> bool:
    """Whether a file named by owner `tags` is the target's."""
    if target.key is not None:
        if tags[0] != owner_tag(target.key):
            return False
        if target.session is not None:
            return tags[1] == owner_tag(target.session)
        return True
    if target.prefix is None:  # a session alone: every agent's
        assert target.session is not None
        return tags[1] == owner_tag(target.session)
    return any(tags == (owner_tag(a), owner_tag(s)) for a, s in owners) or (
        target.session is None and tags[0] in {owner_tag(a) for a, _ in owners}
    )


# -- the files -------------------------------------------------------------------------------


def _outputs(
    root: Path, target: ForgetTarget, owners: Owners, report: ForgetReport, dry: bool
) -> None:
    folder = root / "tool_result"
    if not folder.is_dir() or folder.is_symlink():
        return
    named = _output_owners(root, target)
    for entry in os.scandir(folder):
        if not entry.is_file(follow_symlinks=False):
            continue
        if entry.name.endswith(SUFFIX):  # retention's tombstone of an output: its name's tags
            tags = name_tags(entry.name.removesuffix(SUFFIX))
            if tags is not None and _tagged(target, owners, tags):
                report.add("tombstones", 1, entry.stat(follow_symlinks=False).st_size)
                if not dry:
                    _unlink(Path(entry.path))
            continue
        tags = name_tags(entry.name)
        if entry.name in named or (tags is not None and _tagged(target, owners, tags)):
            report.add("outputs", 1, entry.stat(follow_symlinks=False).st_size)
            if not dry:
                _unlink(Path(entry.path))


def forget_media(
    root: Path, target: ForgetTarget, owners: Owners, report: ForgetReport, dry: bool
) -> None:
    folder = root / "media"
    if not folder.is_dir() or folder.is_symlink():
        return
    for entry in os.scandir(folder):
        parts = entry.name.split("-")
        if len(parts) != 2 or not entry.is_dir(follow_symlinks=False):
            continue
        if _tagged(target, owners, (parts[0], parts[1])):
            files = [p for p in Path(entry.path).rglob("*") if p.is_file() and not p.is_symlink()]
            report.add("media", len(files), sum(p.stat().st_size for p in files))
            if not dry:
                shutil.rmtree(entry.path)


def _norm(session: object) -> str:
    """A steps or usage record's session as a tenant's (``default``/`None`: none)."""
    return "" if session in (None, "default") or not isinstance(session, str) else session


_TITLE = re.compile(rb"<title>agentscope-ctx session (.*?)</title>", re.S)


def forget_pages(
    root: Path, target: ForgetTarget, owners: Owners, report: ForgetReport, dry: bool
) -> None:
    """Remove the viewer's pages in the working dir (``*.html``, as ``agentscope-ctx view``
    writes ``view.html``) of a forgotten owner's session: the page names its session in its
    title, and holds every agent's records of it."""
    sessions = {s or "default" for _, s in owners}
    if target.session is not None:
        sessions.add(target.session or "default")
    if not sessions or not root.is_dir():
        return
    for path in sorted(root.glob("*.html")):
        if path.is_symlink() or not path.is_file():
            continue
        with open(path, "rb") as file:
            head = file.read(4096)
        title = _TITLE.search(head)
        if title is None:
            continue
        if html.unescape(title.group(1).decode("utf-8", "replace")) in sessions:
            report.add("pages", 1, path.stat().st_size)
            if not dry:
                _unlink(path)


def usage_match(target: ForgetTarget, owners: Owners) -> Any:
    """Whether a steps or usage record of (agent name, session[, agent key]) is the
    target's: by its agent key when it carries one (``key``), else by the names of the
    owners' agents in their sessions (a record of an older build names the agent only)."""
    named = {(target.name_of(a), s) for a, s in owners}
    if target.agent is not None and target.session is not None:
        named.add((target.agent, target.session))

    def match(agent: object, session: object, key: object = None) -> bool:
        if isinstance(key, str):
            return target.owns(key, _norm(session))
        if target.key is None and target.prefix is None:  # a session alone
            return _norm(session) == target.session
        return (agent, _norm(session)) in named

    return match


def forget_usage_files(
    root: Path, target: ForgetTarget, owners: Owners, report: ForgetReport, dry: bool
) -> None:
    """Remove the target's steps lines and usage records from ``root/usage`` (the owners:
    its (agent key, session) pairs, as the store knows them)."""
    match = usage_match(target, owners)
    usage = root / "usage"
    if not usage.is_dir() or usage.is_symlink():
        return
    for path in sorted(usage.glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and match(*_owner_fields(record)):
            report.add("usage", 1, path.stat().st_size)
            if not dry:
                _unlink(path)
    steps = usage / "steps"
    for path in sorted(steps.glob("*/*.jsonl")) if steps.is_dir() else []:
        if path.is_symlink() or not path.is_file():
            continue
        kept, gone, size = [], 0, 0
        for line in path.read_bytes().splitlines(keepends=True):
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if isinstance(record, dict) and match(*_owner_fields(record)):
                gone, size = gone + 1, size + len(line)
            else:
                kept.append(line)
        if gone:
            report.add("steps", gone, size)
            if not dry:
                _rewrite(path, b"".join(kept))
    if not dry:
        for folder in steps.glob("*") if steps.is_dir() else []:
            if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
                folder.rmdir()


def _owner_fields(record: dict[str, Any]) -> tuple[object, object, object]:
    return record.get("agent"), record.get("session"), record.get("key")


def _rewrite(path: Path, data: bytes) -> None:
    """Replace `path` by `data` (removed when empty)."""
    if data.strip():
        write_atomic(path, data)
    else:
        _unlink(path)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:  # removed meanwhile (a forget run beside it)
        pass


def _dialog(
    root: Path, target: ForgetTarget, owners: Owners, report: ForgetReport, dry: bool
) -> None:
    path = root / "dialog"
    if not path.is_dir() or path.is_symlink():
        return
    folder = DialogDir(path)
    try:
        with _flock(folder):
            for entry in sorted(folder.scan(), key=lambda e: e.name):
                if not entry.is_file(follow_symlinks=False):
                    continue
                if entry.name.endswith(".jsonl"):
                    _dialog_day(folder, entry.name, target, report, dry)
                elif entry.name.endswith(".jsonl" + SUFFIX):
                    _day_tombstone(folder.path / entry.name, target, owners, report, dry)
            if not dry:
                folder.fsync()
    finally:
        folder.close()


def _dialog_day(
    folder: DialogDir, name: str, target: ForgetTarget, report: ForgetReport, dry: bool
) -> None:
    with os.fdopen(folder.open(name, os.O_RDONLY), "rb") as file:
        data = file.read()
    lines = data.split(b"\n")  # (the last piece: what follows the last newline)
    gone = 0
    for k, raw in enumerate(lines):
        if raw.strip():
            _, agent, session = decode_owned(raw)
            if target.owns(agent, session):
                report.add("dialog", 1, len(raw) + 1)
                lines[k], gone = b"", gone + 1
    if not gone:
        return
    kept = b"\n".join(lines)
    if not kept.strip():
        report.add("dialog_days", 1, 0)
    if dry:
        return
    if kept.strip():
        write_atomic(folder.path / name, kept)
    else:
        _unlink(folder.path / name)


def _day_tombstone(
    path: Path, target: ForgetTarget, owners: Owners, report: ForgetReport, dry: bool
) -> None:
    """Retention's tombstone of a dialog day names the owner tags of its records: the
    forgotten ones are taken out (the file removed when none is left)."""
    try:
        record = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return
    told = record.get("owners") if isinstance(record, dict) else None
    if not isinstance(told, list):
        return
    kept = [
        pair
        for pair in told
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and _tagged(target, owners, (str(pair[0]), str(pair[1])))
        )
    ]
    if len(kept) == len(told):
        return
    report.add("tombstones", len(told) - len(kept))
    if dry:
        return
    if kept:
        write_atomic(path, json.dumps({**record, "owners": kept}))
    else:
        _unlink(path)


@contextmanager
def _flock(folder: DialogDir) -> Iterator[None]:
    """``dialog/.lock``, held exclusively (as `DialogStore.append` holds it)."""
    if sys.platform == "win32":
        yield
        return
    try:
        fd = folder.open(".lock", os.O_RDONLY | os.O_CREAT, FILE_MODE)
    except OSError as exc:
        raise PersistenceError(f"cannot lock {str(folder.path / '.lock')!r}: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# -- the index -------------------------------------------------------------------------------


def _drop_pending(index: Any, target: ForgetTarget, owners: Owners) -> None:
    """The owners of saved outputs this process keeps in memory while its index is busy
    (`SearchIndex._kept`, written at its next write): the forgotten ones are dropped, so
    no row naming them comes back. (Another process's are written there too, and name an
    output that is gone: the next forget, or a rebuild, takes them.)"""
    kept_owners = getattr(index, "_kept", None)
    if kept_owners is None:
        return
    pending, lock = kept_owners.pending, kept_owners.lock
    with lock:
        kept = [
            item
            for item in pending
            if not (
                target.owns(item[1][0], item[1][1] or "")
                or _name_owned(str(item[0]), target, owners)
            )
        ]
        pending.clear()
        pending.extend(kept)


def _name_owned(name: str, target: ForgetTarget, owners: Owners) -> bool:
    tags = name_tags(name.rsplit("/", 1)[-1])
    return tags is not None and _tagged(target, owners, tags)


def _purge_index(root: Path, search: Any, target: ForgetTarget, owners: Owners) -> None:
    """Replace the search index by a new generation, holding the old one's write lock (a
    catch-up that read the files before they were purged has committed by then), then
    fill it from the files."""
    if not (root / "index").is_dir():
        return
    from ._search import SearchIndex

    index = search if search is not None else SearchIndex(root)
    _drop_pending(index, target, owners)
    db = index.db

    def replace(conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")  # waits for the writers of the old generation
        db._replace(db._pointer_key())  # closes `conn` (the old generation's lock with it)

    try:
        db.run(replace, wait=None)
        index.catch_up()
    finally:
        if search is None:
            index.close()
