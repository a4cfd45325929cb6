"""A saved output's blocks (schema 4): how the PostgreSQL index keeps an output, and how a
search finds its hits in them.

An output is indexed a row per block of about `BLOCK_CHARS` characters of its chunks
(`_search_text.chunk_lines`: the chunks a hit shows, as ever), `BLOCK_CHUNKS` chunks at
most: the row holds the distinct tokens of the block as a ``tsvector``, each with the chunks
of the block it is in as its positions (not its places in the text), and where the block's
text is in the output (its bytes, its first line), not the text. A ``tsvector`` and its GIN
postings then grow with the block's distinct words, not with its bytes: the index is about
1.2x the history where a row per 2 KB chunk was 2.6x at best (docs/contributors/search-notebook.md).

A search reads back the bytes of the blocks it ranks, for the hits only (`expand`): only the
blocks with a chunk holding every word of a term (the positions of the query's words), and
of those only such chunks. It cuts them into the chunks the index cut (the same
`chunk_lines` from the same line) and keeps the chunks that hold the query (every term, or
any: a phrase checked on the tokens). A block indexed before the positions were kept has
none: each of its chunks is checked. A block starts at a line's start, except inside a line
longer than a block: there its chunks are the line's pieces (`_search_text._pieces`), read
from their exact bytes when the line is valid UTF-8 (else from the line's start, `skip`
characters on).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from ...core.search._index_pieces import piece_lines
from ...core.search._search_hits import hit_key
from ...core.search._search_text import CHUNK_CHARS, Chunk, Query, _pieces, chunk_lines, folded
from .._search_turns import yield_to_searches
from ._outputs import range_params, range_sql
from ._search_sql import (
    MAX_LEXEME,
    chunks_text,
    db_text,
    exact_tokens,
    lexemes,
    query_needles,
)

__all__ = ["BLOCK_CHARS", "BLOCK_CHUNKS", "Block", "cut_blocks", "expand"]

BLOCK_CHARS = 64 << 10
"""Characters of an output's chunks per index row (a block ends at the end of a line past
it). Measured (`benchmarks/store/engines_pg.py`): 32 KB blocks 1.51x the history, 64 KB
1.22x."""
BLOCK_CHUNKS = 256
"""Chunks per block at most: a token's positions in the block's ``tsvector`` are the chunks
it is in, and PostgreSQL keeps 256 positions of a token (more are dropped). (A line of up to
`BLOCK_CHARS` makes 65 chunks at most, so a block of whole lines can always keep to it.)"""
_NEWLINE = re.compile(b"\n")


@dataclass(frozen=True)
class Block:
    """One index row of an output: where its chunks are, and its tokens."""

    start_line: int
    line_offset: int
    byte_start: int
    byte_end: int
    skip: int | None
    """`None`: the block is whole lines; else it holds the pieces of one long line, from
    `skip` characters into the bytes read."""
    count: int
    """Chunks in the block."""
    terms: str
    """The ``tsvector`` literal: its distinct tokens, each with the chunks it is in (from 1)
    as its positions."""


def cut_blocks(data: bytes, start: int, first_line: int) -> list[Block]:
    """The blocks of a piece of an output: `data`, from its byte `start`, whose first line is
    `first_line` (a piece ends after a newline or at the output's end)."""
    lines = piece_lines(data)
    starts = [0, *(m.end() for m in _NEWLINE.finditer(data))]
    out: list[Block] = []
    group: list[Chunk] = []
    size = 0
    long_at: _LongLine | None = None  # the long line the group is pieces of

    def flush() -> None:
        nonlocal group, size
        if not group:
            return
        first = group[0].start_line - first_line
        if long_at is None:
            last = group[-1].start_line + group[-1].text.count("\n") - first_line
            end = starts[last + 1] if last + 1 < len(starts) else len(data)
            out.append(_block(group, start + starts[first], start + end, None))
        else:
            b0, b1, skip = long_at.span(group[0].line_offset, _end(group[-1]))
            out.append(_block(group, start + b0, start + b1, skip))
        group, size = [], 0

    for chunk in chunk_lines(lines, first_line):
        i = chunk.start_line - first_line
        line = lines[i]
        if len(line) > BLOCK_CHARS:  # a piece of a line longer than a block
            if long_at is None or long_at.index != i:
                flush()
                long_at = _LongLine(i, line, data, starts)
            group.append(chunk)
            size += len(chunk.text)
            if size >= BLOCK_CHARS or len(group) >= BLOCK_CHUNKS or _end(chunk) >= len(line):
                flush()
            continue
        if long_at is not None:
            flush()
            long_at = None
        if chunk.line_offset == 0 and len(group) + _most_pieces(line) > BLOCK_CHUNKS:
            flush()  # (a block ends at a line's end: all the line's pieces must fit)
        group.append(chunk)
        size += len(chunk.text) + 1
        ends_line = _end(chunk) >= len(lines[i + chunk.text.count("\n")])
        if (size >= BLOCK_CHARS or len(group) >= BLOCK_CHUNKS) and ends_line:
            flush()
    flush()
    return out


def _most_pieces(line: str) -> int:
    """Chunks `line` makes at most (`_search_text._pieces`: each but the last holds half of
    `CHUNK_CHARS` or more)."""
    return 1 if len(line) <= CHUNK_CHARS else len(line) // (CHUNK_CHARS // 2) + 1


def _end(chunk: Chunk) -> int:
    """Where `chunk` ends in its last line, in characters."""
    last = chunk.text.rsplit("\n", 1)[-1]
    return (chunk.line_offset if "\n" not in chunk.text else 0) + len(last)


class _LongLine:
    """Byte offsets inside one long line of a piece: exact when the line is valid UTF-8 (its
    characters encode back to its bytes), else the line's start and end."""

    def __init__(self, index: int, line: str, data: bytes, starts: list[int]) -> None:
        self.index, self.line = index, line
        self.begin = starts[index]
        end = starts[index + 1] if index + 1 < len(starts) else len(data)
        raw = data[self.begin : end]
        if raw.endswith(b"\n"):
            raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
        self.end = end
        self.exact = line.encode("utf-8") == raw
        self._chars = self._bytes = 0  # a cursor: the pieces come in order

    def span(self, first: int, last: int) -> tuple[int, int, int]:
        """Bytes from character `first` to `last` of the line (in the piece), and the
        characters to skip of what they decode to."""
        if not self.exact:
            return self.begin, self.end, first
        b0 = self._at(first)
        return self.begin + b0, self.begin + self._at(last), 0

    def _at(self, chars: int) -> int:
        self._bytes += len(self.line[self._chars : chars].encode("utf-8"))
        self._chars = chars
        return self._bytes


def _block(group: Sequence[Chunk], b0: int, b1: int, skip: int | None) -> Block:
    where: dict[str, list[int]] = {}
    for number, chunk in enumerate(group, start=1):
        for word in dict.fromkeys(lexemes(db_text(chunk.text))):
            where.setdefault(word, []).append(number)
        yield_to_searches()  # (a search of the process runs first)
    first = group[0]
    return Block(first.start_line, first.line_offset, b0, b1, skip, len(group), chunks_text(where))


def block_chunks(data: bytes, block: Block) -> list[Chunk]:
    """The chunks of `block` from its bytes `data` (as `cut_blocks` cut them)."""
    if block.skip is None:
        return list(islice(chunk_lines(piece_lines(data), block.start_line), block.count))
    lines = piece_lines(data)
    text = lines[0][block.skip :] if lines else ""
    return [
        Chunk(c.start_line, c.line_offset + block.line_offset, c.text)
        for c in islice(_pieces(text, block.start_line), block.count)
    ]


_ENTRY = re.compile(r"'((?:[^']|'')*)':([0-9A-D,]+)")


def _candidates(
    entries: str | None, needles: list[tuple[list[str], bool]], every: bool
) -> set[int] | None:
    """The chunks of a block (from 1) that may hold the query, from the ``tsvector`` of its
    tokens among `_search_sql.block_words` (each with the chunks it is in): a chunk that
    lacks a token of a term cannot hold the term. `None`: any chunk may (none of those tokens
    has positions: a block indexed before they were kept, or a query of prefixes only)."""
    if not entries:
        return None
    at = {
        word.replace("''", "'"): {int(n.rstrip("ABCD")) for n in numbers.split(",")}
        for word, numbers in _ENTRY.findall(entries)
    }
    held: list[set[int]] = []
    for needle, prefix in needles:
        words = exact_tokens(needle, prefix)
        if not words:  # a prefix alone: any chunk may hold it
            if not every:
                return None
            continue
        held.append(set.intersection(*(at.get(w, set()) for w in words)))
    if not held:
        return None
    return set.intersection(*held) if every else set.union(*held)


def _holds(words: list[str], needle: list[str], prefix: bool) -> bool:
    """Whether the tokens `words` hold the phrase `needle` (its last token a prefix)."""
    n = len(needle)
    if n == 1 and not prefix:
        return needle[0] in words  # (the usual needle: one word, looked for at C speed)
    for at in range(len(words) - n + 1):
        if words[at : at + n - 1] == needle[:-1] and (
            words[at + n - 1].startswith(needle[-1]) if prefix else words[at + n - 1] == needle[-1]
        ):
            return True
    return False


def _pattern(needle: list[str]) -> re.Pattern[str]:
    """Where the phrase `needle` may be in a folded text: its tokens in order with nothing but
    separators between them (a token cut at `MAX_LEXEME` may go on)."""
    return re.compile(
        r"[\W_]*".join(re.escape(t) + ("[^\\W_]*" if len(t) >= MAX_LEXEME else "") for t in needle)
    )


def _matches(
    text: str,
    needles: list[tuple[list[str], bool]],
    patterns: list[re.Pattern[str]],
    every: bool,
) -> bool:
    """Whether the chunk `text` holds every needle (`every`) or any. Its folded text is
    looked at first (`_pattern`): a needle not there cannot be held, and a chunk that cannot
    hold the query is passed over without being cut in tokens (which took 100-200 ms for a
    search checking the 1,100 chunks of 28 blocks)."""
    low = folded(text)
    maybe = [pattern.search(low) is not None for pattern in patterns]
    if not (all(maybe) if every else any(maybe)):
        return False
    words = [w[:MAX_LEXEME] for w in lexemes(text)]
    found = (
        _holds(words, needle, prefix)
        for (needle, prefix), may in zip(needles, maybe, strict=True)
        if may
    )
    return all(found) if every else any(found)


def expand(
    conn: Any, schema: str, rows: Sequence[Sequence[Any]], query: Query, every: bool, hits: int
) -> list[tuple[Any, ...]]:
    """`rows` of `_search_sql.ranked_sql` (best first) with each block row replaced by the
    chunks of the block that hold `query` (every term, or any), each a row as a chunk's
    (its text read back from the output); read until the rows make `hits` hits
    (`_search_hits.build_hits`, which keeps one row of those with one `hit_key`): the blocks
    ranked after them are never read."""
    needles, keys = query_needles(query), query.needles()
    patterns = [_pattern(needle) for needle, _ in needles]
    out: list[tuple[Any, ...]] = []
    seen: set[str] = set()

    def add(row: tuple[Any, ...]) -> None:
        out.append(row)
        seen.add(hit_key(row[1], keys))

    for row in rows:
        if len(seen) >= hits:
            break
        if row[13] is None:  # a chunk with its text
            add(tuple(row[:13]))
            continue
        maybe = _candidates(row[17], needles, every)
        if maybe is not None and not maybe:
            continue  # no chunk has the words: the block is not read
        block = Block(
            int(row[2]),
            int(row[3]),
            int(row[13]),
            int(row[14]),
            None if row[15] is None else int(row[15]),
            int(row[16]) if maybe is None else max(maybe),  # (the chunks after: not cut)
            "",
        )
        data = _read(conn, schema, str(row[4]), block.byte_start, block.byte_end)
        for number, chunk in enumerate(block_chunks(data, block), start=1):
            if len(seen) >= hits:
                break
            if maybe is not None and number not in maybe:
                continue
            text = db_text(chunk.text)
            if _matches(text, needles, patterns, every):
                add((row[0], text, chunk.start_line, chunk.line_offset, *row[4:13]))
    return out


def _read(conn: Any, schema: str, source: str, b0: int, b1: int) -> bytes:
    """Bytes `b0` to `b1` of the output of index source `source` (``pg-output:ID``)."""
    params = {"id": source.removeprefix("pg-output:"), "off": b0, "end": b1}
    found = conn.execute(range_sql(schema), range_params(params)).fetchall()
    return b"".join(bytes(r[-1]) for r in found if r[-1] is not None)
