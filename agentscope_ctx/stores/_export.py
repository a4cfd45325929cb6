"""`export_session`: one session of a store as the lines of a session archive (`_archive`):
its saved outputs, dialog records, steps and summaries, from a local working dir or the
fleet store (docs/data.md).

Which records are the session's: those whose owner's session is `session`, and, with
`agent` (and `user`), whose agent key is that agent's (with `user` alone: any agent of that
user). A local saved output names its owner by tags only (`_tool_results.saved_name`): its
agent key is found among the session's known ones (its dialog records', its steps', the one
asked for); an output of an agent known by no record is exported with ``agent: null``.

A summary's whole text, saved when its summary message was shown cut (`core.search._saved_summary`),
is in the store beside the outputs: it is exported as an ``output`` line (its notice names
it: an import restores it), with the mark the store recorded for it as its ``tool``, and
counted apart (``saved_summaries``), not as a tool output. `saved_summaries` finds them for
the viewer and `inspect`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._tenant import KEY_VERSION, agent_key, owner_tag
from ..core.search._saved_summary import is_saved_summary
from ._archive import ARCHIVE_VERSION, FORMAT, output_line
from ._steps_file import StepFile
from ._tool_results import name_tags

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig
    from .postgres._engine import PostgresEngine

__all__ = [
    "ExportReport",
    "SessionFilter",
    "export_session",
    "local_saved_summaries",
    "saved_summaries",
]


@dataclass(frozen=True)
class SessionFilter:
    """What to export: a session, of an agent (of a user), or of a user's agents."""

    session: str
    user: str | None = None
    agent: str | None = None

    def wants_step(self, agent: object) -> bool:
        """Whether a step of `agent` (its name: steps record no user) is exported."""
        return self.agent is None or agent in (self.agent, agent_key(self.agent, self.user))

    def wants(self, agent: object) -> bool:
        """Whether a record of agent key `agent` is exported."""
        if self.agent is not None:
            return agent == agent_key(self.agent, self.user)
        if self.user is not None:
            return isinstance(agent, str) and agent.startswith(agent_key("", self.user))
        return True


@dataclass
class ExportReport:
    """What an export wrote: records by kind, and the tool outputs' bytes (``outputs``: the
    tool outputs; ``saved_summaries``: the summaries' texts saved whole, apart)."""

    counts: dict[str, int] = field(
        default_factory=lambda: {
            "outputs": 0,
            "saved_summaries": 0,
            "dialog": 0,
            "steps": 0,
            "summaries": 0,
        }
    )
    bytes: int = 0


def export_session(
    config: ContextConfig, which: SessionFilter, report: ExportReport, *, package: str = ""
) -> Iterator[dict[str, Any]]:
    """The archive's lines of `which` in the store `config` names (`report` counts them as
    they go; the last line is the ``end`` line)."""
    yield {
        "v": ARCHIVE_VERSION,
        "kind": "session",
        "format": FORMAT,
        "session": which.session,
        "user": which.user,
        "agent": which.agent,
        "store": config.store.kind,
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "package": package,
        "keys": KEY_VERSION,
    }
    if config.store.kind == "postgres":
        from .postgres._export import pg_parts

        outputs, dialog, steps = pg_parts(
            engine_of(config), which.session, which.wants, which.wants_step
        )
    else:
        from ._keys_local import migrate_keys

        working_dir = Path(config.working_dir).resolve()
        if working_dir.is_dir():
            migrate_keys(working_dir)  # (the keys `which` names are of version 2)
        outputs, dialog, steps = _local_parts(working_dir, which)
    for ref, agent, data, tool in outputs:
        if is_saved_summary(tool[0]):
            report.counts["saved_summaries"] += 1
        else:
            report.counts["outputs"] += 1
            report.bytes += len(data)
        yield output_line(ref, agent, which.session, data, tool)
    for record in dialog:
        report.counts["dialog"] += 1
        yield {"v": ARCHIVE_VERSION, "kind": "dialog", "record": record}
    for record in steps:
        report.counts["steps"] += 1
        yield {"v": ARCHIVE_VERSION, "kind": "step", "record": record}
        if record.get("summary"):
            report.counts["summaries"] += 1
            yield {
                "v": ARCHIVE_VERSION,
                "kind": "summary",
                "agent": record.get("agent"),
                "run": record.get("run"),
                "at": record.get("at"),
                "text": record["summary"],
            }
    yield {
        "v": ARCHIVE_VERSION,
        "kind": "end",
        "counts": dict(report.counts),
        "bytes": report.bytes,
    }


Tool = tuple[str | None, str | None]
"""The tool (and its key arguments) whose call made an output, as the index knows it."""
Parts = tuple[list[tuple[str, str | None, bytes, Tool]], list[dict[str, Any]], list[dict[str, Any]]]


def _local_parts(wd: Path, which: SessionFilter) -> Parts:
    dialog = [r for r in _local_dialog(wd / "dialog") if _owned(r, which)]
    steps = [r for r in _local_steps(wd, which.session) if which.wants_step(r.get("agent"))]
    known = {r.get("agent") for r in dialog}
    for step in steps:  # a step names the agent, not its user
        if isinstance(step.get("agent"), str):
            known |= {step["agent"], agent_key(step["agent"], which.user)}
    if which.agent is not None:
        known.add(agent_key(which.agent, which.user))
    tags = {owner_tag(a): a for a in known if isinstance(a, str)}
    indexed = _indexed_owners(wd)
    session_tag = owner_tag(which.session)
    outputs = []
    folder = wd / "tool_result"
    names = sorted(os.listdir(folder)) if folder.is_dir() else []
    for name in names:
        owner = name_tags(name)
        if owner is None or owner[1] != session_tag:
            continue
        agent, tool, args = indexed.get(name, (None, None, None))
        agent = agent if agent is not None and owner_tag(agent) == owner[0] else tags.get(owner[0])
        filtered = which.agent is not None or which.user is not None
        if (agent is None and filtered) or (agent is not None and not which.wants(agent)):
            continue
        path = folder / name
        if path.is_symlink() or not path.is_file():
            continue
        outputs.append((str(path), agent, path.read_bytes(), (tool, args)))
    return outputs, dialog, steps


def saved_summaries(config: ContextConfig, session: str | None = None) -> dict[str, int]:
    """The summaries' texts saved whole in the store `config` names, of `session` (``""``:
    none set; `None`: every session), by the mark the store recorded for each
    (`core.search._saved_summary`): their bytes, by ref (empty when the store's records cannot be
    read now, or it has no index).

    Raises:
        PersistenceError: the fleet store cannot be read.
    """
    if config.store.kind == "postgres":
        from .postgres._export import pg_saved_summaries

        return pg_saved_summaries(engine_of(config), session)
    return local_saved_summaries(Path(config.working_dir), session)


def local_saved_summaries(working_dir: Path, session: str | None = None) -> dict[str, int]:
    """`saved_summaries` of a local working dir (by the owners its search index recorded)."""
    wd = working_dir.resolve()
    tag = None if session is None else owner_tag(session)
    found = {}
    for name, (_, tool, _) in _indexed_owners(wd).items():
        owner = name_tags(name)
        if not is_saved_summary(tool) or (tag is not None and (owner or ("", ""))[1] != tag):
            continue
        path = wd / "tool_result" / name
        try:
            found[str(path)] = path.stat().st_size
        except OSError:
            continue  # (deleted since it was indexed)
    return found


def _indexed_owners(wd: Path) -> dict[str, tuple[str | None, str | None, str | None]]:
    """What the local index knows of each saved output: its agent key, tool and arguments
    (by file name; empty when there is no index, or it cannot be read now)."""
    if not (wd / "index").is_dir():
        return {}
    from ._search import SearchIndex

    search = SearchIndex(wd)
    try:
        rows = search.db.run(
            lambda db: db.execute("SELECT name, agent, tool, args FROM owners").fetchall(),
            wait=10.0,
        )
    except Exception:  # busy, damaged: the owners found from the records do
        return {}
    finally:
        search.close()
    return {str(name).rsplit("/", 1)[-1]: (agent, tool, args) for name, agent, tool, args in rows}


def _owned(record: dict[str, Any], which: SessionFilter) -> bool:
    return record.get("session", "") == which.session and which.wants(record.get("agent"))


def _local_dialog(folder: Path) -> Iterator[dict[str, Any]]:
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9].jsonl")):
        if path.is_symlink():
            continue
        for raw in path.read_bytes().splitlines():
            try:
                record = json.loads(raw)
            except ValueError:
                continue  # a torn line: the dialog reader reports it
            if isinstance(record, dict) and record.get("v") == 1:
                yield record


def _local_steps(wd: Path, session: str) -> list[dict[str, Any]]:
    """The session's step lines as written (usage lines too), each agent's older file first."""
    steps = StepFile(wd)
    folder = steps.path(session or "default", "agent").parent
    paths = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    paths.sort(key=lambda p: (p.name.split(".")[0], not p.name.endswith(".1.jsonl")))
    records = []
    for path in paths:
        for raw in path.read_bytes().splitlines():
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


def engine_of(config: ContextConfig) -> PostgresEngine:
    """A PostgreSQL engine on the store `config` names (the process's shared pool)."""
    from .postgres._engine import engine_of as postgres_engine

    return postgres_engine(config)
