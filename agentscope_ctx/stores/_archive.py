"""The session archive: one session of a store, self-contained, as `agentscope-ctx export`
writes it and `agentscope-ctx import` reads it (docs/data.md). This module is the only place
the format is defined.

JSON Lines, UTF-8, one object per line, each with ``v`` (the format's version, now 1) and
``kind``, in this order::

    {"v": 1, "kind": "session", "format": "agentscope-ctx session", "session": "s1",
     "user": null, "agent": null, "store": "local", "exported_at": "2026-12-06T16:00:00+00:00",
     "package": "0.1.0", "keys": 2}
    {"v": 1, "kind": "output", "ref": "/srv/ctx/tool_result/….txt", "agent": "alice/coder",
     "session": "s1", "bytes": 273114, "sha256": "…", "text": "…"}
    {"v": 1, "kind": "dialog", "record": {"v": 1, "msg": {…}, "agent": "alice/coder",
     "session": "s1"}}
    {"v": 1, "kind": "step", "record": {"v": 2, "at": "…", "agent": "coder", "session": "s1",
     "run": 1, …, "summary": "…"}}
    {"v": 1, "kind": "summary", "agent": "coder", "run": 7, "at": "…", "text": "…"}
    {"v": 1, "kind": "end", "counts": {"outputs": 3, "saved_summaries": 0, "dialog": 40,
     "steps": 12, "summaries": 1}, "bytes": 301822}

- ``session``: what was exported (the session, and the ``--user`` / ``--agent`` filters), from
  which store, when, by which version of the package, and the version of its agent keys
  (``keys``, `core._tenant.KEY_VERSION`; absent: 1, whose keys are read as their owners'
  keys of version 2, `core._tenant.upgraded_key`);
- ``output``: a saved output, whole: its ref in the exporting store (the notices of the
  dialog records and steps name it), its owner (``agent``: the agent key, ``null`` when the
  store could not tell it), its size and SHA-256, and its bytes: ``text`` when they are
  UTF-8, else ``base64``; ``tool`` and ``args``, when the store's index knew which tool call
  made it (what a search hit names). Outputs come before the records that name them. A
  summary's text saved whole when it was shown cut is an ``output`` line too, its ``tool``
  the mark `core.search._saved_summary.SAVED_SUMMARY` (counted as ``saved_summaries``, not as
  ``outputs``);
- ``dialog``: a dialog record as the store keeps it (`_dialog_record`), in append order;
- ``step``: a record of the session viewer's steps (`_steps_file`), with its usage lines
  (``kind: usage``) where they were written;
- ``summary``: each compaction's summary of the session, as its step recorded it (also in
  the step; listed apart for a reader of the archive; an import takes the steps' own);
- ``end``: the counts, and the tool outputs' bytes. An archive without it was cut short, and
  an import refuses it.

The HTML form (``--format html``) is the session viewer's page, each output whole as its
excerpt, with the archive's lines embedded in a ``<script type="application/json"
id="agentscope-ctx-archive">`` element (a JSON list of the line objects, ``<``, ``>``, ``&``
written as ``\\uXXXX``): the page opens offline, and `import` reads it as it reads the JSONL.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..core._errors import ContextUsageError
from ..core._tenant import upgraded_key

__all__ = [
    "ARCHIVE_ELEMENT",
    "ARCHIVE_VERSION",
    "Archive",
    "ArchivedOutput",
    "output_line",
    "parse_archive",
]

ARCHIVE_VERSION = 1
FORMAT = "agentscope-ctx session"
ARCHIVE_ELEMENT = "agentscope-ctx-archive"
"""The id of the HTML page's element holding the archive."""
_EMBEDDED = re.compile(
    r'<script type="application/json" id="' + ARCHIVE_ELEMENT + r'">(.*?)</script>', re.S
)


@dataclass
class ArchivedOutput:
    """A saved output of the archive."""

    ref: str
    agent: str | None
    session: str
    data: bytes
    tool: str | None = None
    args: str | None = None


@dataclass
class Archive:
    """A parsed archive."""

    header: dict[str, Any]
    outputs: list[ArchivedOutput] = field(default_factory=list)
    dialog: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    summaries: list[dict[str, Any]] = field(default_factory=list)


def output_line(
    ref: str,
    agent: str | None,
    session: str,
    data: bytes,
    tool: tuple[str | None, str | None] = (None, None),
) -> dict[str, Any]:
    """The ``output`` line of `data` (`tool`: the tool's name and key arguments, if known)."""
    line: dict[str, Any] = {
        "v": ARCHIVE_VERSION,
        "kind": "output",
        "ref": ref,
        "agent": agent,
        "session": session,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    if tool[0]:
        line["tool"], line["args"] = tool
    try:
        line["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        line["base64"] = base64.b64encode(data).decode("ascii")
    return line


def _lines(text: str) -> Iterator[dict[str, Any]]:
    found = _EMBEDDED.search(text) if text.lstrip().startswith("<") else None
    if found is not None:
        items = json.loads(found.group(1))
        if not isinstance(items, list):
            raise ValueError("the page's archive element holds no list")
        yield from items
        return
    for n, raw in enumerate(text.split("\n"), 1):  # (not splitlines: U+0085, U+2028 are text)
        if raw.strip():
            try:
                yield json.loads(raw)
            except ValueError as exc:
                raise ValueError(f"line {n} is not JSON ({exc})") from None


def parse_archive(text: str) -> Archive:
    """Read an archive (JSONL, or the HTML page that embeds one).

    Raises:
        ContextUsageError: not an archive of a version this package reads, cut short (no
            ``end`` line), or an output whose bytes do not match its SHA-256.
    """
    try:
        items: Iterable[dict[str, Any]] = list(_lines(text))
    except ValueError as exc:
        raise ContextUsageError(f"not a session archive: {exc}") from None
    archive: Archive | None = None
    ended = False
    for item in items:
        if not isinstance(item, dict) or item.get("v") != ARCHIVE_VERSION:
            got = item.get("v") if isinstance(item, dict) else item
            raise ContextUsageError(
                f"not a session archive of version {ARCHIVE_VERSION}: a line has v={got!r}"
            )
        kind = item.get("kind")
        if archive is None:
            if kind != "session" or item.get("format") != FORMAT:
                raise ContextUsageError("not a session archive: it does not start with its header")
            archive = Archive(header=item)
        elif kind == "output":
            archive.outputs.append(_output(item))
        elif kind == "dialog":
            archive.dialog.append(dict(item["record"]))
        elif kind == "step":
            archive.steps.append(dict(item["record"]))
        elif kind == "summary":
            archive.summaries.append(item)
        elif kind == "end":
            ended = True
    if archive is None:
        raise ContextUsageError("not a session archive: it is empty")
    if not ended:
        raise ContextUsageError("the archive was cut short: it has no end line")
    if archive.header.get("keys") is None:  # exported before agent keys of version 2
        for output in archive.outputs:
            output.agent = None if output.agent is None else upgraded_key(output.agent)
        for record in archive.dialog:
            if isinstance(record.get("agent"), str):
                record["agent"] = upgraded_key(record["agent"])
    return archive


def _output(item: dict[str, Any]) -> ArchivedOutput:
    if "text" in item:
        data = str(item["text"]).encode("utf-8")
    else:
        data = base64.b64decode(str(item.get("base64", "")))
    if hashlib.sha256(data).hexdigest() != item.get("sha256") or len(data) != item.get("bytes"):
        raise ContextUsageError(
            f"the archive's output {item.get('ref')!r} does not match its size and SHA-256"
        )
    agent, tool, args = item.get("agent"), item.get("tool"), item.get("args")
    return ArchivedOutput(
        ref=str(item["ref"]),
        agent=agent if isinstance(agent, str) else None,
        session=str(item.get("session") or ""),
        data=data,
        tool=tool if isinstance(tool, str) else None,
        args=args if isinstance(args, str) else None,
    )
