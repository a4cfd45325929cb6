"""The retention of saved outputs, run once for all the managers of a process (issue 46
item 17).

A saved output unused for `tool_result.retention_days` is deleted, never one a live context
still points to (DESIGN.md §2): a cleanup marks the outputs the contexts point to as used,
and deletes the others past the retention period. Its query covers every tenant of the
store. It used to run at the first pipeline run of each new manager, then hourly, on the
event loop: a worker serving a thousand sessions, each with a manager of its own, ran it a
thousand times an hour, each run blocking every session of the process. Now it runs:

- once an hour per process and store (`Backend.scope`: the working dir's ``tool_result/``,
  or the database's DSN and schema), at the pipeline run of whichever manager comes first;
- sparing what every live manager of the process on that store points to (each one's
  `referenced` files, gathered on the event loop; a manager that cannot tell stops the run:
  nothing is deleted on a partial view);
- in a worker thread.

`forget` makes the next run due at once (as if an hour had passed).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..stores.seams import OutputSeam

__all__ = ["EVERY_SECONDS", "cleanup_due", "forget", "join"]

logger = logging.getLogger("agentscope_ctx")

EVERY_SECONDS = 3600.0
"""Longest time between two cleanups of one store by one process."""

Referenced = Callable[[], set[str]]

_last: dict[Hashable, float] = {}
_holders: dict[Hashable, list[weakref.WeakMethod[Referenced]]] = {}
_lock = threading.Lock()


def join(scope: Hashable, referenced: Referenced) -> None:
    """Count the files `referenced()` names (a manager's bound method, held weakly: it
    leaves with its manager) as used at each cleanup of `scope`."""
    with _lock:
        holders = [ref for ref in _holders.get(scope, []) if ref() is not None]
        holders.append(weakref.WeakMethod(referenced))  # type: ignore[arg-type]
        _holders[scope] = holders


def forget(scope: Hashable | None = None) -> None:
    """Make the next cleanup of `scope` (`None`: of every store) due at once."""
    with _lock:
        if scope is None:
            _last.clear()
        else:
            _last.pop(scope, None)


async def cleanup_due(
    scope: Hashable,
    store: OutputSeam,
    dropped: Callable[[list[str]], None],
    after: Callable[[float, list[str]], None] | None = None,
) -> list[str]:
    """Run the cleanup of `scope` on `store` if it is due (see the module docstring), then
    tell `dropped` (the search index) the refs deleted, then run `after(now, refs)` (the
    other kinds' retention, `_retention_task`), off the event loop; the refs. A failure is
    logged, and the cleanup is due again at the next run."""
    now = time.time()
    with _lock:
        last = _last.get(scope)
        if last is not None and now - last < EVERY_SECONDS:
            return []
        _last[scope] = now
        holders = [ref() for ref in _holders.get(scope, [])]
    try:
        referenced: set[str] = set()
        for holder in holders:
            if holder is not None:
                referenced |= holder()
        removed: Sequence[str | os.PathLike[str]] = await asyncio.to_thread(
            store.cleanup, referenced, now=now
        )
        refs = [os.fspath(ref) for ref in removed]
        if refs:
            await asyncio.to_thread(dropped, refs)
        if after is not None:
            await asyncio.to_thread(after, now, refs)
    except Exception:
        with _lock:
            if _last.get(scope) == now:
                del _last[scope]
        logger.exception("agentscope_ctx: the cleanup of saved outputs failed")
        return []
    return refs
