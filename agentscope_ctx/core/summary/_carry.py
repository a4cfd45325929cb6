"""What compaction keeps by code (DESIGN.md §13): the user's own words and the artifact trail.

A summary is only as good as the model that writes it: a lazy one answers with the five
headings and generic lines, and the user's constraints and the files the agent touched are
gone. So what must survive is computed from the compacted messages by code and carried from
summary to summary, beside whatever the model (or the extractive fallback) wrote:

- **The user's words**: the text of each user turn, verbatim (as a JSON string, so that
  newlines and quotes survive), newest first. Older turns that no longer fit fold into one
  ``earlier`` line that still quotes the constraint sentences they held ("do not ...",
  "never ...", "must ..."); the first turn that does not fit whole keeps its head with a
  note (the newest always), in what that line leaves (`_carry_text.render_block`).
- **The artifact trail**: files read, edited, written (created) and deleted, from the tools'
  arguments; commands run with their outcome (`_outcome.judge`: from the saved file when the
  output was cut or masked, never "ok" unseen); the newest error lines. The oldest runs fold
  into one line first, then the oldest paths of each kind into a count.

The block's state and text form are `_carry_text`. The state is kept as data from one
compaction to the next (`_kept`), never parsed back out of the summary: a model's summary that
ends in a block-shaped section is the model's text, not the user's words (DESIGN.md §15). The
block is a pure function of the previous state and the compacted messages, so it changes
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

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from .._entry import Msg
from ._carry_text import CarryState, Turn, clip, render_block
from ._extractive import _result_text, msg_text
from ._outcome import ReadSaved, error_lines, judge

__all__ = ["carried", "user_words"]

_NEWEST_ERRORS = 3
_CLIP_COMMAND = 100
_CLIP_PATH = 200
_CLIP_ERROR = 200
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
    previous: CarryState | None,
    max_chars: int,
    *,
    read_saved: ReadSaved | None = None,
    internal: Callable[[str], bool] = lambda path: False,
    hints: Collection[str] = (),
    dialog: str = "dialog/",
) -> tuple[str, CarryState]:
    """The carried block after compacting `msgs` away, given the `previous` state (`None` at
    the first compaction), at most `max_chars` characters, and the state it shows (the next
    compaction's `previous`). The same inputs give the same text.

    Args:
        msgs: The compacted messages, oldest first.
        previous: The state the summary carried until now (not changed).
        max_chars: Upper bound of the block's length.
        read_saved: Reads a cut or masked output back from its saved file (see `_outcome`).
        internal: Whether a path is the package's own (a saved output read on with
            `read_file`): such paths are not the agent's artifacts.
        hints: Ids of the messages the memory marks as runtime hints (not the user's words).
        dialog: Where a clipped turn's whole text is (the fleet store: its day refs).
    """
    state = CarryState.from_data(previous.to_data()) if previous is not None else CarryState()
    _add(state, [m for m in msgs if m.id not in hints], read_saved, internal)
    return render_block(state, max_chars, dialog)


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
    state: CarryState,
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
            state.turns.append(Turn(_stamp(msg), text))
        for block in _blocks(msg):
            if block.get("type") != "tool_use":
                continue
            args = block.get("input")
            kind, paths, command = _classify(
                str(block.get("name") or ""), args if isinstance(args, Mapping) else {}
            )
            for path in paths:
                if kind is not None and not internal(path):
                    _touch(state.files[kind], clip(path, _CLIP_PATH))
            if command is not None:
                result = results.get(str(block.get("id")))
                shown = f"`{clip(command, _CLIP_COMMAND)}`"
                outcome = judge(result, read_saved).label() if result is not None else None
                state.runs.append(f"{shown} → {outcome or 'no result yet'}")
                if outcome and outcome.startswith("failed: ") and error_lines(outcome[8:]):
                    error = clip(outcome[8:], _CLIP_ERROR)
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
