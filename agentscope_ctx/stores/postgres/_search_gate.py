"""`background_gate`: one background indexing step at a time per connection pool in a process
(issue 46 item 11).

Each `PostgresSearchIndex` runs its own background indexing, and the handles of one process
(ten agents, a worker's managers) draw on one pool (`_pool.shared_pool`). Unbounded, ten
background steps at once each held a connection for a piece of an output (0.25 s idle,
seconds under load) and ran Python on one interpreter: in the live benchmark
(`benchmarks/store/live.py`, 20k messages, load 15-25) a search waited up to 2.2 s for a
connection, and each of its round trips waited for the interpreter lock behind the steps'
work. One step at a time leaves the pool's other connections to the saves and searches (at
100k messages: p95 106 and 173 ms in two runs, against 330 ms unbounded and 446 ms with half
the pool's connections for the steps, at various loads; the background's backlog grows:
docs/contributors/search-notebook.md). Other processes are not bounded by it: ``SKIP
LOCKED`` shares the work among them.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

__all__ = ["background_gate"]

_gates: weakref.WeakKeyDictionary[Any, tuple[int, threading.Lock]] = weakref.WeakKeyDictionary()
_made = threading.Lock()


def background_gate(pool: Any) -> threading.Lock:
    """The lock the background steps on `pool` take, one step at a time. A forked child gets
    its own (one held by a parent's thread at the fork would never be released in it)."""
    with _made:
        gate = _gates.get(pool)
        if gate is None or gate[0] != os.getpid():
            gate = _gates[pool] = (os.getpid(), threading.Lock())
        return gate[1]


def _forked() -> None:
    global _made
    _made = threading.Lock()  # (held by a parent's thread at the fork: never released here)


os.register_at_fork(after_in_child=_forked)
