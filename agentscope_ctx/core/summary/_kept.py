"""`Kept`: what compaction carries by code from one summary to the next, kept as data.

The summary the model is shown is the writer's text (the compactor model's, or the extractive
fallback's), then the carried block (`_carry`: the user's words, the artifact trail) and the
eviction index (`_eviction`), both rendered by code. The next compaction needs the block and
the index again; it takes them from here, never from the summary's text: a model's summary
that ends in a block-shaped section (a web page the agent read can ask for one) would
otherwise be carried as the user's own words, and a forged index header would cut the real
block off (DESIGN.md §15, issue 29).

`Kept` travels with the summary wherever the summary goes: `ContextMemory.kept`, the 1.x
memory state (`state_dict()["carried"]`), the summary message in a 1.x memory backend (its
metadata), and the 2.x state's slot (`middle_context["agentscope_ctx"]["carried"]`). Its
`tail` is the exact text rendered after the writer's summary; it belongs to a summary only
when that summary ends with it, so a summary someone else wrote (AgentScope's own
compression, a call of `update_compressed_summary`) carries nothing of an older `Kept`.

**A state without it** (saved before this slot existed, or damaged) carries nothing by code:
its summary, carried block and index included, is taken whole as the writer's previous
summary, which the next writer summarises like the rest; no line of it is read back as the
user's words or as the index. The user's words it quoted are in the dialog store, where
`search_history` finds them; from that compaction on, the block is built afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._carry_text import CarryState, with_carry
from ._eviction import IndexEntry, with_index

__all__ = ["KEPT_KEY", "Kept", "compose"]

logger = logging.getLogger("agentscope_ctx")

KEPT_KEY = "carried"
"""The key of `Kept.to_data()` in a memory state, in the 2.x slot, and (prefixed with
``agentscope_ctx.``) in a backend summary message's metadata."""
_VERSION = 1


@dataclass(frozen=True)
class Kept:
    """The carried block's state and the eviction index's entries of one summary, and the
    text they were rendered into."""

    carry: CarryState
    index: tuple[IndexEntry, ...]
    tail: str
    """The text after the writer's summary: the summary is the writer's text and this."""
    shown: str | None = None
    """The writer's text as the model is shown it, when it was held to the summary's share
    of the budget (`ContextConfig.summary_max_share`): a head and a notice pointing at the
    whole, saved; `None`: shown whole. Saved with the rest, so a resumed session shows the
    same summary."""

    def shown_summary(self, summary: str) -> str:
        """`summary` as the model is shown it: the cut writer's text and `tail` where
        `summary` is the one this was rendered into, else `summary` itself."""
        if self.shown is None or self.writer(summary) is None:
            return summary
        return self.shown + self.tail

    def writer(self, summary: str) -> str | None:
        """The writer's part of `summary`, or `None` when `summary` is not the one this was
        rendered into (it does not end with `tail`)."""
        if not summary.endswith(self.tail):
            return None
        return summary[: len(summary) - len(self.tail)]

    def to_data(self) -> dict[str, Any]:
        """JSON-able data (`from_data` reads it back), with a format version."""
        return {
            "version": _VERSION,
            "carry": self.carry.to_data(),
            "index": [entry.to_data() for entry in self.index],
            "tail": self.tail,
            **({} if self.shown is None else {"shown": self.shown}),
        }

    @classmethod
    def from_data(cls, data: object) -> Kept | None:
        """What `to_data` wrote; `None` for `None` (a state without it) and, logged, for
        anything invalid (a damaged slot carries nothing: see the module)."""
        if data is None:
            return None
        try:
            if not isinstance(data, Mapping) or data.get("version") != _VERSION:
                raise ValueError(f"expected version {_VERSION}")
            tail, index, shown = data["tail"], data["index"], data.get("shown")
            if not isinstance(tail, str) or not isinstance(index, Sequence):
                raise ValueError("tail or index of the wrong type")
            if shown is not None and not isinstance(shown, str):
                raise ValueError("shown of the wrong type")
            return cls(
                CarryState.from_data(data["carry"]),
                tuple(IndexEntry.from_data(e) for e in index),
                tail,
                shown,
            )
        except (KeyError, TypeError, ValueError) as exc:
            logger.warning(
                "agentscope_ctx: the carried state saved with the summary is not valid (%s); "
                "nothing is carried by code from it, the summary stays as it is",
                exc,
            )
            return None


def compose(
    writer: str, block: str, carry: CarryState, index: str, entries: Sequence[IndexEntry]
) -> tuple[str, Kept]:
    """The summary (the writer's text, the carried `block`, the eviction `index`) and its
    `Kept` (the `carry` state and the index `entries` the two texts show)."""
    summary = with_index(with_carry(writer, block), index)
    body = writer.rstrip() if block else writer
    return summary, Kept(carry, tuple(entries), summary[len(body) :])
