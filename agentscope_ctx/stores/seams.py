"""The three storage seams (DESIGN.md §11), as small protocols shaped on today's callers:
`DialogSeam` and `OutputSeam` are the core's (`core._seams`: the core takes them as
parameters), re-exported here; `SearchSeam` is the stores' own.

The core, the tools and the CLI reach storage only through these. Local files + SQLite
(`agentscope_ctx.stores.local`) are the default implementation; PostgreSQL
(`agentscope_ctx.stores.postgres`) is the fleet one, chosen by ``store.kind`` in the config.

- `DialogSeam`: append-only, idempotent by message id, ordered; records carry the agent and
  the session they were given at construction. `append` is async (the core awaits it before
  dropping messages); reads are sync with an async twin, as in `_dialog.DialogStore`.
- `OutputSeam`: the full tool outputs, bytes by *ref* (a string every worker of the store
  resolves: an absolute path for the local store, ``pg-output:<hex>`` for PostgreSQL), ranged
  reads by byte and by line (what `read_file` needs), and retention. Sync: the callers run
  it in a thread.
- `SearchSeam`: index (the notifications a save sends), search, catch up, rebuild. Sync,
  like `_search.SearchIndex`; its notifications never raise.

`excerpt` is `read_file`'s continuation read done through `OutputSeam` alone: the same cut
and notice as reading the file (`_truncation.excerpt_with_notice`), for either store;
`tell_saved` is how either store tells its listener of a save.
"""

from __future__ import annotations

import codecs
import logging
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar, runtime_checkable

from ..core._seams import DialogSeam, OutputSeam
from ..core.search._search_hits import Filters, SearchResult
from ..core.search._search_text import Query
from ..core.truncation._truncation import Position, excerpt_with_notice, utf8_len

__all__ = ["DialogSeam", "OutputSeam", "RangedSource", "SearchSeam", "excerpt", "tell_saved"]

logger = logging.getLogger("agentscope_ctx")

Ref = TypeVar("Ref")


class RangedSource(Protocol):
    """What `excerpt` reads: bytes by ref, by range and by line (an `OutputSeam`, or the
    PostgreSQL dialog's day view)."""

    def read_range(self, ref: str, offset: int, size: int) -> bytes: ...

    def line_count(self, ref: str) -> int: ...

    def line_start(self, ref: str, line: int) -> int: ...


@runtime_checkable
class SearchSeam(Protocol):
    """Full-text search over the dialog and the outputs (see `_search.SearchIndex`)."""

    sources: str
    """What it searches, as a search's answer names it."""

    def output_saved(self, ref: str, *, agent: str | None, session: str | None = None) -> None:
        """An output was saved by `agent`: record its owner and index it. Never raises."""
        ...

    def describe_output(self, ref: str, *, tool: str, args: str | None) -> None:
        """Name the tool (and key arguments) whose output is `ref`. Never raises."""
        ...

    def dialog_appended(self) -> None:
        """Records were appended: index them (bounded; a search catches up). Never raises."""
        ...

    def drop_outputs(self, refs: Iterable[str]) -> None:
        """Forget deleted outputs. Never raises."""
        ...

    def catch_up(self, *, seconds: float | None = None) -> int:
        """Index what the stores hold and the index does not; the number of sources left."""
        ...

    def search(
        self,
        query: str | Query,
        filters: Filters | None = None,
        *,
        limit: int = 5,
        catch_up_seconds: float | None = 10.0,
    ) -> SearchResult:
        """The best `limit` hits (every term, else any); user text is never query syntax."""
        ...

    def rebuild(self) -> None:
        """Drop the index and index everything again from the stores."""
        ...

    def close(self) -> None:
        """Release connections (reopened when needed)."""
        ...


def tell_saved(on_saved: Callable[[Ref], None] | None, ref: Ref) -> None:
    """Call an output store's listener `on_saved(ref)` (if any) after a save; what it raises
    is logged, never passed on: a listener (the search index) never fails a save."""
    if on_saved is None:
        return
    try:
        on_saved(ref)
    except Exception:
        logger.exception("agentscope_ctx: the tool output listener failed")


def excerpt(outputs: RangedSource, ref: str, start: Position, max_bytes: int) -> str:
    """`read_file` on a stored output: from `start`, cut to `max_bytes` with the notice
    pointing to the next position (file_path=`ref`). Reads a bounded window, never the whole
    output: the line's start by the store's line index, then at most one line's worth of
    characters to skip `start.offset`, then `max_bytes` + 8 bytes.

    Raises:
        KeyError: no such output.
        ValueError: `start` is past the end (the message says where the end is).
    """
    lines = outputs.line_count(ref)
    if lines == 0:
        return f"({ref!r} is empty)"
    if start.line > lines:
        raise ValueError(f"start_line={start.line} is past the end of {ref!r} ({lines} lines)")
    at = outputs.line_start(ref, start.line)
    at = _skip_chars(outputs, ref, at, start)
    want = max_bytes + 8
    window = outputs.read_range(ref, at, want)
    at_eof = len(window) < want or not outputs.read_range(ref, at + want, 1)
    rest = codecs.getincrementaldecoder("utf-8")("replace").decode(window, final=at_eof)
    output = excerpt_with_notice(
        rest, max_bytes=max_bytes, file_path=ref, start=start, source_lines=lines
    )
    return output


def _skip_chars(outputs: RangedSource, ref: str, at: int, start: Position) -> int:
    """Byte offset `start.offset` characters after `at` (the start of `start.line`).

    Raises:
        ValueError: the line ends first.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    done, read_at, step = 0, at, 1 << 20
    while done < start.offset:
        data = outputs.read_range(ref, read_at, step)
        read_at += len(data)
        text = decoder.decode(data, final=not data)
        need = start.offset - done
        newline = text.find("\n", 0, need)
        if newline >= 0 or (not data and len(text) < need):
            length = done + (newline if newline >= 0 else len(text))
            raise ValueError(
                f"line_offset={start.offset} is past the end of line {start.line} "
                f"({length} characters)"
            )
        if len(text) >= need:
            return at + utf8_len(text[:need])
        done += len(text)
        at += utf8_len(text)
    return at
