"""This package's slot in a 2.x `AgentState`, and the summary the state shows.

What the core keeps between replies and the state must carry across processes lives in
`state.middle_context["agentscope_ctx"]`: the summary itself (without the guide), what it
carries by code as data (`core.summary._kept`: never read back out of the summary's text), the
calibration (checked on load: a corrupted slot cannot set a wild scale) and the offloader's
note. A state whose summary was written by someone else (AgentScope's own compression, or
before agentscope_ctx was added) keeps it: it becomes the summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentscope.message import TextBlock

from ..core.context._memory import ContextMemory
from ..core.summary._kept import KEPT_KEY, Kept
from ..core.tokens._calibration_state import checked_calibration

if TYPE_CHECKING:
    from agentscope.state import AgentState

__all__ = ["STATE_KEY", "read_slot", "show_summary", "write_slot"]

STATE_KEY = "agentscope_ctx"
"""This package's slot in `AgentState.middle_context`."""


def read_slot(state: AgentState, memory: ContextMemory) -> str:
    """Give `memory` the summary, what it carries and the calibration `state` holds; the
    offloader's note it holds ("" if none)."""
    data = state.middle_context.get(STATE_KEY)
    data = data if isinstance(data, dict) else {}
    summary = data.get("summary")
    if not isinstance(summary, str):
        summary = _text(state.summary)  # someone else's summary: it stays the summary
    memory.adopt([], summary)
    memory.kept = Kept.from_data(data.get(KEPT_KEY))  # none in an older state
    if "calibration" in data:
        memory.calibration = checked_calibration(data["calibration"], owner="an agent's state")
    note = data.get("offload_note")
    return note if isinstance(note, str) else ""


def write_slot(state: AgentState, memory: ContextMemory, offload_note: str) -> None:
    """Write the slot: what the next process that loads `state` needs and the state does not
    hold otherwise (the summary without its guide, the calibration, the offloader's note)."""
    state.middle_context[STATE_KEY] = {
        "summary": memory.compact_summary,
        "calibration": dict(memory.calibration),
        **({"offload_note": offload_note} if offload_note else {}),
        **({KEPT_KEY: memory.kept.to_data()} if memory.kept is not None else {}),
    }


def show_summary(state: AgentState, memory: ContextMemory, offload_note: str) -> None:
    """Set `state.summary` to the summary the model is shown (with the dialog guide and the
    MEMORY.md note, as on 1.x, and the offloader's note)."""
    summary = memory.summary_message()
    text = "" if summary is None else str(summary.content)
    if text and offload_note:
        text = f"{text}\n{offload_note}"
    if _text(state.summary) != text:
        state.summary = text


def _text(summary: str | Sequence[Any]) -> str:
    if isinstance(summary, str):
        return summary
    return "\n".join(b.text for b in summary if isinstance(b, TextBlock))
