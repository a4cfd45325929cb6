"""Saved outputs indexed in pieces (DESIGN.md §16): both search indexes read a saved output
from where they stopped, a piece of about `PIECE_BYTES` at a time, cut after a newline, and
record how far they got. A search indexes at most `SEARCH_INDEX_BYTES` of outputs before it
answers (and says what is not indexed yet); the rest is indexed in the background
(`_background.BackgroundWork`) and by later calls. So a 100 MB output costs the search that
follows it a bounded time, not the seconds its whole index takes."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["PIECE_BYTES", "SEARCH_INDEX_BYTES", "cut_piece", "piece_lines", "search_budget"]

PIECE_BYTES = 1 << 20
"""Bytes of a saved output indexed per step (one write transaction): about 0.1 s locally,
0.25 s on PostgreSQL."""
SEARCH_INDEX_BYTES = 2 << 20
"""Bytes of saved outputs a search indexes before it answers (whole pieces: it may finish the
piece it started); what is left is indexed in the background."""


def search_budget(catch_up_seconds: float | None) -> int | None:
    """Bytes of saved outputs a search indexes before it answers: `SEARCH_INDEX_BYTES`; all
    (`None`) without a catch-up bound. (While the background indexing runs, a search takes
    only the outputs that fit whole in it: the background has the big ones, and a search
    would take their pieces between two of its steps and wait for them.)"""
    return None if catch_up_seconds is None else SEARCH_INDEX_BYTES


def cut_piece(blocks: Iterable[bytes], limit: int) -> bytes:
    """The bytes of `blocks` (an output read on from a piece's start) up to the first newline
    at or after `limit` bytes, or all of them when there is none (the output's end). A line
    longer than `limit` is taken whole."""
    data = bytearray()
    for block in blocks:
        if len(data) + len(block) >= limit:
            at = block.find(b"\n", max(limit - len(data) - 1, 0))
            if at >= 0:
                data += block[: at + 1]
                return bytes(data)
        data += block
    return bytes(data)


def piece_lines(data: bytes) -> list[str]:
    """The lines of a piece as `read_file` counts them (``\\n`` ends a line, a ``\\r`` before
    it is dropped; invalid UTF-8 costs its character). A piece ends after a newline or at the
    output's end, so neither a character nor a ``\\r\\n`` is ever split between two."""
    lines = data.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines
