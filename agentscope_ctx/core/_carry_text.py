"""The carried block as text (`_carry`): its state (`CarryState`), read back from the
previous summary (`parse_block`) and written within a size (`render_block`), oldest turns and
runs folded first; `split_carry` and `with_carry` take it off a summary and put it on."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ._extractive import _CONSTRAINT

__all__ = [
    "CARRY_HEADER",
    "KINDS",
    "CarryState",
    "Turn",
    "clip",
    "parse_block",
    "render_block",
    "split_carry",
    "with_carry",
]

CARRY_HEADER = (
    "Kept by code across compactions (the user's words verbatim; find more with search_history):"
)
_CLIP_CONSTRAINT = 160
_USERS = "User's words, newest first:"
_TRAIL = "Artifact trail:"
_ERRORS = "Newest errors:"
KINDS = ("read", "edited", "written", "deleted")
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
class Turn:
    stamp: str
    text: str

    def render(self, newer: str | None = None) -> str:
        """The turn's line; its time stamp left out when it is the one of the line above
        (`newer`, the next newer turn's): a burst of turns in one minute costs one stamp."""
        stamp = f"[{self.stamp}] " if self.stamp and self.stamp != newer else ""
        return f"- {stamp}{json.dumps(self.text, ensure_ascii=False)}"


@dataclass
class CarryState:
    turns: list[Turn] = field(default_factory=list)
    """Oldest first."""
    earlier: int = 0
    earlier_start: str = ""
    earlier_end: str = ""
    constraints: list[str] = field(default_factory=list)
    """From the folded turns, newest first."""
    files: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    """Oldest first; a path stands once, in the place of its last touch."""
    files_more: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
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


# -- the block as text -----------------------------------------------------------------


def parse_block(previous: str) -> CarryState:
    state = CarryState()
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
            # no stamp: the one of the line above (the next newer turn; see `Turn.render`)
            above = state.turns[0].stamp if state.turns else ""
            state.turns.insert(0, Turn(turn["stamp"] or above, str(text)))
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


def render_block(state: CarryState, max_chars: int, dialog: str = "dialog/") -> str:
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


def _render_users(state: CarryState, budget: int, dialog: str = "dialog/") -> str:
    """Newest turns first, as many whole as fit beside the ``earlier`` line of the rest; the
    newest is clipped (with a note) only when it alone does not fit."""
    newest_first = state.turns[::-1]

    def build(turns: list[Turn], folded: list[Turn]) -> str:
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
                best = build([Turn(turn.stamp, turn.text[:room] + note)], newest_first[1:])
            break
        best = text
    return best if best != _USERS else ""


def _earlier_line(state: CarryState, folded: list[Turn], room: int) -> str:
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
        quotes += [clip(s, _CLIP_CONSTRAINT) for s in sentences if _CONSTRAINT.search(s)]
    quotes += state.constraints
    quotes = list(dict.fromkeys(q for q in quotes if q))
    text = ""
    for quote in quotes:
        candidate = (text + "; " if text else "") + json.dumps(quote, ensure_ascii=False)
        if len(line) + len("; constraints: ") + len(candidate) > room:
            break
        text = candidate
    return line + (f"; constraints: {text}" if text else "")


def _render_trail(state: CarryState, budget: int) -> str:
    """Within `budget`: the oldest runs fold first, then the older errors go (the newest
    stays), then the oldest paths of the longest list fold into its count."""
    runs, earlier, failed = list(state.runs), state.earlier_runs, state.earlier_failed
    files = {k: list(v) for k, v in state.files.items()}
    more = dict(state.files_more)
    errors = list(state.errors)
    while True:
        lines = [_TRAIL]
        for kind in KINDS:
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
            kind = max(KINDS, key=lambda k: len(files[k]))
            files[kind].pop(0)
            more[kind] += 1
        else:
            return text if len(lines) > 1 else ""


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
