"""The dialog that left the context, as the viewer's page draws it (`_dialog`'s entries):
each message under its speaker, its hints apart, each cut output as its excerpt and marker."""

from __future__ import annotations

from html import escape
from pathlib import PurePath

from ._dialog import Entry, Piece
from ._session import SessionView

__all__ = ["dialog_html", "ref_text"]


def dialog_html(view: SessionView) -> str:
    """The messages of `view.dialog`, one ``div.msg`` each."""
    return "\n".join(_entry(entry, view) for entry in view.dialog)


def _entry(entry: Entry, view: SessionView) -> str:
    """One message: who spoke (and the call a tool's result answers), then its pieces."""
    head = f'<b class="who">{escape(entry.who)}</b>'
    if entry.call:
        head += f'<code class="call">{escape(entry.call)}</code>'
    body = []
    for piece in entry.pieces:
        if piece.kind == "hint":
            body.append(
                '<div class="hint"><small>AgentScope\'s &lt;system-reminder&gt;, a system hint: '
                f"not the user's words</small>\n{escape(piece.text)}</div>"
            )
        elif piece.kind == "cut":
            body.append(_cut(piece, view))
        else:
            text_class = "out" if entry.role == "tool" else "text"
            body.append(f'<div class="{text_class}">{escape(piece.text)}</div>')
    return f'<div class="msg {escape(entry.role)}">{head}{"".join(body)}</div>'


_HEAD_LINES, _HEAD_CHARS = 6, 600
"""What a masked output shows of its saved output's head."""


def _cut(piece: Piece, view: SessionView) -> str:
    """A cut output: the excerpt the context kept (masked: the head of its saved output,
    marked so), then the marker naming the saved output, its size and how to read on."""
    ref, size = piece.ref, view.sizes.get(piece.ref)
    saved = ref in view.saved or size is not None or PurePath(ref).parent.name == "tool_result"
    how = "masked" if piece.masked else "cut"
    if piece.start > 1:
        how += f" (from line {piece.start:,})"
    name = ref_text(ref, view.root)
    if not saved:
        marker = f"{how}: an excerpt of {name} ({piece.lines:,} lines)"
    elif size is None:
        marker = f"{how}: {piece.lines:,} lines saved as {name}"
    else:
        marker = f"{how}: {size:,} bytes saved as {name}"
    marker += ", read on with read_file"
    if not piece.masked:
        excerpt = f'<div class="out">{escape(piece.text)}</div>'
    elif ref in view.excerpts and piece.start == 1:
        head = "\n".join(view.excerpts[ref].splitlines()[:_HEAD_LINES])[:_HEAD_CHARS]
        excerpt = (
            '<div class="out head" title="the context kept the notice alone: this is the head '
            f'of the saved output">{escape(head)}</div>'
        )
    else:
        excerpt = ""
    return (
        f'{excerpt}<a class="notice cut" href="#excerpt" data-ref="{escape(ref)}" '
        f'title="{escape(piece.call)}">{escape(marker)}</a>'
    )


def ref_text(ref: str, root: str = "") -> str:
    """A saved output's ref as the report names it (``tool_result/….txt``); a file below
    the working dir `root` by its path from there, another by its own."""
    path = PurePath(ref)
    if path.parent.name == "tool_result":
        return f"tool_result/{path.name}"
    if root and path.is_relative_to(root):
        return str(path.relative_to(root))
    return ref
