"""The daily consolidation: the day's notes merged into ``MEMORY.md`` (see `_long_term` for the
documents and the record of what was merged), on any memory store (`MemorySeam`: local files,
or one agent's memory in the fleet store).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..core._runner import has_model, run_agent
from ..stores._memory_files import local_memory
from ..stores.memory_seam import MEMORY_DOC, STATE_DOC, MemorySeam

if TYPE_CHECKING:
    from agentscope.formatter import FormatterBase
    from agentscope.model import ChatModelBase

from ._long_term import _MARKER, _TITLE, _join, _key, _split

__all__ = ["ConsolidationReport", "consolidate"]

logger = logging.getLogger("agentscope_ctx")

_DAY_FILE = re.compile(r"(\d{4}-\d{2}-\d{2})\.md")
_MAX_MODEL_CHARS = 100_000
_MODEL_ATTEMPTS = 2
"""Model merges of one consolidation run: one more when MEMORY.md changed during the first;
after that the merge is made extractively under the lock."""
_MERGE_PROMPT = (
    "You maintain MEMORY.md, the long-term memory of an AI agent about its user and its work. "
    "Merge the recent daily notes into the current MEMORY.md and answer with the new MEMORY.md "
    f"only (Markdown, first line '{_TITLE}', one '- ' bullet per item, no change log). Keep every "
    "durable fact, preference and lesson (what failed and how it was fixed), verbatim where it "
    "names files, commands or errors; merge duplicates and near-duplicates into one bullet; "
    "where a newer note corrects an older item, keep the newer; leave out transient task details."
)


@dataclass(frozen=True)
class ConsolidationReport:
    """What a `consolidate` run did.

    Attributes:
        skipped: Another consolidation held the lock; this one did nothing.
        notes: The dates of the daily notes merged by this run (new or changed since the last).
        added: How many bullets MEMORY.md gained that it did not have before.
        changed: Whether MEMORY.md was rewritten.
        source: Who merged: `"model"`, `"extractive"`, or `"none"` when there was nothing to do.
        reason: Why it was skipped, or why the model was not used; `None` otherwise.
    """

    skipped: bool
    notes: tuple[str, ...]
    added: int
    changed: bool
    source: Literal["model", "extractive", "none"]
    reason: str | None = None


def _recent_notes(store: MemorySeam, today: date, days: int) -> list[tuple[str, str]]:
    notes = []
    for name in store.names():
        match = _DAY_FILE.fullmatch(name)
        if match and today - timedelta(days=days) < date.fromisoformat(match[1]) <= today:
            notes.append((match[1], store.read(name)))
    return notes


def _keys(body: str) -> set[str]:
    """The identities of the items of a MEMORY.md body (headings and blank lines are not)."""
    return {_key(line) for line in body.splitlines() if line.strip() and not _heading(line)}


def _heading(line: str) -> bool:
    return line.lstrip().startswith("#")


def _merge_lines(body: str, notes: list[tuple[str, str]], skip: set[str]) -> str:
    """`body` with the note lines it lacks appended as bullets, in order (not those whose key
    is in `skip`)."""
    seen = _keys(body) | skip
    out = [body.strip() or _TITLE]
    for _, text in notes:
        for line in text.splitlines():
            item = " ".join(_MARKER.sub("", line).split())
            if item and not _heading(line) and _key(item) not in seen:
                seen.add(_key(item))
                out.append(f"- {item}")
    return "\n".join(out)


def _without(body: str, keys: set[str]) -> str:
    """`body` without the item lines whose key is in `keys`."""
    lines = body.splitlines()
    return "\n".join(ln for ln in lines if _heading(ln) or _key(ln) not in keys)


async def consolidate(
    working_dir: Path | MemorySeam,
    *,
    model: ChatModelBase | None = None,
    formatter: FormatterBase | None = None,
    days: int = 7,
    now: datetime | None = None,
    timeout_seconds: float = 300.0,
) -> ConsolidationReport:
    """Merge the recent daily notes into MEMORY.md and log the change.

    Notes already merged unchanged (per `.consolidate.json`) are skipped, so a rerun adds
    nothing. Without a model, or when the model fails, bullets are merged extractively (new
    lines appended, duplicates dropped, order kept). Runs are serialized by the store's
    consolidation lock (locally `flock` on `.consolidate.lock`; on PostgreSQL an advisory
    lock): a run that finds it held returns at once with `skipped=True`.

    Edits made to MEMORY.md while the model merges (by hand, by `remember`, by another
    worker) are kept: the merge is written only if MEMORY.md still holds what the merge
    started from (compare-and-swap: checked and written in one atomic `update`); else the
    model merges again from the new content, and if MEMORY.md changed once more, the notes
    are merged extractively into it inside the update. A line removed from MEMORY.md during
    a run is not brought back by that run, from the model's answer or from a note.

    Args:
        working_dir: The package's working directory (its `memory/`), or a memory store.
        model: The model that rewrites MEMORY.md; `None` merges extractively.
        formatter: The formatter of `model` (AgentScope 1.x; on 2.x the model owns it, and
            `None` is fine).
        days: How many days of notes, ending today, to consider.
        now: The current time (local when naive); its date is "today" and the log's date.
        timeout_seconds: Longest wait for the model before merging extractively.

    Returns:
        What the run did.
    """
    store = local_memory(working_dir) if isinstance(working_dir, Path) else working_dir
    with store.consolidation_lock() as held:
        if not held:
            return ConsolidationReport(
                True, (), 0, False, "none", "another consolidation is running"
            )
        return await _consolidate(store, model, formatter, days, now, timeout_seconds)


async def _consolidate(
    store: MemorySeam,
    model: ChatModelBase | None,
    formatter: FormatterBase | None,
    days: int,
    now: datetime | None,
    timeout: float,
) -> ConsolidationReport:
    today = (now or datetime.now()).date()
    notes = await asyncio.to_thread(_recent_notes, store, today, days)
    try:
        raw = json.loads(await asyncio.to_thread(store.read, STATE_DOC) or "{}")
        state: dict[str, str] = dict(raw.get("merged", {}))
        known: dict[str, list[str]] = dict(raw.get("lines", {}))
    except (ValueError, AttributeError, TypeError):
        logger.warning(
            "Ignoring the unreadable %s: every recent note is merged again.",
            store.ref(STATE_DOC),
        )
        state, known = {}, {}
    digests = {day: hashlib.sha256(text.encode()).hexdigest() for day, text in notes}
    fresh = [(day, text) for day, text in notes if state.get(day) != digests[day]]
    if not fresh:
        return ConsolidationReport(False, (), 0, False, "none")
    # Of a note merged before, only the lines added since are merged: a line deleted from
    # MEMORY.md after it was merged does not come back when its note grows.
    new_parts = [(day, _new_lines(text, set(known.get(day, ())))) for day, text in fresh]
    to_merge = [(day, text) for day, text in new_parts if text]
    added, changed, reason = 0, False, None
    source: Literal["model", "extractive", "none"] = "none"
    if to_merge:
        added, changed, source, reason = await _merge_into_memory(
            store, model, formatter, to_merge, timeout, today
        )
    state.update({day: digests[day] for day, _ in fresh})
    for day, text in fresh:
        known[day] = sorted(set(known.get(day, ())) | _line_ids(text))
    done = dict(sorted(state.items())[-366:])
    lines = {day: ids for day, ids in known.items() if day in done}
    record = json.dumps({"merged": done, "lines": lines}, indent=1) + "\n"
    await asyncio.to_thread(store.update, STATE_DOC, lambda _: record)
    notes_done = tuple(day for day, _ in fresh)
    return ConsolidationReport(False, notes_done, added, changed, source, reason)


def _line_ids(text: str) -> set[str]:
    """Short hashes of the items of a note (the state file keeps these, not the text)."""
    return {hashlib.sha256(_key(ln).encode()).hexdigest()[:16] for ln in _items(text)}


def _items(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not _heading(ln)]


def _new_lines(text: str, known: set[str]) -> str:
    """The items of a note not among `known` (hashes from `_line_ids`), in order."""
    items = _items(text)
    return "\n".join(ln for ln in items if _line_ids(ln).isdisjoint(known))


async def _merge_into_memory(
    store: MemorySeam,
    model: ChatModelBase | None,
    formatter: FormatterBase | None,
    notes: list[tuple[str, str]],
    timeout: float,
    today: date,
) -> tuple[int, bool, Literal["model", "extractive"], str | None]:
    """Merge `notes` into MEMORY.md; returns (bullets added, changed, source, reason).

    Compare-and-swap: the merge is written only over the MEMORY.md it was made from (one
    atomic `update` of the store reads, compares and writes). If MEMORY.md changed meanwhile
    (a hand edit, a `remember`, another worker), the model merges again from what it holds
    now; if it changes once more, the notes are merged extractively inside the update. A
    line removed from MEMORY.md during the run is never brought back by it.
    """
    snapshot = await asyncio.to_thread(store.read, MEMORY_DOC)
    deleted: set[str] = set()
    reason: str | None = None
    for attempt in range(1, _MODEL_ATTEMPTS + 1):
        merged = None
        if model is not None and has_model(model, formatter):
            body = _split(snapshot)[0]
            merged, reason = await _model_merge(model, formatter, body, notes, timeout)
        swap = _Swap(snapshot, merged, attempt == _MODEL_ATTEMPTS, notes, deleted, today)
        await asyncio.to_thread(store.update, MEMORY_DOC, swap)
        if swap.retry is not None:
            snapshot = swap.retry
            continue
        assert swap.outcome is not None
        added, changed, source = swap.outcome
        return added, changed, source, swap.reason or reason
    raise AssertionError("unreachable: the last attempt always writes or keeps MEMORY.md")


@dataclass
class _Swap:
    """The compare-and-swap of a merge, run inside the store's atomic `update` of MEMORY.md
    (no await, no model call from the read to the write)."""

    snapshot: str
    """The MEMORY.md the merge was made from."""
    merged: str | None
    """The model's new body (`None`: merge extractively)."""
    last: bool
    """The last attempt: merge extractively when MEMORY.md changed, never retry."""
    notes: list[tuple[str, str]]
    deleted: set[str]
    """Keys of lines removed from MEMORY.md during the run (updated here)."""
    today: date
    retry: str | None = None
    """What MEMORY.md holds now, when the model must merge again from it."""
    outcome: tuple[int, bool, Literal["model", "extractive"]] | None = None
    reason: str | None = None

    def __call__(self, current: str) -> str | None:
        self.retry, self.outcome = None, None
        merged = self.merged
        if current != self.snapshot:
            self.deleted |= _keys(_split(self.snapshot)[0]) - _keys(_split(current)[0])
            if merged is not None and not self.last:
                self.retry = current
                return None  # merge again, from what MEMORY.md holds now
            if merged is not None:
                self.reason = "MEMORY.md kept changing during the model merge"
            merged = None
        body, log = _split(current)
        source: Literal["model", "extractive"] = "model" if merged else "extractive"
        new_body = (
            _without(merged, self.deleted)
            if merged
            else _merge_lines(body, self.notes, self.deleted)
        )
        changed = new_body.strip() != body.strip()
        self.outcome = (len(_keys(new_body) - _keys(body)), changed, source)
        if not changed:
            return None
        dates = ", ".join(day for day, _ in self.notes)
        log.append(f"- {self.today}: merged {len(self.notes)} notes from {dates} ({source})")
        return _join(new_body, log)


async def _model_merge(
    model: ChatModelBase,
    formatter: FormatterBase | None,
    body: str,
    notes: list[tuple[str, str]],
    timeout: float,
) -> tuple[str | None, str | None]:
    """The model's new MEMORY.md body, or `None` and why not."""
    parts = [f"Current MEMORY.md:\n{body or _TITLE}", "Recent daily notes (oldest first):"]
    parts += [f"### {day}\n{text.strip()}" for day, text in notes]
    prompt = "\n\n".join(parts)
    if len(prompt) > _MAX_MODEL_CHARS:
        return None, f"notes too long for the model ({len(prompt)} characters)"
    try:
        answer = await asyncio.wait_for(
            run_agent(
                model, formatter, name="consolidator", sys_prompt=_MERGE_PROMPT, prompt=prompt
            ),
            timeout=timeout,
        )
    except asyncio.TimeoutError:
        return None, f"model timed out after {timeout:g} s"
    except Exception as exc:
        logger.warning("Consolidation model call failed: %r", exc)
        return None, f"model call failed: {exc!r}"
    answer = re.sub(r"^\s*```[\w-]*\n(.*?)\n```\s*$", r"\1", answer.strip(), flags=re.S)
    new_body = _split(answer)[0]
    if not any(_MARKER.match(line) for line in new_body.splitlines()):
        return None, "the model's answer holds no bullet"
    return (new_body if new_body.startswith(_TITLE) else f"{_TITLE}\n\n{new_body}"), None
