"""The rows of the PostgreSQL search index (table ``chunks``, `_schema`): a chunk of a dialog
record or a memory document with its text and its tokens' positions (`chunk_row`), a block
of a saved output with where its text is and its tokens with the chunks each is in
(`block_row`, `_blocks`), and their insert (`insert_chunks`). Shared by the catch-up
(`_indexer`) and the memory documents' index (`_memory_index`)."""

from __future__ import annotations

import re
from typing import Any

from ...core.search._search_text import Chunk
from ._blocks import Block
from ._search_sql import MAX_LEXEME, db_text, lexemes, tsvector_text

__all__ = ["block_row", "chunk_row", "insert_chunks"]

_PARSER_SPLITS = re.compile(r"(?:^| )[0-9]+e[0-9]+[a-z]")
"""A word PostgreSQL's parser does not keep whole: a number in exponent form, then a letter
(``0e0a``: ``0e0`` and ``a``; hex ids and hashes hold many). Of all words of up to 6 characters
of ``0193bdefinox`` (3.3 million, 2026-12-04), exactly those it splits; a word of only letters,
or one starting with a letter, it keeps."""

_NO_BLOCK = (None, None, None, None)
"""A chunk row's block columns: its text is in the row."""


def chunk_row(kind: str, source: str, chunk: Chunk, meta: tuple[object, ...]) -> tuple[object, ...]:
    """The index row of `chunk` (`meta`: agent, session, role, tool, args, time): its text,
    and its tokens with their positions (a literal, or text PostgreSQL's parser splits as we
    do)."""
    text = db_text(chunk.text)
    words = lexemes(text)
    joined = " ".join(words)
    if (
        all(len(word) <= MAX_LEXEME for word in words)
        and joined.isascii()
        and _PARSER_SPLITS.search(joined) is None
    ):  # letters and digits, apart: PostgreSQL's parser keeps each word as it is
        terms: tuple[str | None, str | None] = (None, joined)
    else:
        terms = (tsvector_text(text), None)
    return (kind, source, chunk.start_line, chunk.line_offset, text, *terms, *meta, *_NO_BLOCK)


def block_row(source: str, block: Block, meta: tuple[object, ...]) -> tuple[object, ...]:
    """The index row of an output's block (`_blocks`): no text, its tokens with the chunks
    each is in as their positions."""
    where = (block.byte_start, block.byte_end, block.skip, block.count)
    return ("tool_result", source, block.start_line, block.line_offset, "", block.terms, None,
            *meta, *where)  # fmt: skip


def insert_chunks(conn: Any, schema: str, rows: list[tuple[object, ...]]) -> None:
    """Insert index rows (`chunk_row`, `block_row`) into ``chunks``."""
    if rows:
        with conn.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {schema}.chunks (kind, source, start_line, line_offset, body, "
                "terms, agent, session, role, tool, args, ts, byte_start, byte_end, byte_skip, "
                "chunk_count) VALUES (%s, %s, %s, %s, %s, "
                "coalesce(%s::tsvector, to_tsvector('simple', %s::text)), "
                "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [tuple(db_text(v) if isinstance(v, str) else v for v in row) for row in rows],
            )
