"""`migrate_keys`: a local working dir's agent keys of version 1 made keys of version 2.

Version 2 of the agent key (`core._tenant.KEY_VERSION`) escapes the name of an agent without
a user, so that it never reads as ``user/agent``. A working dir written before keeps its
owners through `core._tenant.upgraded_key` (a key that reads as ``user/agent`` stays the
user's agent's; every other is escaped). Only a key holding a ``%`` changes (an agent without
a user whose name holds ``%`` or ``/``), so in most working dirs nothing moves.

``dialog/.format.json`` (``{"keys": 2}``) says the working dir's keys are of version 2. A
dialog directory is made holding it (`make_dialog_dir`: made under another name, then renamed
into place), so one without it was made by version 1. The migration runs at the first open of
a working dir by `stores.factory` (and by a forget or an export), once per process, under
``dialog/.lock`` held as an append holds it, so several workers starting at once migrate it
once and none appends meanwhile. For each key that changes, longest first (a key's new form is
longer than it, so none is moved onto a key still to move), it rewrites:

1. the dialog records it owns (``"agent"``; each record keeps its line), the names of its
   saved outputs in every record (a notice's ref: the same length), and retention's
   tombstones of dialog days naming its tag;
2. the names of what is named by its tag (`core._tenant.owner_tag`): saved outputs
   ``tool_result/<tag>-...`` and their tombstones, ``media/<tag>-.../`` and the steps files
   ``usage/steps/<session>/<tag>.jsonl`` (their records' ``"key"`` and refs too);
3. then, for all of them at once, the search index's owners of outputs (their agent and
   name), and the index is made again from the files at its next open (its documents hold
   the keys and their tags).

A journal (``dialog/.keys-migration.json``: the pairs and how many are done) makes a
migration killed midway finish where it stopped. What it cannot do: a working dir of version
1 with no dialog directory (outputs saved, no message ever recorded) is taken for a new one,
its outputs' owners kept as they were; a context holding a notice written before names the
output's old file, which no longer exists (the dialog's notices are renamed). Workers of an
older version must not write the working dir once a newer one has migrated it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from ..core._errors import PersistenceError
from ..core._private import file_lock, private_dir, write_atomic
from ..core._tenant import KEY_VERSION, owner_tag, upgraded_key
from ._dialog_record import decode_owned

__all__ = ["FORMAT_FILE", "make_dialog_dir", "migrate_keys"]

FORMAT_FILE = ".format.json"
"""The format record in the dialog directory, ``{"keys": 2}``."""
_JOURNAL = ".keys-migration.json"
_DONE: set[Path] = set()
"""The working dirs this process found or made of the current key version."""


def migrate_keys(working_dir: Path) -> None:
    """Make the agent keys of `working_dir` of the current version, once (see the module);
    a working dir without a dialog directory is left as it is (nothing is made).

    Raises:
        PersistenceError: the working dir cannot be read or written, or its format record
            is not one of this version.
    """
    dialog = working_dir / "dialog"
    if working_dir in _DONE or dialog.is_symlink() or not dialog.is_dir():
        return  # (a linked one is refused by the dialog store)
    try:
        if not _current(dialog):
            with file_lock(dialog / ".lock"):
                if not _current(dialog):
                    _migrate(working_dir)
    except OSError as exc:
        raise PersistenceError(
            f"cannot migrate the agent keys of {str(working_dir)!r}: {exc}"
        ) from exc
    _DONE.add(working_dir)


def make_dialog_dir(path: Path) -> None:
    """Make the dialog directory `path` holding the format record (made private under a name
    of its own, then renamed into place; when another process made it first, that one stays).

    Raises:
        OSError: it cannot be made.
    """
    made = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    private_dir(made)  # (and the working dir, when missing)
    try:
        write_atomic(made / FORMAT_FILE, json.dumps({"keys": KEY_VERSION}))
        os.rename(made, path)
    except OSError:
        shutil.rmtree(made, ignore_errors=True)
        if not path.is_dir():
            raise


def _current(dialog: Path) -> bool:
    path = dialog / FORMAT_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False
    try:
        record = json.loads(data)
    except ValueError:
        record = None
    if isinstance(record, dict) and record.get("keys") == KEY_VERSION:
        return True
    raise PersistenceError(  # (keys of version 2 migrated again would change)
        f"{str(path)!r} is not a format record of this version: expected "
        f'{{"keys": {KEY_VERSION}}}, got {data[:80]!r}'
    )


def _migrate(root: Path) -> None:
    journal = root / "dialog" / _JOURNAL
    try:
        state = json.loads(journal.read_bytes())
        pairs = [(str(old), str(new)) for old, new in state["pairs"]]
        done = int(state["done"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        found = _keys(root)
        pairs = sorted(
            ((k, upgraded_key(k)) for k in found if upgraded_key(k) != k),
            key=lambda pair: (-len(pair[0]), pair[0]),
        )
        done = 0
        if pairs:
            write_atomic(journal, json.dumps({"pairs": pairs, "done": 0}))
    for n in range(done, len(pairs)):
        old, new = pairs[n]
        _dialog(root / "dialog", old, new)
        _named(root, owner_tag(old), owner_tag(new), old, new)
        if n + 1 == len(pairs):
            _index(root, pairs)
        write_atomic(journal, json.dumps({"pairs": pairs, "done": n + 1}))
    write_atomic(root / "dialog" / FORMAT_FILE, json.dumps({"keys": KEY_VERSION}))
    journal.unlink(missing_ok=True)


# -- what keys the working dir holds ----------------------------------------------------------


def _keys(root: Path) -> set[str]:
    """Every agent key of version 1 that may change: those holding a ``%``."""
    keys: set[str] = set()
    for _, raw in _lines(root / "dialog", ".jsonl"):
        if b"%" in raw and raw.strip():
            keys.add(decode_owned(raw)[1])
    for folder in _dirs(root / "usage" / "steps"):
        for _, raw in _lines(folder, ".jsonl"):
            if b"%" in raw:
                key = _json(raw).get("key")
                keys.add(key if isinstance(key, str) else "")
    with _index_db(root) as db:
        if db is not None:
            for table in ("owners", "docs"):
                rows = db.execute(f"SELECT DISTINCT agent FROM {table} WHERE instr(agent, '%')")
                keys |= {row[0] for row in rows if isinstance(row[0], str)}
    return {key for key in keys if "%" in key}


def _lines(folder: Path, suffix: str) -> Iterator[tuple[Path, bytes]]:
    for path in _files(folder, suffix):
        with open(path, "rb") as file:
            for raw in file:
                yield path, raw


def _files(folder: Path, suffix: str) -> list[Path]:
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(
        Path(entry.path)
        for entry in os.scandir(folder)
        if entry.name.endswith(suffix) and entry.is_file(follow_symlinks=False)
    )


def _dirs(folder: Path) -> list[Path]:
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False))


def _json(raw: bytes) -> dict[str, object]:
    try:
        record = json.loads(raw)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


# -- the dialog ---------------------------------------------------------------------------------


def _dialog(folder: Path, old: str, new: str) -> None:
    """The records of `old` become `new`'s, each on its line, and the refs of its saved
    outputs in any record name them as they are renamed (`_refs`); the day tombstones naming
    its tag name `new`'s."""
    tags = (owner_tag(old), owner_tag(new))
    for path in _files(folder, ".jsonl"):
        lines = path.read_bytes().split(b"\n")
        changed = False
        for k, raw in enumerate(lines):
            line = raw
            if b"%" in line and line.strip() and decode_owned(line)[1] == old:
                line = _owned_by(line, new)
            line = _refs(line, *tags)
            if line != raw:
                lines[k], changed = line, True
        if changed:
            write_atomic(path, b"\n".join(lines))
    for path in _files(folder, ".jsonl.deleted"):
        _retag(path, *tags)


def _refs(raw: bytes, old_tag: str, new_tag: str) -> bytes:
    """`raw` with every saved output's name of agent tag `old_tag` (``<tag>-<session tag>-
    <uuid>.txt``, in a notice or a ref) named with `new_tag` (as long: a line keeps its
    length)."""
    if old_tag.encode() not in raw:
        return raw
    pattern = re.compile(
        rb"(?<![0-9a-f])" + old_tag.encode() + rb"(?=-[0-9a-f]{16}-[0-9a-f]{32}\.txt)"
    )
    return pattern.sub(new_tag.encode(), raw)


def _owned_by(raw: bytes, new: str) -> bytes:
    """The record line `raw` with ``"agent"`` `new`: its other bytes as they were (the
    writer's order puts the owner after ``msg``), else written again."""
    record = json.loads(raw)
    for ascii_only in (False, True):
        field = f', "agent": {json.dumps(record["agent"], ensure_ascii=ascii_only)}'.encode()
        at = raw.rfind(field)
        if at >= 0:
            value = json.dumps(new, ensure_ascii=ascii_only).encode()
            line = raw[:at] + b', "agent": ' + value + raw[at + len(field) :]
            if decode_owned(line)[1] == new and _json(line).get("msg") == record.get("msg"):
                return line
    record["agent"] = new  # not as this package writes it: its JSON again
    return json.dumps(record).encode("ascii")


def _retag(stone: Path, old_tag: str, new_tag: str) -> None:
    """A tombstone's ``owners`` with `old_tag`'s agent tag `new_tag`."""
    record = _json(stone.read_bytes())
    owners = record.get("owners")
    if not isinstance(owners, list):
        return
    renamed = [
        [new_tag, pair[1]] if isinstance(pair, list) and pair[:1] == [old_tag] else pair
        for pair in owners
    ]
    if renamed != owners:
        write_atomic(stone, json.dumps({**record, "owners": renamed}))


# -- what is named by the key's tag ---------------------------------------------------------


def _named(root: Path, old_tag: str, new_tag: str, old: str, new: str) -> None:
    for folder in (root / "tool_result", root / "media"):
        if not folder.is_dir() or folder.is_symlink():
            continue
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if entry.name.startswith(f"{old_tag}-"):
                target = folder / (new_tag + entry.name[len(old_tag) :])
                os.rename(entry.path, target)
                if target.name.endswith(".deleted") and target.is_file():
                    _retag(target, old_tag, new_tag)
    for session in _dirs(root / "usage" / "steps"):
        for path in _files(session, ".jsonl"):
            if path.name.startswith(f"{old_tag}."):
                target = path.with_name(new_tag + path.name[len(old_tag) :])
                _rekey_steps(path, old, new)
                os.rename(path, target)


def _rekey_steps(path: Path, old: str, new: str) -> None:
    """A steps file's records of `old` with ``"key"`` `new`, and the refs of `old`'s outputs
    (`_refs`) renamed."""
    tags = (owner_tag(old), owner_tag(new))
    lines = path.read_bytes().split(b"\n")
    changed = False
    for k, raw in enumerate(lines):
        record = _json(raw) if b"%" in raw else {}
        line = json.dumps({**record, "key": new}).encode() if record.get("key") == old else raw
        line = _refs(line, *tags)
        if line != raw:
            lines[k], changed = line, True
    if changed:
        write_atomic(path, b"\n".join(lines))


# -- the search index -----------------------------------------------------------------------


@contextmanager
def _index_db(root: Path, *, write: bool = False) -> Iterator[sqlite3.Connection | None]:
    """The current generation of the search index (`None`: none readable)."""
    db = None
    try:
        name = (root / "index" / "current").read_text(encoding="utf-8").strip()
        path = root / "index" / name
        if name and path.is_file():
            uri = f"{path.as_uri()}?mode={'rw' if write else 'ro'}"
            db = sqlite3.connect(uri, uri=True, timeout=60, isolation_level=None)
            db.execute("SELECT 1 FROM owners LIMIT 1")
    except (OSError, sqlite3.Error):
        if db is not None:
            db.close()
        db = None
    try:
        yield db
    finally:
        if db is not None:
            db.close()


def _index(root: Path, pairs: list[tuple[str, str]]) -> None:
    """The index's owners of outputs under their keys of version 2 (in one transaction), and
    the index made again at its next open, carrying them (its ``user_version`` set to 0, which
    it takes for a database to replace)."""
    from ._search_db import SCHEMA_VERSION

    with _index_db(root, write=True) as db:
        if db is None:
            return  # none, or damaged: made again from the files anyway
        with closing(db.cursor()) as cur:
            cur.execute("BEGIN IMMEDIATE")
            if cur.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                cur.execute("ROLLBACK")  # done before this run was killed, or not ours
                return
            for old, new in pairs:
                old_name = f"tool_result/{owner_tag(old)}-"
                new_name = f"tool_result/{owner_tag(new)}-"
                cur.execute("UPDATE owners SET agent = ? WHERE agent = ?", (new, old))
                cur.execute(
                    "UPDATE owners SET name = ? || substr(name, ?) WHERE substr(name, 1, ?) = ?",
                    (new_name, len(old_name) + 1, len(old_name), old_name),
                )
            cur.execute("PRAGMA user_version = 0")
            cur.execute("COMMIT")
