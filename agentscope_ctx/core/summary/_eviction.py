"""The eviction index: a short, bounded list of what compaction moved out of the context.

It goes with the summary so that the agent knows what exists to `search_history` for: one
line per compaction with its time range, message count, the first words of the user's turns
and the tools called with their key arguments. When the list outgrows its cap, the oldest
lines fold into one ``earlier`` line (time range and count only). Its entries are kept as
data from one compaction to the next (`IndexEntry`, saved by `_kept`), never parsed back out
of the summary's text, which a model wrote a part of (DESIGN.md §15). It is a pure function of
the compacted messages and the previous entries, so it changes only at compaction and the
prompt prefix stays byte-identical in between (DESIGN.md §8)::

    Compacted away (find details with search_history):
    - earlier: 2026-12-01 09:00 → 2026-12-02 09:41 · 212 messages
    - 2026-12-02 10:00 → 10:42 · 38 messages · user: "fix the failing test in…"; "now add…"
      · tools: run_shell(command="pytest -x") ×3, read_file(file_path="src/app.py")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._entry import Msg
from .._stamps import local_stamp
from ..search._search_text import SEARCH_TOOL, key_args
from ._extractive import msg_text

__all__ = ["EVICTION_HEADER", "IndexEntry", "eviction_index", "with_index"]

EVICTION_HEADER = "Compacted away (find details with search_history):"
_WORDS = 8
_QUOTE_CHARS = 60


@dataclass(frozen=True)
class IndexEntry:
    """One line of the index: a compaction's time range, message count, and what was said
    and called (`rest`, rendered text of ours); or an ``earlier`` fold of older ones."""

    start: str
    end: str
    """Full ``YYYY-MM-DD HH:MM``."""
    n: int
    rest: str
    earlier: bool = False

    def render(self) -> str:
        end = self.end[11:] if self.end[:10] == self.start[:10] else self.end
        head = "- earlier: " if self.earlier else "- "
        return f"{head}{self.start} → {end} · {self.n} messages{'' if self.earlier else self.rest}"

    def to_data(self) -> list[Any]:
        """The entry as JSON-able data (`from_data` reads it back)."""
        return [self.start, self.end, self.n, self.rest, self.earlier]

    @classmethod
    def from_data(cls, data: object) -> IndexEntry:
        """The entry `to_data` wrote; ValueError on anything else."""
        if not (isinstance(data, (list, tuple)) and len(data) == 5):
            raise ValueError(f"eviction index entry: expected 5 items, got {data!r:.80}")
        start, end, n, rest, earlier = data
        if not (all(isinstance(v, str) for v in (start, end, rest)) and isinstance(earlier, bool)
                and isinstance(n, int) and not isinstance(n, bool) and n >= 0):  # fmt: skip
            raise ValueError(f"eviction index entry: invalid {data!r:.80}")
        return cls(start, end, n, rest, earlier)


def _minute(msg: Msg) -> str | None:
    """``YYYY-MM-DD HH:MM`` of the message's stamp, of either line (2.x writes ISO)."""
    stamp = local_stamp(msg.timestamp)
    return stamp[:16] if stamp is not None and len(stamp) >= 16 else None


def _blocks(msg: Msg, kind: str) -> list[dict[str, object]]:
    """The blocks of `kind`, whatever the content holds (odd messages never stop a
    compaction: `None` content has no blocks)."""
    content = msg.content
    items = content if isinstance(content, (list, tuple)) else []
    return [b for b in items if isinstance(b, dict) and b.get("type") == kind]


def _first_words(msg: Msg) -> str | None:
    """The quoted first words of a user's turn; `None` for anything else, such as a tool
    result or a 2.x runtime hint (``<system-reminder>...``: the framework's, not the user's
    words; the extractive summary skips them the same way)."""
    if msg.role != "user" or _blocks(msg, "tool_result"):
        return None
    said = msg_text(msg)
    if said.lstrip().startswith("<system-"):
        return None
    words = " ".join(said.split()).split(" ")
    text = " ".join(words[:_WORDS])
    if not text:
        return None
    if len(words) > _WORDS or len(text) > _QUOTE_CHARS:
        text = text[: _QUOTE_CHARS - 1] + "…"
    return '"' + text.replace('"', "'") + '"'


def _tools(msgs: Sequence[Msg]) -> list[str]:
    counts: dict[str, int] = {}
    for msg in msgs:
        for block in _blocks(msg, "tool_use"):
            name = str(block.get("name") or "")
            if not name or name == SEARCH_TOOL:
                continue
            tool_input = block.get("input")
            call = f"{name}({key_args(tool_input if isinstance(tool_input, dict) else {})})"
            counts[call] = counts.get(call, 0) + 1
    return [call + (f" ×{n}" if n > 1 else "") for call, n in counts.items()]


def _items(label: str, items: list[str], sep: str, budget: int) -> str:
    """`` · label: a, b +N more`` within `budget` characters ("" when nothing fits)."""
    text = ""
    for i, item in enumerate(items):
        more = f" +{len(items) - i - 1} more" if i + 1 < len(items) else ""
        candidate = (text + sep if text else f" · {label}: ") + item
        if len(candidate + more) > budget:
            return text + (f" +{len(items) - i} more" if text else "")
        text = candidate
    return text


def _new_entry(msgs: Sequence[Msg], budget: int) -> IndexEntry | None:
    minutes = sorted(m for m in map(_minute, msgs) if m is not None)
    if not msgs or not minutes:
        return None
    quotes = [q for q in map(_first_words, msgs) if q is not None]
    users = _items("user", quotes, "; ", budget // 2)
    tools = _items("tools", _tools(msgs), ", ", budget - len(users))
    return IndexEntry(minutes[0], minutes[-1], len(msgs), users + tools)


def eviction_index(
    msgs: Sequence[Msg], previous: Sequence[IndexEntry], max_chars: int
) -> tuple[str, list[IndexEntry]]:
    """The eviction index after compacting `msgs` away, given the `previous` entries (none at
    the first compaction): its text, at most `max_chars` characters, and its entries (the
    next compaction's `previous`). The same inputs give the same text.

    Messages without a timestamp count in no time range; when none of `msgs` has one, the
    previous index is returned as it was (re-rendered).
    """
    entries = list(previous)
    entry_budget = max(max_chars // 3, 120)
    new = _new_entry(msgs, entry_budget)
    if new is not None:
        entries.append(new)
    if not entries:
        return "", []
    while _length(entries) > max_chars:
        if len(entries) >= 3:  # fold the two oldest; the newest stays whole
            entries = [_fold(entries[0], entries[1]), *entries[2:]]
        elif len(entries) == 2 and not entries[0].earlier:
            entries = [_fold(entries[0]), entries[1]]
        else:
            break
    text = "\n".join([EVICTION_HEADER, *(entry.render() for entry in entries)])
    return (text if len(text) <= max_chars else text[: max_chars - 1] + "…"), entries


def with_index(summary: str, index: str) -> str:
    """The summary as stored and shown: the compactor's text, then the eviction index."""
    return f"{summary}\n\n{index}" if index else summary


def _fold(first: IndexEntry, second: IndexEntry | None = None) -> IndexEntry:
    """One ``earlier`` entry covering `first` (and `second`)."""
    both = [first] if second is None else [first, second]
    return IndexEntry(
        min(e.start for e in both), max(e.end for e in both), sum(e.n for e in both), "", True
    )


def _length(entries: list[IndexEntry]) -> int:
    return len(EVICTION_HEADER) + sum(1 + len(entry.render()) for entry in entries)
