"""Long-term memory files: the main agent's memory tools, and the daily consolidation.

Layout under ``{working_dir}/memory/``:

- ``MEMORY.md``: durable facts, preferences and lessons, one ``- `` bullet each, under the title
  ``# Long-term memory``, followed by a ``## Change log`` section that consolidation keeps
  (``- YYYY-MM-DD: merged N notes from ...``);
- ``YYYY-MM-DD.md``: the daily notes (the agent's `log_today`, the Summarizer), local dates;
- ``.consolidate.lock`` (``flock``-ed while a consolidation runs) and ``.consolidate.json``
  (the SHA-256 of each daily note already merged, so that a rerun adds nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import sys
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo

from ._config import ConsolidationConfig
from ._runner import has_model, run_agent_once, tool_text
from ._tokens import TokenCounter

if TYPE_CHECKING:
    from agentscope.formatter import FormatterBase
    from agentscope.model import ChatModelBase

if sys.platform != "win32":
    import fcntl

__all__ = [
    "ConsolidationReport",
    "ConsolidationScheduler",
    "LongTermMemory",
    "append_unique_lines",
    "consolidate",
]

logger = logging.getLogger("agentscope_ctx")

_TITLE = "# Long-term memory"
_CHANGELOG = "## Change log"
_DAY_FILE = re.compile(r"(\d{4}-\d{2}-\d{2})\.md")
_MARKER = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
_MAX_MODEL_CHARS = 100_000
_MERGE_PROMPT = (
    "You maintain MEMORY.md, the long-term memory of an AI agent about its user and its work. "
    "Merge the recent daily notes into the current MEMORY.md and answer with the new MEMORY.md "
    f"only (Markdown, first line '{_TITLE}', one '- ' bullet per item, no change log). Keep every "
    "durable fact, preference and lesson (what failed and how it was fixed), verbatim where it "
    "names files, commands or errors; merge duplicates and near-duplicates into one bullet; "
    "where a newer note corrects an older item, keep the newer; leave out transient task details."
)


def _key(line: str) -> str:
    """A line's identity for deduplication: list marker dropped, spaces collapsed, casefolded."""
    return " ".join(_MARKER.sub("", line).split()).casefold()


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def append_unique_lines(path: Path, text: str, *, header: str = "") -> tuple[int, int]:
    """Append the non-blank lines of `text` that `path` does not hold yet.

    Lines compare without list markers, extra spaces or case. Creates the file (starting with
    `header`) and its directory when missing.

    Returns:
        How many lines were appended, and how many were skipped as duplicates.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    existing = _read(path)
    seen = {_key(line) for line in (existing or header).splitlines() if line.strip()}
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    new: list[str] = []
    for line in lines:
        if _key(line) not in seen:
            seen.add(_key(line))
            new.append(line)
    if new:
        glue = header if not existing else "" if existing.endswith("\n") else "\n"
        with path.open("a", encoding="utf-8") as file:
            file.write(glue + "\n".join(new) + "\n")
    return len(new), len(lines) - len(new)


def _split(text: str) -> tuple[str, list[str]]:
    """MEMORY.md as (body, change-log lines)."""
    at = re.search(rf"^{re.escape(_CHANGELOG)}\s*$", text, re.M)
    if at is None:
        return text.strip(), []
    log = [line for line in text[at.end() :].splitlines() if line.strip()]
    return text[: at.start()].strip(), log


def _join(body: str, log: list[str]) -> str:
    body = body.strip() or _TITLE
    return body + "\n" + (f"\n{_CHANGELOG}\n" + "\n".join(log) + "\n" if log else "")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class LongTermMemory:
    """The main agent's memory tools; register `remember` and `log_today` on its toolkit.

    Both answer with a text (`tool_text`): a 1.x `ToolResponse` on AgentScope 1.x (register
    them with `Toolkit.register_tool_function`), a `str` on 2.x (add them with
    `agentscope_ctx._v2._tools.function_tool(..., read_only=False)`).
    """

    def __init__(self, working_dir: Path) -> None:
        """Initialize the memory.

        Args:
            working_dir: The package's working directory; files live in its `memory/`.
        """
        self.memory_dir = Path(working_dir).expanduser() / "memory"
        self.memory_path = self.memory_dir / "MEMORY.md"

    def daily_path(self, day: date | None = None) -> Path:
        """The daily notes file of `day` (today, local date, by default)."""
        return self.memory_dir / f"{(day or date.today()).isoformat()}.md"

    @tool_text
    def remember(self, fact: str) -> str:
        """Save a durable fact, user preference or lesson to MEMORY.md, for future sessions
        (not task progress).

        Args:
            fact: One self-contained statement, e.g. "The user prefers pytest".
        """
        bullet = " ".join(_MARKER.sub("", fact).split())
        if not bullet:
            return "Error: `fact` is empty; nothing was saved."
        self.memory_dir.mkdir(parents=True, exist_ok=True)
        body, log = _split(_read(self.memory_path))
        if any(_key(line) == _key(bullet) for line in body.splitlines()):
            return "Already in MEMORY.md; nothing was added."
        _write_atomic(self.memory_path, _join(f"{body or _TITLE}\n- {bullet}", log))
        return f"Saved to {self.memory_path}."

    @tool_text
    def log_today(self, note: str) -> str:
        """Append a note to today's memory log (memory/YYYY-MM-DD.md): what was done, what
        failed and how it was fixed.

        Args:
            note: One line or a few.
        """
        lines = [" ".join(_MARKER.sub("", ln).split()) for ln in note.splitlines()]
        text = "\n".join(f"- {line}" for line in lines if line)
        if not text:
            return "Error: `note` is empty; nothing was logged."
        path = self.daily_path()
        added, _ = append_unique_lines(path, text, header=f"# {path.stem}\n\n")
        return f"Logged to {path}." if added else "Already logged today; nothing added."

    async def memory_prompt(self, counter: TokenCounter, max_tokens: int) -> str | None:
        """MEMORY.md without its change log, cut at a line end to `max_tokens` (head kept).

        Returns:
            The text (ending with a note when it was cut), or `None` when there is nothing to
            offer or not even the note fits.
        """
        if max_tokens <= 0 or not self.memory_path.exists():
            return None
        body, _ = _split(await asyncio.to_thread(self.memory_path.read_text, encoding="utf-8"))
        if not body or body == _TITLE:
            return None
        if await counter.count_text(body) <= max_tokens:
            return body
        lines = body.splitlines()
        low, high, best = 1, len(lines) - 1, None
        while low <= high:  # the most head lines that fit with the note
            keep = (low + high) // 2
            note = (
                f"[... MEMORY.md was cut to fit: {keep} of {len(lines)} lines shown; "
                f"read {self.memory_path} for the rest]"
            )
            text = "\n".join([*lines[:keep], note])
            if await counter.count_text(text) <= max_tokens:
                best, low = text, keep + 1
            else:
                high = keep - 1
        return best


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


def _lock(working_dir: Path) -> tuple[Path, IO[str] | None]:
    """The memory directory, and its lock file open and `flock`-ed (`None`: held elsewhere)."""
    memory_dir = working_dir.expanduser() / "memory"
    memory_dir.mkdir(parents=True, exist_ok=True)
    file = (memory_dir / ".consolidate.lock").open("a+")
    if sys.platform != "win32":
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.close()
            return memory_dir, None
    return memory_dir, file


def _recent_notes(memory_dir: Path, today: date, days: int) -> list[tuple[str, str]]:
    notes = []
    for path in sorted(memory_dir.glob("*.md")):
        match = _DAY_FILE.fullmatch(path.name)
        if match and today - timedelta(days=days) < date.fromisoformat(match[1]) <= today:
            notes.append((match[1], path.read_text(encoding="utf-8")))
    return notes


def _merge_lines(body: str, texts: list[str]) -> str:
    """`body` with the lines of `texts` it lacks appended as bullets, in order."""
    seen = {_key(line) for line in body.splitlines() if line.strip()}
    out = [body.strip() or _TITLE]
    for text in texts:
        for line in text.splitlines():
            item = " ".join(_MARKER.sub("", line).split())
            if item and not line.lstrip().startswith("#") and _key(item) not in seen:
                seen.add(_key(item))
                out.append(f"- {item}")
    return "\n".join(out)


async def consolidate(
    working_dir: Path,
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
    lines appended, duplicates dropped, order kept). Runs are serialized by `flock` on
    `.consolidate.lock`: a run that finds it held returns at once with `skipped=True`.

    Args:
        working_dir: The package's working directory.
        model: The model that rewrites MEMORY.md; `None` merges extractively.
        formatter: The formatter of `model` (AgentScope 1.x; on 2.x the model owns it, and
            `None` is fine).
        days: How many days of notes, ending today, to consider.
        now: The current time (local when naive); its date is "today" and the log's date.
        timeout_seconds: Longest wait for the model before merging extractively.

    Returns:
        What the run did.
    """
    memory_dir, lock = _lock(Path(working_dir))
    if lock is None:
        return ConsolidationReport(True, (), 0, False, "none", "another consolidation is running")
    try:
        return await _consolidate(memory_dir, model, formatter, days, now, timeout_seconds)
    finally:
        lock.close()


async def _consolidate(
    memory_dir: Path,
    model: ChatModelBase | None,
    formatter: FormatterBase | None,
    days: int,
    now: datetime | None,
    timeout: float,
) -> ConsolidationReport:
    today = (now or datetime.now()).date()
    state_path, memory_path = memory_dir / ".consolidate.json", memory_dir / "MEMORY.md"
    notes = await asyncio.to_thread(_recent_notes, memory_dir, today, days)
    try:
        state: dict[str, str] = dict(json.loads(_read(state_path) or "{}").get("merged", {}))
    except (ValueError, AttributeError, TypeError):
        logger.warning("Ignoring the unreadable %s: every recent note is merged again.", state_path)
        state = {}
    digests = {day: hashlib.sha256(text.encode()).hexdigest() for day, text in notes}
    fresh = [(day, text) for day, text in notes if state.get(day) != digests[day]]
    if not fresh:
        return ConsolidationReport(False, (), 0, False, "none")
    old = await asyncio.to_thread(_read, memory_path)
    body, log = _split(old)
    new_body, reason = None, None
    if model is not None and has_model(model, formatter):
        new_body, reason = await _model_merge(model, formatter, body, fresh, timeout)
    source: Literal["model", "extractive"] = "model" if new_body else "extractive"
    new_body = new_body or _merge_lines(body, [text for _, text in fresh])
    # A `remember` may have landed while we awaited: keep what it added. From here to the
    # write nothing awaits, so no tool call of this event loop can slip in between.
    current = _read(memory_path)
    current_body, current_log = _split(current)
    if current != old:
        had = {_key(line) for line in body.splitlines()}
        meanwhile = [ln for ln in current_body.splitlines() if _key(ln) not in had]
        new_body, log = _merge_lines(new_body, ["\n".join(meanwhile)]), current_log
    before = {_key(line) for line in current_body.splitlines() if line.strip()}
    added = len({_key(line) for line in new_body.splitlines() if line.strip()} - before)
    changed = new_body.strip() != current_body.strip()
    if changed:
        dates = ", ".join(day for day, _ in fresh)
        log.append(f"- {today.isoformat()}: merged {len(fresh)} notes from {dates} ({source})")
        _write_atomic(memory_path, _join(new_body, log))
    state.update({day: digests[day] for day, _ in fresh})
    merged = dict(sorted(state.items())[-366:])
    _write_atomic(state_path, json.dumps({"merged": merged}, indent=1) + "\n")
    notes_done = tuple(day for day, _ in fresh)
    return ConsolidationReport(False, notes_done, added, changed, source, reason)


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
            run_agent_once(
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


class ConsolidationScheduler:
    """Runs `consolidate` every day at `config.at` in `config.timezone`, in-process."""

    def __init__(
        self,
        config: ConsolidationConfig,
        working_dir: Path,
        *,
        model: ChatModelBase | None = None,
        formatter: FormatterBase | None = None,
    ) -> None:
        """Initialize the scheduler (nothing runs until `start`).

        Args:
            config: When to run and how many days of notes to merge.
            working_dir: The package's working directory.
            model: The model that rewrites MEMORY.md; `None` merges extractively.
            formatter: The formatter of `model` (AgentScope 1.x; `None` on 2.x).
        """
        self.config = config
        self.working_dir = Path(working_dir)
        self._model, self._formatter = model, formatter
        self._task: asyncio.Task[None] | None = None
        self.last_report: ConsolidationReport | None = None
        """The report of the latest run, if any."""

    def next_run(self, now: datetime) -> datetime:
        """The first `at` strictly after `now`, as an aware datetime in the configured zone.

        DST-safe: a wall time skipped by a spring-forward gap runs at the same offset from the
        transition (02:30 becomes 03:30); a repeated one runs at its first occurrence.

        Args:
            now: The current time; a naive value is taken as local time.
        """
        hour, minute = (int(part) for part in self.config.at.split(":"))
        now = now if now.tzinfo else now.astimezone()
        zone = ZoneInfo(self.config.timezone) if self.config.timezone else None
        day = (now.astimezone(zone) if zone else now.astimezone()).date()
        for offset in range(3):
            wall = datetime.combine(day + timedelta(days=offset), time(hour, minute))
            # Through UTC: `astimezone` to the same zone would not normalize a gap time.
            candidate = (
                wall.replace(tzinfo=zone).astimezone(timezone.utc).astimezone(zone)
                if zone
                else wall.astimezone()
            )
            if candidate.astimezone(timezone.utc) > now.astimezone(timezone.utc):
                return candidate
        raise AssertionError("unreachable: a day always has a next occurrence")

    def start(self) -> bool:
        """Start the daily loop on the running event loop.

        Returns:
            Whether it runs: `False` when `config.enabled` is false (nothing is started).
        """
        if not self.config.enabled:
            return False
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())
        return True

    async def stop(self) -> None:
        """Cancel the loop (a run in progress is abandoned; the lock is released)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            await _sleep_until(self.next_run(datetime.now(timezone.utc)))
            try:
                self.last_report = await consolidate(
                    self.working_dir,
                    model=self._model,
                    formatter=self._formatter,
                    days=self.config.days,
                )
                logger.info("Daily consolidation: %s", self.last_report)
            except Exception:
                logger.exception("Daily consolidation failed; retrying at the next run.")


async def _sleep_until(target: datetime) -> None:
    """Sleep in steps of at most 5 minutes, so a suspended machine or a clock change cannot
    skew the wake-up by more than that."""
    while True:
        delay = (target - datetime.now(timezone.utc)).total_seconds()
        if delay <= 0:
            return
        await asyncio.sleep(min(delay, 300.0))
