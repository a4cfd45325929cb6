"""The carried block (`_carry`) as data and as text: its state (`CarryState`, saved as JSON
by `to_data` / `from_data`, never read back out of a summary's text: DESIGN.md §15) and its
text within a size (`render_block`: oldest turns and runs folded first, the state as shown
returned with it); `with_carry` puts the text after the writer's summary."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ._extractive import _CONSTRAINT

__all__ = ["CARRY_HEADER", "KINDS", "CarryState", "Turn", "clip", "render_block", "with_carry"]

CARRY_HEADER = (
    "Kept by code across compactions (the user's words verbatim; find more with search_history):"
)
_CLIP_CONSTRAINT = 160
_CLIPPED_HEAD = 80
"""Characters of a clipped newest turn's head that its note and the ``earlier`` line leave."""
_EARLIER_ROOM = 120
"""What a clipped head leaves of the user's words at least: a head is a pointer to the whole
turn, and a block no longer than it needs keeps the summary smaller than what it replaces."""
_USERS = "User's words, newest first:"
_TRAIL = "Artifact trail:"
_ERRORS = "Newest errors:"
KINDS = ("read", "edited", "written", "deleted")


@dataclass
class Turn:
    stamp: str
    text: str
    note: str = ""
    """Set when `text` is the head of a turn too long for the block: how long the whole turn
    is and where it is (kept when the head is clipped again)."""

    def render(self, newer: str | None = None) -> str:
        """The turn's line; its time stamp left out when it is the one of the line above
        (`newer`, the next newer turn's): a burst of turns in one minute costs one stamp."""
        stamp = f"[{self.stamp}] " if self.stamp and self.stamp != newer else ""
        return f"- {stamp}{json.dumps(self.text + self.note, ensure_ascii=False)}"


@dataclass
class CarryState:
    """What the block holds. Kept as data from one compaction to the next (`to_data`), so
    that nothing a model wrote is ever taken for it."""

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

    def to_data(self) -> dict[str, Any]:
        """The state as JSON-able data (`from_data` reads it back)."""
        return {
            "turns": [[t.stamp, t.text, t.note] for t in self.turns],
            "earlier": [self.earlier, self.earlier_start, self.earlier_end],
            "constraints": list(self.constraints),
            "files": {k: list(self.files[k]) for k in KINDS},
            "files_more": {k: self.files_more[k] for k in KINDS},
            "runs": list(self.runs),
            "earlier_runs": [self.earlier_runs, self.earlier_failed],
            "errors": list(self.errors),
        }

    @classmethod
    def from_data(cls, data: object) -> CarryState:
        """The state `to_data` wrote. Raises ValueError (naming what is wrong) on anything
        else: a slot that was tampered with or damaged is not guessed at."""
        if not isinstance(data, Mapping):
            raise ValueError(f"carried state: expected an object, got {data!r:.80}")
        try:
            earlier, start, end = data["earlier"]
            runs, failed = data["earlier_runs"]
            state = cls(
                turns=[Turn(_str(s), _str(t), _str(n)) for s, t, n in data["turns"]],
                earlier=_count(earlier),
                earlier_start=_str(start),
                earlier_end=_str(end),
                constraints=[_str(c) for c in data["constraints"]],
                files={k: [_str(p) for p in data["files"][k]] for k in KINDS},
                files_more={k: _count(data["files_more"][k]) for k in KINDS},
                runs=[_str(r) for r in data["runs"]],
                earlier_runs=_count(runs),
                earlier_failed=_count(failed),
                errors=[_str(e) for e in data["errors"]],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"carried state: {exc!r}") from None
        return state


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r:.80}")
    return value


def _count(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"expected a count, got {value!r:.80}")
    return value


def with_carry(summary: str, block: str) -> str:
    """The summary followed by the carried block."""
    return f"{summary.rstrip()}\n\n{block}" if block else summary


# -- the block as text -----------------------------------------------------------------


def render_block(
    state: CarryState, max_chars: int, dialog: str = "dialog/"
) -> tuple[str, CarryState]:
    """The block's text within `max_chars` characters, and the state it shows (the turns and
    runs that fit, the rest folded): what the next compaction starts from. The user's words
    take what they need of the block, at least three fifths when the trail needs more; the
    trail the rest. Everything is measured as rendered (JSON-escaped), and a block that is
    still too long loses whole lines from its end, never half a line."""
    if not (state.turns or state.earlier or state.runs or state.earlier_runs
            or any(state.files.values())):  # fmt: skip
        return "", CarryState()
    room = max_chars - len(CARRY_HEADER) - 2
    wanted = len(_trail_text(_fit_trail(state, room)))
    shown = _fit_users(state, max(room * 3 // 5, room - wanted), dialog)
    shown = _fit_trail(shown, room - len(_users_text(shown)))
    parts = (CARRY_HEADER, _users_text(shown), _trail_text(shown))
    lines = "\n".join(part for part in parts if part).split("\n")
    while len("\n".join(lines)) > max_chars:
        lines.pop()
    return "\n".join(lines), shown


def _turn_lines(newest_first: list[Turn]) -> list[str]:
    newer = [None, *(t.stamp for t in newest_first)]
    return [t.render(above) for t, above in zip(newest_first, newer, strict=False)]


def _earlier_text(state: CarryState) -> str:
    """The ``earlier`` line of the folded turns ("" when none are)."""
    if not (n := state.earlier):
        return ""
    span = f", {state.earlier_start} → {state.earlier_end}" if state.earlier_start else ""
    quotes = "; ".join(json.dumps(q, ensure_ascii=False) for q in state.constraints)
    return f"- earlier: {n} turn{'s' if n > 1 else ''}{span}" + (
        f"; constraints: {quotes}" if quotes else ""
    )


def _users_text(state: CarryState) -> str:
    lines = _turn_lines(state.turns[::-1])
    if earlier := _earlier_text(state):
        lines.append(earlier)
    return "\n".join([_USERS, *lines]) if lines else ""


def _fit_users(state: CarryState, budget: int, dialog: str = "dialog/") -> CarryState:
    """Newest turns first, as many whole as fit beside the ``earlier`` line of the rest; the
    newest is clipped (with a note) only when it alone does not fit, and then after the
    ``earlier`` line took what it needs (so the older turns' constraints stay)."""
    newest_first = state.turns[::-1]
    found: dict[str, tuple[str, ...]] = {}

    def said(text: str) -> tuple[str, ...]:
        """A turn's constraints, found once per fit (it folds the same turns again for each
        number of turns it tries whole)."""
        if text not in found:
            found[text] = _constraints(text)
        return found[text]

    def fold(kept: list[Turn], folded: list[Turn], room: int) -> CarryState:
        """`kept` (newest first) shown whole, `folded` into an ``earlier`` line that takes
        what is left of `room`."""
        used = len("\n".join([_USERS, *_turn_lines(kept)]))
        return _fold(replace(state, turns=kept[::-1]), folded, room - used - 1, said)

    def room_left(fitted: CarryState, folded: list[Turn]) -> bool:
        """Whether `fitted` is within the budget and its ``earlier`` line quotes as many
        constraints of `folded` as two fifths of the budget would."""
        floor = _fold(replace(state, turns=[]), folded, budget * 2 // 5, said)
        return len(_users_text(fitted)) <= budget and (
            len(fitted.constraints) >= len(floor.constraints)
        )

    best = fold([], newest_first, budget)
    for keep in range(1, len(newest_first) + 1):
        fitted = fold(newest_first[:keep], newest_first[keep:], budget)
        if room_left(fitted, newest_first[keep:]):
            best = fitted
            continue
        # This turn does not fit whole: its head (the newest's always, an older one's when
        # there is room for one), after the ``earlier`` line of the rest took what it needs.
        whole, turn, rest = newest_first[: keep - 1], newest_first[keep - 1], newest_first[keep:]
        note = turn.note or f"… [clipped: {len(turn.text)} characters in all, in {dialog}]"
        least = len(Turn(turn.stamp, "", note).render()) + _CLIPPED_HEAD
        folded = fold(whole, rest, budget - least - 1)
        earlier = _earlier_text(folded)
        used = len("\n".join([_USERS, *_turn_lines(whole)]))
        room = budget - used - 1 - max(len(earlier) + 1 if earlier else 0, _EARLIER_ROOM)
        if keep == 1 or room >= least:
            best = replace(folded, turns=[_clipped(turn, note, room), *whole[::-1]])
        break
    return best


def _clipped(turn: Turn, note: str, room: int) -> Turn:
    """`turn` cut to the longest head whose line, with `note`, is `room` characters at most
    as rendered (an escaped character counts as what it takes)."""
    low, high = 0, len(turn.text)
    while low < high:
        mid = (low + high + 1) // 2
        if len(Turn(turn.stamp, turn.text[:mid], note).render()) <= room:
            low = mid
        else:
            high = mid - 1
    return Turn(turn.stamp, turn.text[:low], note)


def _fold(
    state: CarryState,
    folded: list[Turn],
    room: int,
    said: Callable[[str], tuple[str, ...]] | None = None,
) -> CarryState:
    """`state` with `folded` (newest first) added to its ``earlier`` fold: the count, the
    time range and the constraint sentences that fit its line in `room` characters."""
    n = state.earlier + len(folded)
    if n == 0:
        return replace(state, earlier_start="", earlier_end="", constraints=[])
    stamps = sorted(s for s in [state.earlier_start, state.earlier_end,
                                *(t.stamp for t in folded)] if s)  # fmt: skip
    start, end = (stamps[0], stamps[-1]) if stamps else ("", "")
    quotes: list[str] = []
    for turn in folded:  # newest first, then the older fold's own
        quotes += (said or _constraints)(turn.text)
    quotes += state.constraints
    quotes = list(dict.fromkeys(q for q in quotes if q))
    shown = replace(state, earlier=n, earlier_start=start, earlier_end=end, constraints=[])
    length, kept = len(_earlier_text(shown)) + len("; constraints: "), list[str]()
    for quote in quotes:
        length += len(json.dumps(quote, ensure_ascii=False)) + (2 if kept else 0)
        if length > room:
            break
        kept.append(quote)
    return replace(shown, constraints=kept)


def _constraints(text: str) -> tuple[str, ...]:
    """The constraint sentences of a turn, clipped."""
    sentences = re.split(r"(?<=[.!?。！？;；])\s+|\n", text)
    return tuple(clip(s, _CLIP_CONSTRAINT) for s in sentences if _CONSTRAINT.search(s))


def _trail_text(state: CarryState) -> str:
    lines = [_TRAIL]
    for kind in KINDS:
        if state.files[kind] or state.files_more[kind]:
            more = state.files_more[kind]
            extra = f" (+{more} earlier)" if more else ""
            lines.append(f"- {kind}{extra}: {', '.join(state.files[kind])}")
    lines += [f"- ran: {run}" for run in state.runs]
    if earlier := state.earlier_runs:
        failed = state.earlier_failed
        lines.append(f"- earlier: {earlier} run{'s' if earlier > 1 else ''}, {failed} failed")
    if state.errors:
        lines += [_ERRORS, *(f"- {e}" for e in state.errors)]
    return "\n".join(lines) if len(lines) > 1 else ""


def _fit_trail(state: CarryState, budget: int) -> CarryState:
    """Within `budget`: the oldest runs fold first, then the older errors go (the newest
    stays), then the oldest paths of the longest list fold into its count."""
    shown = replace(state, files={k: list(v) for k, v in state.files.items()},
                    files_more=dict(state.files_more), runs=list(state.runs),
                    errors=list(state.errors))  # fmt: skip
    while len(_trail_text(shown)) > budget:
        if shown.runs:
            shown.earlier_runs += 1
            shown.earlier_failed += shown.runs.pop(0).split(" → ", 1)[-1].startswith("failed")
        elif len(shown.errors) > 1:
            shown.errors.pop()
        elif any(len(v) > 1 for v in shown.files.values()):
            kind = max(KINDS, key=lambda k: len(shown.files[k]))
            shown.files[kind].pop(0)
            shown.files_more[kind] += 1
        else:
            break
    return shown


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
