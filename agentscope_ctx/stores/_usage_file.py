"""``usage/*.json`` in the working dir: the latest prompt size and prompt-cache reuse of each
attached agent in each session, written at the end of each reply, for `agentscope-ctx inspect`.

One file per agent AND session (``recall.session``), replaced atomically, private to its
owner: two apps' agents of the same name no longer overwrite each other's record. A working
dir keeps the records of the `MAX_RECORDS` sessions served last (the oldest written are
removed as new ones come), so a worker that served a thousand sessions keeps no more; a
session that comes back writes its record again. Its name is
made of the two, reduced to safe characters and cut (no path tricks: ``../``, ``/``, NUL and
the like become ``_``), and a hash of the exact pair, so that names that reduce alike stay
apart: ``usage/assistant.s-42.5f0c2e9a1b3d.json``. Files of older versions, named by the
agent alone (``usage/{agent}.json``, no ``session``), are still read; where both exist for one
agent without a session, the newer record wins.

The record::

    {"v": 1, "agent": "worker", "session": "s-42", "updated": "2026-12-03T08:20:00+00:00",
     "prompt_tokens": 9120, "max_input_tokens": 16000,
     "provider_prompt_tokens": 9301, "provider_cached_tokens": 8704, "cache_reuse": 0.81,
     "counter": "tiktoken:o200k_base", "context": {"parts": {"system_prompt": 52, ...},
     "messages": {"recent": 27, ...}, "total": 5837, "calibrated_total": 5850, "scale": 1.0021,
     "threshold": 6000, "budget": 8000, "free_below_trigger": 150, "free_below_budget": 2150}}

``prompt_tokens`` is the context manager's estimate of the agent's context after the reply
(its messages before formatting, the reply's answer included), counted by ``counter``;
``provider_prompt_tokens`` is the provider's count of the last prompt sent. ``provider_*``
and ``cache_reuse`` are ``null`` where the provider did not report them; ``counter`` is
missing in records written before it was added, ``session`` in those written before it was
(and ``null`` when the config sets none). ``context`` is what the agent's context held after
the reply, part by part (`agentscope_ctx.ContextBreakdown.to_dict`; ``from_dict`` reads
it): missing in records written before it, ``null`` when it could not be counted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core._private import private_dir, write_atomic

__all__ = ["MAX_RECORDS", "read_usage", "usage_path", "write_usage"]

logger = logging.getLogger("agentscope_ctx")

USAGE_VERSION = 1
MAX_RECORDS = 256
"""Records a working dir keeps: those written last (issue 46 item 17)."""
_UNSAFE = re.compile(r"[^\w.-]+")


_PART = 60
"""Bytes (UTF-8) kept of the agent's and the session's name in a file name."""


def _safe(text: str) -> str:
    """`text` as a file name part: unsafe characters replaced, at most `_PART` bytes of
    UTF-8 (a cut never splits a character)."""
    cut = _UNSAFE.sub("_", text).strip("._").encode("utf-8")[:_PART]
    return cut.decode("utf-8", "ignore")


def usage_path(working_dir: Path, agent: str, session: str | None = None) -> Path:
    """The record file of `agent` in `session` (see the module docstring)."""
    digest = hashlib.sha256(json.dumps([agent, session]).encode("utf-8")).hexdigest()[:12]
    parts = [_safe(agent) or "agent", *([_safe(session) or "session"] if session else [])]
    return working_dir / "usage" / f"{'.'.join(parts)}.{digest}.json"


def write_usage(
    working_dir: Path,
    agent: str,
    fields: dict[str, Any],
    *,
    session: str | None = None,
    most: int = MAX_RECORDS,
) -> None:
    """Replace the record of `agent` in `session` (best effort: a failure is logged, never
    raised); a new record past `most` in the folder removes the oldest written."""
    path = usage_path(working_dir, agent, session)
    new = not path.exists()
    record = {
        "v": USAGE_VERSION,
        "agent": agent,
        "session": session,
        "updated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **fields,
    }
    try:
        private_dir(path.parent)
        write_atomic(path, json.dumps(record, ensure_ascii=False))
        now = time.time_ns()  # (the file system's own clock may be coarser: the prune's order)
        os.utime(path, ns=(now, now))
    except OSError as exc:
        logger.debug("agentscope_ctx: cannot write %s: %s", path, exc)
        return
    if new:  # (a record replaced adds nothing: the folder is only listed when one is added)
        _prune(path.parent, path, most)


def _prune(folder: Path, written: Path, most: int) -> None:
    """Remove the oldest records of `folder` (by the time they were written) past `most`,
    never `written`."""
    try:
        with os.scandir(folder) as entries:
            records = [
                (entry.stat(follow_symlinks=False).st_mtime_ns, entry.path)
                for entry in entries
                if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False)
            ]
    except OSError as exc:
        logger.debug("agentscope_ctx: cannot list %s: %s", folder, exc)
        return
    records.sort()
    for _, path in records[: max(len(records) - most, 0)]:
        if path != str(written):
            try:
                os.unlink(path)
            except OSError:  # removed meanwhile (another worker's prune): nothing to do
                pass


def read_usage(working_dir: Path) -> list[dict[str, Any]]:
    """The records in the working dir, by agent and session, one per pair (the newest, when
    an older version's file names the same agent); unreadable ones are skipped."""
    folder = working_dir / "usage"
    newest: dict[tuple[str, str | None], dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or record.get("v") != USAGE_VERSION:
            continue
        session = record.get("session")
        key = (str(record.get("agent")), None if session is None else str(session))
        held = newest.get(key)
        if held is None or str(record.get("updated", "")) > str(held.get("updated", "")):
            newest[key] = record
    return [newest[key] for key in sorted(newest, key=lambda k: (k[0], k[1] or ""))]
