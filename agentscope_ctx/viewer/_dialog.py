"""`dialog_entries`: the messages that left the context as the page shows them.

- Who spoke, once: ``user`` (``user alice`` for a named user), ``assistant detective``, a
  tool's result under its tool and the call that asked for it (``tool run_shell``,
  ``run_shell(command="grep -rn ERROR logs")``), never AgentScope's message name of a tool
  result (``system``).
- AgentScope's ``<system-reminder>`` blocks (the time and other hints it adds to a user's
  message) as a system hint, apart from the user's words; a message of hints alone is a
  system hint's, not the user's.
- A cut output as the excerpt the context kept and a marker naming the saved output, its
  size and how to read on (``cut: 66,400 bytes saved as tool_result/….txt, read on with
  read_file``); a masked one (the notice alone stayed) as the head of its saved output.

The notices taken are those ending a tool's result (the package's), as `record_parts` and
the steps record take them; one typed in a user's or the model's text is text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.search._search_text import key_args
from ..core.truncation._truncation import parse_notice
from ..services._breakdown import MASK_BYTES

__all__ = ["HINT", "Entry", "Piece", "call_text", "dialog_entries"]

HINT = re.compile(r"<system-reminder>(.*?)</system-reminder>", re.DOTALL)
"""AgentScope's hint blocks in a user's message (its current time, plan and tool hints)."""


@dataclass
class Piece:
    """One part of a message's body."""

    kind: Literal["text", "hint", "cut"]
    text: str
    """The words; of a cut output, the excerpt the context kept."""
    ref: str = ""
    """A cut output's saved output (or the file its read came from)."""
    kept: int = 0
    """A cut output's excerpt, in bytes."""
    lines: int = 0
    """A cut output's lines in all."""
    call: str = ""
    """A cut output's call: ``run_shell(command="...")``, or its tool alone."""
    start: int = 1
    """The line of its source a cut output's excerpt begins at."""

    @property
    def masked(self) -> bool:
        """A cut output of which only the notice stayed (a character or so of excerpt)."""
        return self.kind == "cut" and self.kept <= MASK_BYTES


@dataclass
class Entry:
    """One message of the dialog as the page shows it."""

    role: str
    """``user``, ``assistant``, ``tool``, ``system`` or ``hint`` (hints alone)."""
    who: str
    """The header: the role once, with the speaker's name when it says more."""
    call: str = ""
    """A tool result's call: ``run_shell(command="grep -rn ERROR logs")``."""
    pieces: list[Piece] = field(default_factory=list)

    @property
    def refs(self) -> list[str]:
        """The saved outputs its cut outputs name."""
        return [p.ref for p in self.pieces if p.kind == "cut"]


def dialog_entries(msgs: list[dict[str, Any]]) -> list[Entry]:
    """The entries of dialog records' messages (``msg`` dicts), in order; a tool result
    finds its call in a message before it."""
    calls: dict[str, tuple[str, str]] = {}
    return [_entry(msg, calls) for msg in msgs]


def _blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _entry(msg: dict[str, Any], calls: dict[str, tuple[str, str]]) -> Entry:
    role, name = str(msg.get("role") or ""), str(msg.get("name") or "")
    pieces: list[Piece] = []
    tools: list[tuple[str, str]] = []
    for block in _blocks(msg.get("content")):
        kind = block.get("type")
        if kind in ("text", "thinking") and isinstance(block.get(kind), str):
            text = block[kind]
            pieces += _hints(text) if role == "user" else [Piece("text", text)]
        elif kind == "tool_use":
            raw = block.get("input")
            tool_input: dict[str, Any] = raw if isinstance(raw, dict) else {}
            tool = str(block.get("name") or "")
            calls[str(block.get("id"))] = (tool, key_args(tool_input))
            text = f"{tool} {json.dumps(tool_input, ensure_ascii=False)}"
            pieces.append(Piece("text", text))
        elif kind == "tool_result":
            tool = str(block.get("name") or "")
            asked = calls.get(str(block.get("id")))  # `None`: its call is not in the dialog
            tool, args = tool or (asked or ("", ""))[0], "" if asked is None else asked[1]
            tools.append((tool, args))
            pieces += _output(block.get("output"), call_text(tool, args))
        elif isinstance(kind, str) and kind:
            pieces.append(Piece("text", f"[{kind}]"))  # an image, audio, a video
    if tools:
        names = ", ".join(dict.fromkeys(tool for tool, _ in tools))
        call = "; ".join(call_text(tool, args) for tool, args in tools if args)
        return Entry("tool", f"tool {names}", call, pieces)
    if role == "user" and pieces and all(p.kind == "hint" for p in pieces):
        return Entry("hint", "system hint", pieces=pieces)
    shown = name if name and name != role and not (role == "system" and name == "system") else ""
    who = f"{role} {shown}".strip() or "message"
    return Entry(role or "message", who, pieces=pieces)


def call_text(tool: str, args: str) -> str:
    """``run_shell(command="ls")``; the tool alone when its arguments are not known."""
    return f"{tool}({args})" if args else tool


def _hints(text: str) -> list[Piece]:
    """A user's text: its words and AgentScope's ``<system-reminder>`` hints, apart."""
    pieces, at = [], 0
    for match in HINT.finditer(text):
        before = text[at : match.start()].strip()
        if before:
            pieces.append(Piece("text", before))
        pieces.append(Piece("hint", match.group(1).strip()))
        at = match.end()
    rest = text[at:].strip() if pieces else text
    if rest:
        pieces.append(Piece("text", rest))
    return pieces


def _output(output: object, call: str) -> list[Piece]:
    """A tool's output: its texts, a cut one as its excerpt and the saved output's ref."""
    pieces = []
    for item in [output] if isinstance(output, str) else output if isinstance(output, list) else []:
        text = item if isinstance(item, str) else None
        if isinstance(item, dict):
            text = str(item.get("text", "")) if item.get("type") == "text" else None
            if text is None:
                pieces.append(Piece("text", f"[{item.get('type', 'block')}]"))
                continue
        if text is None:
            continue
        parsed = parse_notice(text)
        if parsed is None:
            pieces.append(Piece("text", text))
            continue
        excerpt, notice = parsed
        pieces.append(
            Piece(
                "cut",
                excerpt,
                notice.file_path,
                notice.n_bytes,
                notice.total_lines,
                call,
                notice.start.line,
            )
        )
    return pieces
