"""``usage/steps/{session}/{agent tag}.jsonl``: what each pipeline run did, one line per run,
for the session viewer (`agentscope-ctx view`).

The file is named by the tag of the agent's *key* (`core._tenant.owner_tag` of
``user/agent``, as the stores name a tenant's files), so two users' agents of one name in one
session keep two files. Files written before (``{agent name}.jsonl``, records without
``key``) stay in the session's folder and are read with the rest. The folder ``usage/`` is
the package's own bookkeeping: `read_file` never shows it to a tenant (`recall._read_scope`).

Append-only, private to its owner (0600 files in 0700 folders), bounded: past `MAX_BYTES` the
file moves to ``{agent tag}.1.jsonl`` (replacing the older one) and a new one starts, so an
agent keeps at most twice `MAX_BYTES` of steps. One record (``v`` is the format's version;
``key``, the agent key, since issue 46: absent from older records)::

    {"v": 2, "at": "2026-12-04T06:50:00+00:00", "agent": "worker", "key": "alice/worker",
     "session": "s1", "run": 7, "call": true, "before": 7212, "after": 5992, "threshold": 6000,
     "budget": 8000, "freed": {"second truncation": 625, "masking": 595},
     "compacted": 0, "summary_source": null, "summary": null, "truncated": 2,
     "outputs": [{"ref": "tool_result/0b1e....txt", "bytes": 273114, "tool": "run_shell",
                  "args": "command=..."}]}

``before``/``after``: the prompt's tokens (our count, calibrated) before the ladder relieved it
and after the run; ``call``: whether a model call follows this run (1.x also runs the pipeline
after each tool, and those runs' rungs belong to the next call); ``summary``: the summary the
compaction wrote (its first `SUMMARY_CHARS` characters), when it compacted; ``outputs``: the
outputs first seen in the context in this run, saved whole (a truncation notice names them),
with their full size in bytes, the tool whose result it was and the key arguments of its call
(``tool`` and ``args``: absent from older records, and ``args`` empty when the call was not
seen). A session of `None` is recorded as ``default``.

The record is written before its model call; what the provider then reported of the call
follows in a usage line (version 2), written before the agent's next record or at the end of
its reply::

    {"v": 2, "kind": "usage", "at": "2026-12-04T06:50:02+00:00", "agent": "worker",
     "key": "alice/worker", "session": "s1", "run": 7, "input": 5890, "cache_read": 5120,
     "cache_creation": 640}

``input``: the provider's count of the whole prompt, cache reads and writes included;
``cache_read``: the part read from its prompt cache; ``cache_creation``: the part written to
it; each `null` where the provider did not report it (1.x passes no cache figures of some
providers; OpenAI has no cache writes). Readers (`step_records`) fold a usage line into the
step record of the same agent (its key) and ``run`` before it, so every step record read has
the three fields (`null` when no usage line followed: a version-1 record, a call that failed).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from ..core._private import private_dir, tighten_fd
from ..core._tenant import owner_tag

__all__ = [
    "MAX_BYTES",
    "SUMMARY_CHARS",
    "USAGE_FIELDS",
    "StepFile",
    "StepSeam",
    "read_steps",
    "step_records",
]

logger = logging.getLogger("agentscope_ctx")

STEPS_VERSION = 2
READABLE = (1, 2)
"""The versions `step_records` reads (version 1: no usage lines)."""
USAGE_FIELDS = ("input", "cache_read", "cache_creation")
"""What a usage line adds to its step record."""
MAX_BYTES = 4 * 1024 * 1024
"""Size past which the steps file of an agent is rotated (one older file is kept)."""
SUMMARY_CHARS = 4_000
"""The longest summary text a record keeps."""
_UNSAFE = re.compile(r"[^\w.-]+")


class StepSeam(Protocol):
    """Where the steps record goes: this file, or the fleet store's ``steps`` table
    (`stores.postgres.PostgresStepLog`)."""

    def append(self, record: dict[str, Any]) -> None:
        """Add one run's record (best effort: never raises)."""
        ...

    def read(self, session: str | None) -> list[dict[str, Any]]:
        """The session's records, every agent, oldest first."""
        ...

    def sessions(self) -> list[str]:
        """The sessions with recorded steps."""
        ...


def _name(text: str | None, default: str) -> str:
    return (_UNSAFE.sub("_", text or "").strip("._") or default)[:100]


class StepFile:
    """The local steps record of a working dir (see the module docstring)."""

    def __init__(self, working_dir: Path, *, max_bytes: int = MAX_BYTES) -> None:
        self.root = working_dir / "usage" / "steps"
        self.max_bytes = max_bytes

    def path(self, session: str | None, key: str) -> Path:
        """The file of one agent's steps in one session (`key`: the agent key)."""
        return self.root / _name(session, "default") / f"{owner_tag(key)}.jsonl"

    def append(self, record: dict[str, Any]) -> None:
        """Append one run's record (best effort: a failure is logged, never raised)."""
        key = record.get("key", record.get("agent"))  # a record of before: its agent's name
        path = self.path(record.get("session"), str(key or ""))
        line = json.dumps({"v": STEPS_VERSION, **record}, ensure_ascii=False) + "\n"
        try:
            for folder in (self.root.parent, self.root, path.parent):  # usage/, steps/, session
                private_dir(folder)
            if path.exists() and path.stat().st_size + len(line) > self.max_bytes:
                os.replace(path, path.with_suffix(".1.jsonl"))
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                tighten_fd(fd, path)
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)
        except OSError as exc:
            logger.debug("agentscope_ctx: cannot write %s: %s", path, exc)

    def sessions(self) -> list[str]:
        """The sessions with recorded steps."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    def read(self, session: str | None) -> list[dict[str, Any]]:
        """The session's records, every agent, oldest first (unreadable lines skipped)."""
        folder = self.root / _name(session, "default")
        paths = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
        # an agent's rotated file (.1.jsonl) holds its older steps: read first
        paths.sort(key=lambda p: (p.name.split(".")[0], not p.name.endswith(".1.jsonl")))
        lines: list[str] = []
        for p in paths:  # one pass: a usage line may follow its step into the newer file
            try:
                lines += p.read_text(encoding="utf-8").splitlines()
            except OSError:
                continue
        return step_records(lines)


def read_steps(path: Path) -> list[dict[str, Any]]:
    """The records of one steps file; lines that are not a record of this version are
    skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    return step_records(text.splitlines())


def step_records(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The step records among `lines` (JSON, one a line, in either store), each usage line
    folded into the step record of its agent and run (see the module docstring): lines that
    are not a record of a version read here are skipped."""
    records: list[dict[str, Any]] = []
    latest: dict[tuple[object, object], dict[str, Any]] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("v") not in READABLE:
            continue
        key = (record.get("key", record.get("agent")), record.get("run"))
        if record.get("kind") == "usage":
            step = latest.get(key)
            if step is not None:
                step.update({name: record.get(name) for name in USAGE_FIELDS})
            continue
        record.update({name: record.get(name) for name in USAGE_FIELDS})
        latest[key] = record
        records.append(record)
    return records
