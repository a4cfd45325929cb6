"""The owners of saved outputs kept while the local index was busy: one set per working dir
in a process, shared by every handle (`SearchIndex`) on it.

A save tells the index who saved an output; when another writer holds the index the owner is
kept in memory and written at the next write. Kept by the handle that saved, it waited for
that handle's next write: its background indexing gives up after `BUSY_TRIES` while the
index stays busy (as it does with ten handles of one process indexing beside each other), and
the output, indexed meanwhile by another handle with no owner, was read again into the tail
of every search of its tenant (claimed, `_search_tail`) until that handle wrote again. In the
store benchmark's searches at 10k messages (`benchmarks/store/stores.py`, session ``s1``'s
handle kept a few of its newest outputs' owners) that made a tenant's search 12-35 ms
(p50) instead of 0.6-0.7 ms. Shared, they are written by the next write of any handle of the
process on that working dir (a save's, a search's catch-up, any background step).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from ._search_db import Owner

__all__ = ["MAX_PENDING", "MAX_RECENT", "KeptOwners", "kept_owners"]

MAX_PENDING = 10_000
"""Owners of saved outputs kept in memory while the index is busy (the oldest are dropped
beyond: a dialog record carrying the output's notice names its owner again)."""
MAX_RECENT = 256
"""Owners last taken to be written, which a search's tail still reads (`KeptOwners.recent`)."""

KeptOwner = tuple[str, Owner, str | None]


@dataclass(eq=False)
class KeptOwners:
    """The owners kept for one working dir (``tool_result/`` name, owner, stamp)."""

    pending: deque[KeptOwner] = field(default_factory=lambda: deque(maxlen=MAX_PENDING))
    """Not written yet."""
    recent: deque[KeptOwner] = field(default_factory=lambda: deque(maxlen=MAX_RECENT))
    """The owners `CatchUp._write_pending` took last (a search's tail takes them with
    `pending`: they may be written but not committed yet)."""
    lock: threading.Lock = field(default_factory=threading.Lock)


_kept: weakref.WeakValueDictionary[Path, KeptOwners] = weakref.WeakValueDictionary()
"""By working dir; an entry goes with the last handle holding it."""
_kept_lock = threading.Lock()


def kept_owners(root: Path) -> KeptOwners:
    """The owners kept for the working dir `root` (resolved) in this process."""
    with _kept_lock:
        kept = _kept.get(root)
        if kept is None:
            kept = _kept[root] = KeptOwners()
        return kept


def _fresh_locks_in_child() -> None:
    """A forked child has none of its parent's threads: a lock one of them held at the fork
    is released (the handles hold the `KeptOwners` objects, so they cannot be given new ones),
    and the registry gets a lock of its own."""
    global _kept_lock
    _kept_lock = threading.Lock()
    for kept in list(_kept.values()):
        if kept.lock.locked():
            kept.lock.release()


os.register_at_fork(after_in_child=_fresh_locks_in_child)
