"""`load_session`: what the viewer shows of one session, read through the stores: the steps
record (one per model call, with the runs before it folded in, and what the provider
reported of the call: its prompt, cache reads and writes), the dialog that left the context,
an excerpt of each saved output a notice names, and what each agent's context held after its
last reply (its usage record's breakdown).

The page is made to be shared (a bug report), and a notice is text anyone can write, so
an excerpt is read only as the session's agents' own `read_file` reads it (`FileReader`,
scoped to each agent of the session in turn): a saved output of the session, or a file
below ``read_roots`` (none set: the working dir; never the viewer's own current directory,
which is not the agents'). Another session's output, a file elsewhere, a FIFO or a device
shows as "not readable now". The dialog's notices are taken from tool results only, as the
steps record's are (`services._steps`).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core._tenant import Tenant, owner_tag
from ..core.config._config import ContextConfig
from ..core.ladder._tool_policy import ToolResultPolicy
from ..recall._read_file import FileReader, ReadFileError
from ..services._breakdown import ContextBreakdown
from ..stores._export import saved_summaries
from ..stores._tool_results import name_tags
from ..stores._usage_file import read_usage
from ..stores.factory import Backend, open_backend
from ._dialog import Entry, call_text, dialog_entries

__all__ = ["EXCERPT_BYTES", "Call", "SessionView", "load_session"]

EXCERPT_BYTES = 4_000
"""The head of each saved output the page carries."""
MAX_DIALOG = 5_000
"""The newest dialog messages the page carries (its search box searches them)."""


@dataclass
class Call:
    """One model call: the prompt before and after relief, and what the runs before it did."""

    agent: str
    before: int
    after: int
    threshold: int
    budget: int
    freed: dict[str, int] = field(default_factory=dict)
    compacted: int = 0
    summary: str | None = None
    summary_source: str | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    input: int | None = None
    """The provider's count of the prompt sent (cache included); `None`: not reported."""
    cache_read: int | None = None
    """The part of it read from the provider's prompt cache; `None`: not reported."""
    cache_creation: int | None = None
    """The part of it written to the cache; `None`: not reported."""


@dataclass
class SessionView:
    """What the page shows of a session."""

    session: str
    store: str
    calls: list[Call] = field(default_factory=list)
    dialog: list[Entry] = field(default_factory=list)
    """Messages that left the context (the newest `MAX_DIALOG`), as the page shows them."""
    dialog_total: int | None = None
    """The messages that left the context in all (`None`: those of `dialog`)."""
    excerpts: dict[str, str] = field(default_factory=dict)
    """The head of each saved output, by ref."""
    sizes: dict[str, int] = field(default_factory=dict)
    """The full size of each saved output, in bytes."""
    saved: set[str] = field(default_factory=set)
    """The refs that are saved outputs of the store (the others: files a read cut)."""
    tools: dict[str, str] = field(default_factory=dict)
    """The call that made each saved output: ``run_shell(command="...")``, by ref."""
    root: str = ""
    """The working dir: the page names a file below it by its path from there."""
    stored: tuple[int, int] | None = None
    """The session's saved outputs in the working dir's ``tool_result/``: (files, bytes),
    those its records name or not (an output cut again after it entered the context is saved
    anew, and no notice of the records names it); `None` on the fleet store (`saved` then)."""
    contexts: list[tuple[str, str, ContextBreakdown]] = field(default_factory=list)
    """What each agent's context held after its last reply: (agent, when, breakdown), from
    the usage records of the working dir (`stores._usage_file`)."""
    saved_summaries: dict[str, int] = field(default_factory=dict)
    """The summaries whose whole text was saved when they were shown cut (by the mark the
    store recorded, `core.search._saved_summary`): their bytes, by ref. Not tool outputs: left out
    of `stored` and `saved`; the page counts them apart, and each compaction's row shows its
    summary."""


def fold(records: list[dict[str, Any]]) -> list[Call]:
    """One `Call` per record a model call followed; a run without a call (1.x after a tool,
    a manual compaction) adds what it freed, compacted and saw to the next call, and its
    `before` when larger."""
    calls: list[Call] = []
    pending: list[dict[str, Any]] = []
    for record in records:
        pending.append(record)
        if not record.get("call", True):
            continue
        call = Call(
            agent=str(record.get("agent", "")),
            before=max(int(r.get("before", 0)) for r in pending),
            after=int(record.get("after", 0)),
            threshold=int(record.get("threshold", 0)),
            budget=int(record.get("budget", 0)),
            input=_figure(record.get("input")),
            cache_read=_figure(record.get("cache_read")),
            cache_creation=_figure(record.get("cache_creation")),
        )
        for run in pending:
            for rung, tokens in (run.get("freed") or {}).items():
                call.freed[rung] = call.freed.get(rung, 0) + int(tokens)
            if run.get("compacted"):
                call.compacted += int(run["compacted"])
                call.summary = run.get("summary") or call.summary
                call.summary_source = run.get("summary_source") or call.summary_source
            call.outputs += list(run.get("outputs") or [])
        calls.append(call)
        pending = []
    return calls


def _figure(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(parts: list[str]) -> str:
    return "\n".join(p for p in parts if p)


def load_session(
    config: ContextConfig, session: str | None = None, *, user: str | None = None
) -> SessionView:
    """Read a session from the store `config` names (``default``: records without one); its
    agents are `user`'s (`None`: ``recall.user`` of `config`), as their saved outputs are."""
    backend = open_backend(config)
    try:
        reader = FileReader.on_store(
            backend,
            config.read_roots or [Path(config.working_dir).resolve()],
            ToolResultPolicy(config.tool_result),
            working_dir=Path(config.working_dir).resolve(),
        )
        view = _load(backend, reader, session or "default", user or config.recall.user)
    finally:
        backend.close()
    view.contexts = contexts(Path(config.working_dir), view.session)
    view.root = str(Path(config.working_dir).resolve())
    own = "" if view.session == "default" else view.session
    view.saved_summaries = saved_summaries(config, own)
    view.saved -= set(view.saved_summaries)
    if config.store.kind != "postgres":
        summaries = {Path(ref).name for ref in view.saved_summaries}
        view.stored = stored_outputs(Path(config.working_dir), own, summaries)
    return view


def stored_outputs(
    working_dir: Path, session: str, summaries: Collection[str] = ()
) -> tuple[int, int]:
    """The saved outputs of `session` (``""``: none set) in ``working_dir/tool_result``, by
    the session's tag in their names (`stores._tool_results.saved_name`), but the files
    named in `summaries` (the summaries' saved texts): (files, bytes)."""
    tag = owner_tag(session)
    files, size = 0, 0
    folder = working_dir / "tool_result"
    for entry in os.scandir(folder) if folder.is_dir() else []:
        tags = name_tags(entry.name)
        if entry.name in summaries:
            continue
        if tags is not None and tags[1] == tag and entry.is_file(follow_symlinks=False):
            files += 1
            size += entry.stat(follow_symlinks=False).st_size
    return files, size


def contexts(working_dir: Path, session: str) -> list[tuple[str, str, ContextBreakdown]]:
    """What the context of each agent of `session` (``default``: none set) held after its
    last reply, as its usage record keeps it: (agent, when, breakdown), by agent; records
    without a breakdown (older versions) are left out."""
    found = []
    for record in read_usage(working_dir):
        if (record.get("session") or "default") != session:
            continue
        data = record.get("context")
        try:
            breakdown = ContextBreakdown.from_dict(data) if isinstance(data, dict) else None
        except ValueError:
            breakdown = None
        if breakdown is not None:
            found.append((str(record.get("agent")), str(record.get("updated", "")), breakdown))
    return found


def _load(backend: Backend, reader: FileReader, session: str, user: str | None) -> SessionView:
    view = SessionView(session=session, store=backend.kind)
    records = backend.steps.read(session) if backend.steps is not None else []
    view.calls = fold(records)
    # the session's own dialog (``default``: the records written without a session)
    own = "" if session == "default" else session
    msgs, _ = backend.dialog().read(session=own)
    view.dialog_total = len(msgs)
    shown = [msg.to_dict() for msg in msgs[-MAX_DIALOG:]]
    view.dialog = dialog_entries(shown)
    agents = dict.fromkeys(call.agent for call in view.calls)
    agents.update(
        (str(m["name"]), None) for m in shown if m.get("role") == "assistant" and m.get("name")
    )
    refs: list[str] = []
    for entry in view.dialog:
        for piece in entry.pieces:
            if piece.kind == "cut":
                refs.append(piece.ref)
                view.tools.setdefault(piece.ref, piece.call)
    first_seen(view.calls)
    for call in view.calls:
        for output in call.outputs:
            ref = str(output.get("ref"))
            refs.append(ref)
            if output.get("bytes") is not None:
                view.sizes[ref] = int(output["bytes"])
            if output.get("tool"):
                view.tools[ref] = call_text(str(output["tool"]), str(output.get("args") or ""))
    readers = [reader.scoped(Tenant.of(agent, own, user=user)) for agent in agents]
    outputs = backend.outputs()
    for ref in dict.fromkeys(refs):
        text = next(filter(None, (_excerpt(tenant, ref) for tenant in readers)), None)
        if text is not None:
            view.excerpts[ref] = text
            if outputs.owns(ref):
                view.saved.add(ref)
                size = outputs.size(ref)
                if size is not None:
                    view.sizes[ref] = size
    return view


def first_seen(calls: list[Call]) -> None:
    """Keep each saved output in the first call of its agent that names it: a worker that
    serves one request of a session records every output of the context it restored as
    new, so the fleet's records name an output again at each request."""
    seen: set[tuple[str, str]] = set()
    for call in calls:
        kept = []
        for output in call.outputs:
            key = (call.agent, str(output.get("ref")))
            if key not in seen:
                seen.add(key)
                kept.append(output)
        call.outputs = kept


def _excerpt(reader: FileReader, ref: str) -> str | None:
    """The head of what `ref` names as `read_file` shows it to the reader's tenant (a saved
    output of its own, a file below the roots); `None` when it shows nothing."""
    try:
        return reader.read_now(ref, 1, 0, max_bytes=EXCERPT_BYTES)
    except (ReadFileError, OSError, ValueError, LookupError):
        return None
