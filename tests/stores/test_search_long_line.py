"""A saved output of one long line (a minified bundle, a JSON dump) is indexed in time linear
in its size (issue 46 item 10): its chunks, and the work of finding each in the file, are
pinned here by counts, never by a clock (`benchmarks/store/one_line.py` times it)."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentscope_ctx.stores._search_text_batch as batch_module
from agentscope_ctx.core.search._index_pieces import piece_lines
from agentscope_ctx.core.search._search_text import CHUNK_CHARS, chunk_lines
from agentscope_ctx.stores._search import SearchIndex
from agentscope_ctx.stores._tool_results import ToolResultStore


def one_line(chars: int, word: str = "lorem") -> str:
    words = [f"{word}{i % 997}" for i in range(chars // 6 + 1)]
    return " ".join(words)[:chars]


@pytest.mark.parametrize("extra", ["", "é中"])
def test_a_long_lines_chunks_tile_it(extra: str) -> None:
    """Its chunks follow each other with no gap or overlap, each at most `CHUNK_CHARS` and,
    but the last, at least half of it (cut at a space near the limit)."""
    line = one_line(300_000) + extra * 500
    chunks = list(chunk_lines([line], 5))
    assert {c.start_line for c in chunks} == {5}
    assert "".join(c.text for c in chunks) == line
    offsets = [c.line_offset for c in chunks]
    assert offsets == [sum(len(c.text) for c in chunks[:k]) for k in range(len(chunks))]
    assert all(CHUNK_CHARS // 2 <= len(c.text) <= CHUNK_CHARS for c in chunks[:-1])
    assert len(line) // CHUNK_CHARS <= len(chunks) <= 2 * len(line) // CHUNK_CHARS + 1


@pytest.mark.parametrize("extra", ["", "é中"])
@pytest.mark.parametrize("chars", [200_000, 800_000])
def test_finding_a_long_lines_chunks_in_its_file_is_linear(
    monkeypatch: pytest.MonkeyPatch, chars: int, extra: str
) -> None:
    """The characters measured to find every chunk of a one-line piece in its bytes are a
    small multiple of the line, whatever its length: each chunk's byte offset used to be
    measured from the line's start (a slice and an encode of all that came before it), so a
    24 MB line took 37 s to index against 9 s as short lines, and 32 MB 422 s."""
    measured = [0]
    byte_len = batch_module.byte_len

    def counting(text: str) -> int:
        measured[0] += len(text)
        return byte_len(text)

    monkeypatch.setattr(batch_module, "byte_len", counting)
    line = (extra * 50 + one_line(chars)) if extra else one_line(chars)
    data = (line + "\n").encode()
    where = batch_module.locate(data, 4096, 1)
    for chunk in chunk_lines(piece_lines(data)):
        place = where(chunk)
        assert place is not None
        assert data[place[0] - 4096 : place[0] - 4096 + place[1]].decode() == chunk.text
    assert measured[0] <= 3 * len(line)


def test_a_one_line_output_is_found_to_its_last_word(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path)
    store = ToolResultStore(
        tmp_path, 7, on_saved=lambda p: index.output_saved(p, agent="alice"), owner=("alice", "")
    )
    line = one_line(3_000_000) + " the okapi here é中 at the end"
    path = store.save(line)
    hits = index.search("okapi").hits
    assert [h.path for h in hits] == [path]
    assert any("okapi" in text for h in hits for _, text in h.lines)
