"""What compaction keeps by code (DESIGN.md §13): the user's own words and the artifact trail.

A summary is only as good as the model that writes it: a lazy one answers with the five
headings and generic lines, and the user's constraints and the files the agent touched are
gone. So what must survive is computed from the compacted messages by code and carried from
summary to summary, beside whatever the model (or the extractive fallback) wrote:

- **The user's words**: the text of each user turn, verbatim (as a JSON string, so that
  newlines and quotes survive), newest first. The newest turn is clipped (with a note) only
  when it alone is longer than the block; older turns that no longer fit fold into one
  ``earlier`` line that still quotes the constraint sentences they held ("do not ...",
  "never ...", "must ...").
- **The artifact trail**: files read, edited, written (created) and deleted, from the tools'
  arguments; commands run with their outcome (`_outcome.judge`: from the saved file when the
  output was cut or masked, never "ok" unseen); the newest error lines. The oldest runs fold
  into one line first, then the oldest paths of each kind into a count.

The block is a pure function of the previous block and the compacted messages, so it changes
only at compaction and the prompt prefix stays byte-identical in between (DESIGN.md §8)::

    Kept by code across compactions (the user's words verbatim; find more with search_history):
    User's words, newest first:
    - [2026-12-03 14:48] "fix the failing test; do not modify setup.cfg"
    - earlier: 3 turns, 2026-12-01 09:00 → 2026-12-02 10:00; constraints: "do not touch vendor/"
    Artifact trail:
    - read: src/app.py, tests/test_app.py
    - edited: src/app.py
    - ran: `pytest -x` → failed: ValueError: bad input
    - earlier: 12 runs, 3 failed
    Newest errors:
    - ValueError: bad input (`pytest -x`)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._entry import Msg
from ._extractive import _CONSTRAINT, _result_text, msg_text
from ._outcome import ReadSaved, error_lines, judge

__all__ = ["CARRY_HEADER", "carried", "split_carry", "user_words", "with_carry"]

CARRY_HEADER = (
    "Kept by code across compactions (the user's words verbatim; find more with search_history):"
)
_USERS = "User's words, newest first:"
_TRAIL = "Artifact trail:"
_ERRORS = "Newest errors:"
_KINDS = ("read", "edited", "written", "deleted")
_NEWEST_ERRORS = 3
_CLIP_COMMAND = 100
_CLIP_PATH = 200
_CLIP_ERROR = 200
_CLIP_CONSTRAINT = 160
_PATH_KEYS = ("file_path", "path", "filepath", "filename", "file", "notebook_path",
              "target_file", "target_path", "destination", "dest")  # fmt: skip
_COMMAND_KEYS = ("command", "cmd", "script", "code")
_EDITOR = {"view": "read", "create": "written", "str_replace": "edited", "insert": "edited",
           "undo_edit": "edited"}  # fmt: skip
_VERBS = (
    ("edited", {"edit", "replace", "insert", "patch", "append", "modify", "update"}),
    ("written", {"write", "create", "save", "touch", "put"}),
    ("deleted", {"delete", "remove", "unlink"}),
    ("read", {"read", "view", "cat", "open", "load", "head", "tail", "show"}),
)
_TURN = re.compile(r'- (?:\[(?P<stamp>[^\]]*)\] )?(?P<text>".*")')
_EARLIER_TURNS = re.compile(
    r"- earlier: (?P<n>\d+) turns?(?:, (?P<start>[\d: -]+?) → (?P<end>[\d: -]+?))?"
    r"(?:; constraints: (?P<quotes>.*))?"
)
_FILES = re.compile(r"- (?P<kind>read|edited|written|deleted)(?: \(\+(?P<more>\d+) earlier\))?: "
                    r"(?P<paths>.*)")  # fmt: skip
_RUN = re.compile(r"- ran: (?P<run>.*)")
_EARLIER_RUNS = re.compile(r"- earlier: (?P<n>\d+) runs?, (?P<failed>\d+) failed")


@dataclass
class _Turn:
    stamp: str
    text: str

    def render(self, newer: str | None = None) -> str:
        """The turn's line; its time stamp left out when it is the one of the line above
        (`newer`, the next newer turn's): a burst of turns in one minute costs one stamp."""
        stamp = f"[{self.stamp}] " if self.stamp and self.stamp != newer else ""
        return f"- {stamp}{json.dumps(self.text, ensure_ascii=False)}"


@dataclass
class _Carry:
    turns: list[_Turn] = field(default_factory=list)
    """Oldest first."""
    earlier: int = 0
    earlier_start: str = ""
    earlier_end: str = ""
    constraints: list[str] = field(default_factory=list)
    """From the folded turns, newest first."""
    files: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in _KINDS})
    """Oldest first; a path stands once, in the place of its last touch."""
    files_more: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_KINDS, 0))
    runs: list[str] = field(default_factory=list)
    """Oldest first: "`command` → outcome"."""
    earlier_runs: int = 0
    earlier_failed: int = 0
    errors: list[str] = field(default_factory=list)
    """Newest first."""


def split_carry(summary: str) -> tuple[str, str]:
    """A summary (without its eviction index) as (the writer's summary, the carried block)."""
    body, sep, block = summary.rpartition(f"\n\n{CARRY_HEADER}\n")
    if not sep:
        return summary, ""
    return body, CARRY_HEADER + "\n" + block


def with_carry(summary: str, block: str) -> str:
    """The summary followed by the carried block."""
    return f"{summary.rstrip()}\n\n{block}" if block else summary


def user_words(msg: Msg) -> str | None:
    """The text a user wrote in `msg`, or `None` when it is not a user turn (a tool result,
    a ``<system-...>`` reminder, or no text; a hint the memory marks as one is left out by
    the caller, see `carried`)."""
    if msg.role != "user":
        return None
    content = msg.content
    if isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content
    ):
        return None
    text = msg_text(msg).strip()
    return text if text and not text.startswith("<system-") else None


def carried(
    msgs: Sequence[Msg],
    previous: str,
    max_chars: int,
    *,
    read_saved: ReadSaved | None = None,
    internal: Callable[[str], bool] = lambda path: False,
    hints: Collection[str] = (),
    dialog: str = "dialog/",
) -> str:
    """The carried block after compacting `msgs` away, given the `previous` block ("" at the
    first compaction); at most `max_chars` characters. The same inputs give the same text.

    Args:
        msgs: The compacted messages, oldest first.
        previous: The block the summary carried until now.
        max_chars: Upper bound of the block's length.
        read_saved: Reads a cut or masked output back from its saved file (see `_outcome`).
        internal: Whether a path is the package's own (a saved output read on with
            `read_file`): such paths are not the agent's artifacts.
        hints: Ids of the messages the memory marks as runtime hints (not the user's words).
        dialog: Where a clipped turn's whole text is (the fleet store: its day refs).
    """
    state = _parse(previous)
    _add(state, [m for m in msgs if m.id not in hints], read_saved, internal)
    return _render(state, max_chars, dialog)


# -- reading the messages --------------------------------------------------------------


def _stamp(msg: Msg) -> str:
    stamp = str(msg.timestamp or "").replace("T", " ")
    return stamp[:16] if re.match(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", stamp) else ""


def _words(name: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)}


def _classify(name: str, args: Mapping[str, Any]) -> tuple[str | None, list[str], str | None]:
    """(file kind or None, paths, command or None) of one tool call."""
    paths = [str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str) and args[k]]
    raw = next((args[k] for k in _COMMAND_KEYS if isinstance(args.get(k), str) and args[k]), None)
    if raw in _EDITOR and paths:  # an editor tool: {"command": "view", "path": ...}
        return _EDITOR[raw], paths, None
    if raw is not None:
        return None, [], " ".join(raw.split())
    words = _words(name)
    kind = next((kind for kind, verbs in _VERBS if words & verbs), None)
    return (kind, paths, None) if kind and paths else (None, [], None)


def _add(
    state: _Carry,
    msgs: Sequence[Msg],
    read_saved: ReadSaved | None,
    internal: Callable[[str], bool],
) -> None:
    results: dict[str, str] = {}
    for msg in msgs:
        for block in _blocks(msg):
            if block.get("type") == "tool_result":
                results[str(block.get("id"))] = _result_text(block.get("output"))
    for msg in msgs:
        text = user_words(msg)
        if text is not None:
            state.turns.append(_Turn(_stamp(msg), text))
        for block in _blocks(msg):
            if block.get("type") != "tool_use":
                continue
            args = block.get("input")
            kind, paths, command = _classify(
                str(block.get("name") or ""), args if isinstance(args, Mapping) else {}
            )
            for path in paths:
                if kind is not None and not internal(path):
                    _touch(state.files[kind], _clip(path, _CLIP_PATH))
            if command is not None:
                result = results.get(str(block.get("id")))
                shown = f"`{_clip(command, _CLIP_COMMAND)}`"
                outcome = judge(result, read_saved).label() if result is not None else None
                state.runs.append(f"{shown} → {outcome or 'no result yet'}")
                if outcome and outcome.startswith("failed: ") and error_lines(outcome[8:]):
                    error = _clip(outcome[8:], _CLIP_ERROR)
                    older = [e for e in state.errors if e.rsplit(" (`", 1)[0] != error]
                    state.errors = [f"{error} ({shown})", *older]
    del state.errors[_NEWEST_ERRORS:]


def _blocks(msg: Msg) -> list[Mapping[str, Any]]:
    content = msg.content
    items = content if isinstance(content, (list, tuple)) else []
    return [b for b in items if isinstance(b, Mapping)]


def _touch(paths: list[str], path: str) -> None:
    if path in paths:
        paths.remove(path)
    paths.append(path)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the block as text -----------------------------------------------------------------


def _parse(previous: str) -> _Carry:
    state = _Carry()
    section = None
    for raw in previous.split("\n"):  # not splitlines(): a turn may hold U+0085, U+2028...
        line = raw.strip(" \t\r")
        if line in (_USERS, _TRAIL, _ERRORS):
            section = line
            continue
        if section == _USERS and (turn := _TURN.fullmatch(line)):
            try:
                text = json.loads(turn["text"])
            except ValueError:
                continue
            # no stamp: the one of the line above (the next newer turn; see `_Turn.render`)
            above = state.turns[0].stamp if state.turns else ""
            state.turns.insert(0, _Turn(turn["stamp"] or above, str(text)))
        elif section == _USERS and (earlier := _EARLIER_TURNS.fullmatch(line)):
            state.earlier = int(earlier["n"])
            state.earlier_start = earlier["start"] or ""
            state.earlier_end = earlier["end"] or ""
            state.constraints = _unquote(earlier["quotes"] or "")
        elif section == _TRAIL and (files := _FILES.fullmatch(line)):
            state.files[files["kind"]] = [p for p in files["paths"].split(", ") if p]
            state.files_more[files["kind"]] = int(files["more"] or 0)
        elif section == _TRAIL and (runs := _EARLIER_RUNS.fullmatch(line)):
            state.earlier_runs, state.earlier_failed = int(runs["n"]), int(runs["failed"])
        elif section == _TRAIL and (run := _RUN.fullmatch(line)):
            state.runs.append(run["run"])
        elif section == _ERRORS and line.startswith("- "):
            state.errors.append(line[2:])
    return state


def _unquote(quotes: str) -> list[str]:
    try:
        items = json.loads(f"[{quotes}]")
    except ValueError:
        return []
    return [str(item) for item in items]


def _render(state: _Carry, max_chars: int, dialog: str = "dialog/") -> str:
    """The user's words take what they need of the block, at least three fifths when the
    trail needs more; the trail the rest."""
    if not (state.turns or state.earlier or state.runs or state.earlier_runs
            or any(state.files.values())):  # fmt: skip
        return ""
    room = max_chars - len(CARRY_HEADER) - 2
    wanted = len(_render_trail(state, room))
    users = _render_users(state, max(room * 3 // 5, room - wanted), dialog)
    trail = _render_trail(state, room - len(users))
    text = "\n".join(part for part in (CARRY_HEADER, users, trail) if part)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _render_users(state: _Carry, budget: int, dialog: str = "dialog/") -> str:
    """Newest turns first, as many whole as fit beside the ``earlier`` line of the rest; the
    newest is clipped (with a note) only when it alone does not fit."""
    newest_first = state.turns[::-1]

    def build(turns: list[_Turn], folded: list[_Turn]) -> str:
        newer = [None, *(t.stamp for t in turns)]
        lines = [_USERS, *(t.render(above) for t, above in zip(turns, newer, strict=False))]
        earlier = _earlier_line(state, folded, budget - len("\n".join(lines)) - 1)
        return "\n".join([*lines, earlier] if earlier else lines)

    best = build([], newest_first)
    for keep in range(1, len(newest_first) + 1):
        text = build(newest_first[:keep], newest_first[keep:])
        if len(text) > budget:
            if keep == 1:  # the newest alone is too long: its head, and where the rest is
                turn = newest_first[0]
                room = max(budget - len(_USERS) - 120, 40)
                note = f"… [clipped: {len(turn.text)} characters in all, in {dialog}]"
                best = build([_Turn(turn.stamp, turn.text[:room] + note)], newest_first[1:])
            break
        best = text
    return best if best != _USERS else ""


def _earlier_line(state: _Carry, folded: list[_Turn], room: int) -> str:
    """The ``earlier`` line for the previous fold plus `folded` (newest first): the count, the
    time range and the constraint sentences that fit in `room` characters."""
    n = state.earlier + len(folded)
    if n == 0:
        return ""
    stamps = sorted(s for s in [state.earlier_start, state.earlier_end,
                                *(t.stamp for t in folded)] if s)  # fmt: skip
    span = f", {stamps[0]} → {stamps[-1]}" if stamps else ""
    line = f"- earlier: {n} turn{'s' if n > 1 else ''}{span}"
    quotes: list[str] = []
    for turn in folded:  # newest first, then the older fold's own
        sentences = re.split(r"(?<=[.!?。！？;；])\s+|\n", turn.text)
        quotes += [_clip(s, _CLIP_CONSTRAINT) for s in sentences if _CONSTRAINT.search(s)]
    quotes += state.constraints
    quotes = list(dict.fromkeys(q for q in quotes if q))
    text = ""
    for quote in quotes:
        candidate = (text + "; " if text else "") + json.dumps(quote, ensure_ascii=False)
        if len(line) + len("; constraints: ") + len(candidate) > room:
            break
        text = candidate
    return line + (f"; constraints: {text}" if text else "")


def _render_trail(state: _Carry, budget: int) -> str:
    """Within `budget`: the oldest runs fold first, then the older errors go (the newest
    stays), then the oldest paths of the longest list fold into its count."""
    runs, earlier, failed = list(state.runs), state.earlier_runs, state.earlier_failed
    files = {k: list(v) for k, v in state.files.items()}
    more = dict(state.files_more)
    errors = list(state.errors)
    while True:
        lines = [_TRAIL]
        for kind in _KINDS:
            if files[kind] or more[kind]:
                extra = f" (+{more[kind]} earlier)" if more[kind] else ""
                lines.append(f"- {kind}{extra}: {', '.join(files[kind])}")
        lines += [f"- ran: {run}" for run in runs]
        if earlier:
            lines.append(f"- earlier: {earlier} run{'s' if earlier > 1 else ''}, {failed} failed")
        if errors:
            lines += [_ERRORS, *(f"- {e}" for e in errors)]
        text = "\n".join(lines)
        if len(text) <= budget:
            return text if len(lines) > 1 else ""
        if runs:
            earlier += 1
            failed += runs.pop(0).split(" → ", 1)[-1].startswith("failed")
        elif len(errors) > 1:
            errors.pop()
        elif any(len(v) > 1 for v in files.values()):
            kind = max(_KINDS, key=lambda k: len(files[k]))
            files[kind].pop(0)
            more[kind] += 1
        else:
            return text if len(lines) > 1 else ""
