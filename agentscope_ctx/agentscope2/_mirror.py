"""`StateMirror`: a 2.x agent's `AgentState` seen as the core's `ContextMemory`, and back.

The 2.x agent keeps its conversation in `state.context` (2.x messages) and `state.summary`;
the core's stages work on a `ContextMemory` of entries (see `_entries`). Before each run of
the pipeline, `pull` brings the memory in step with the state (new entries appended, changed
ones replaced; only messages that changed since the last pull are converted), and after it
`push` writes what the core changed back: the messages whose entries were cut, removed or
masked are rebuilt (each block keeps its id, so the agent's bookkeeping of its tool calls
holds), the others stay the same objects, and `state.summary` becomes the summary the model
is shown (with the dialog guide and the MEMORY.md note, as on 1.x).

The state holds every message whole; what the model is shown instead of an output that could
not be saved (a view), and the messages compacted but not yet saved (hidden), are applied to
the messages of each model call (`shown`), exactly as the 1.x memory shows them.

What the core keeps between replies and the state must carry across processes lives in
`state.middle_context["agentscope_ctx"]`: the summary itself (without the guide), what it
carries by code as data (`core.summary._kept`: never read back out of the summary's text) and the
calibration. A state whose summary was written by someone else (AgentScope's own
compression, or before agentscope_ctx was added) keeps it: it becomes the summary.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from agentscope.message import HintBlock, Msg, TextBlock

from ..core.context._memory import ContextMemory
from ..core.context._turns import HINT_MARK
from ..core.summary._kept import KEPT_KEY, Kept
from ..core.tokens._calibration_state import checked_calibration
from ._entries import Entry, Origin, to_blocks, to_entries

if TYPE_CHECKING:
    from agentscope.state import AgentState

__all__ = ["STATE_KEY", "StateMirror"]

STATE_KEY = "agentscope_ctx"
"""This package's slot in `AgentState.middle_context`."""


class StateMirror:
    """Keeps one `ContextMemory` in step with one agent's `AgentState`."""

    def __init__(self, memory: ContextMemory) -> None:
        self.memory = memory
        self._converted: dict[str, tuple[Msg, int, list[tuple[Entry, Origin]]]] = {}
        """By 2.x message id: the message object, its block count, and its entries."""
        self._origin: dict[str, Origin] = {}
        self._synced: dict[str, object] = {}
        """By entry id: the content object last reconciled with the memory."""
        self._loaded = False
        self.offload_note = ""
        """Appended to the summary the model is shown: where the agent's offloader keeps the
        compacted context (AgentScope's reminder; see `_workspace`)."""

    # -- state → memory ----------------------------------------------------------------

    async def pull(self, state: AgentState) -> None:
        """Bring the memory in step with `state` (cheap when little changed)."""
        memory = self.memory
        if not self._loaded:
            self._load(state)
        pairs = list(self._entries(state.context))
        live = memory.messages()
        ids = [entry.id for entry, _ in pairs]
        if [msg.id for msg in live] != ids[: len(live)]:
            # Not an append: the state was edited or replaced (loaded, cleared): start over.
            # (copies: the memory rebinds the content of its entries, ours stay as converted)
            memory.adopt(
                [(copy.copy(entry), _marks(origin)) for entry, origin in pairs],
                memory.compact_summary,
            )
            self._synced = {entry.id: entry.content for entry, _ in pairs}
            return
        changed = False
        for (entry, _), msg in zip(pairs, live, strict=False):
            if self._synced.get(entry.id) is entry.content:
                continue
            self._synced[entry.id] = entry.content
            if msg.content != entry.content:
                memory.replace_content(entry.id, entry.content)
                changed = True
        if changed:
            memory.revision += 1
        new = pairs[len(live) :]
        for marks, run in itertools.groupby(new, key=lambda pair: _marks(pair[1])):
            await memory.add([entry for entry, _ in run], marks=marks)
        for entry, _ in new:
            self._synced[entry.id] = entry.content

    def _load(self, state: AgentState) -> None:
        """First pull: the summary and calibration this package left in the state."""
        data = state.middle_context.get(STATE_KEY)
        data = data if isinstance(data, dict) else {}
        summary = data.get("summary")
        if not isinstance(summary, str):
            summary = _text(state.summary)  # someone else's summary: it stays the summary
        self.memory.adopt([], summary)
        self.memory.kept = Kept.from_data(data.get(KEPT_KEY))  # none in an older state
        note = data.get("offload_note")
        self.offload_note = note if isinstance(note, str) else ""
        if "calibration" in data:
            self.memory.calibration = checked_calibration(
                data["calibration"], owner="an agent's state"
            )
        self._loaded = True

    def _entries(self, context: Sequence[Msg]) -> Iterator[tuple[Entry, Origin]]:
        converted = {}
        for msg in context:
            known = self._converted.get(msg.id)
            if known is not None and known[0] is msg and known[1] == len(msg.content):
                pairs = known[2]
            elif known is not None and known[0] is msg and 0 < known[1] < len(msg.content):
                # grown by appended blocks (the live reply): convert from its last entry on
                kept = known[2][:-1] if msg.role == "assistant" else []
                start = sum(len(origin[1]) for _, origin in kept)
                fresh = to_entries(msg, start) if msg.role == "assistant" else to_entries(msg)
                for entry, origin in fresh:
                    self._origin[entry.id] = origin
                pairs = kept + fresh
            else:
                pairs = to_entries(msg)
                for entry, origin in pairs:
                    self._origin[entry.id] = origin
            converted[msg.id] = (msg, len(msg.content), pairs)
            yield from pairs
        self._converted = converted

    def reconvert(self, msg_id: str) -> None:
        """Convert message `msg_id` afresh at the next pull (its metadata changed: a pin)."""
        self._converted.pop(msg_id, None)

    # -- memory → state ----------------------------------------------------------------

    def push(self, state: AgentState, *, changed: bool = True) -> None:
        """Write the memory back to `state`: rebuilt messages where entries changed, the
        summary the model is shown, and this package's slot in `middle_context`. With
        `changed=False` (the pipeline changed no message) only the last two."""
        memory = self.memory
        if changed:
            self._push_context(state)
        summary = memory.summary_message()
        text = "" if summary is None else str(summary.content)
        if text and self.offload_note:
            text = f"{text}\n{self.offload_note}"
        if _text(state.summary) != text:
            state.summary = text
        self.save_slot(state)

    def save_slot(self, state: AgentState) -> None:
        """Write this package's slot of `state.middle_context`: what the next process that
        loads the state needs and the state does not hold otherwise (the summary without its
        guide, the calibration, the offloader's note). Also at the end of every reply: the
        usage of the reply's last model call comes after the last `push`."""
        if not self._loaded:
            return  # never pulled: the slot the state has is the one to keep
        memory = self.memory
        state.middle_context[STATE_KEY] = {
            "summary": memory.compact_summary,
            "calibration": dict(memory.calibration),
            **({"offload_note": self.offload_note} if self.offload_note else {}),
            **({KEPT_KEY: memory.kept.to_data()} if memory.kept is not None else {}),
        }

    def _push_context(self, state: AgentState) -> None:
        context: list[Msg] = []
        memory = self.memory
        for msg_id, entries in self._groups(memory.messages()):
            context.append(self._message(msg_id, entries))
        reply_id = state.reply_context.reply_id
        if reply_id in self._converted and all(msg.id != reply_id for msg in context):
            # The live reply keeps its message (and usage) even when all of it left, as
            # AgentScope's own compression does: the agent looks its calls up there.
            empty = self._converted[reply_id][0].model_copy(update={"content": []})
            self._converted[reply_id] = (empty, 0, [])
            context.append(empty)
        if [id(m) for m in context] != [id(m) for m in state.context]:
            state.context = context

    def _message(self, msg_id: str, entries: list[Entry]) -> Msg:
        """The 2.x message for `entries` (all from message `msg_id`): the known object
        when none of them changed, else a copy with blocks rebuilt."""
        msg, _, pairs = self._converted[msg_id]
        if [e.id for e in entries] == [e.id for e, _ in pairs] and all(
            e.content == p.content for e, (p, _) in zip(entries, pairs, strict=True)
        ):
            return msg
        blocks: list[Any] = []
        for entry in entries:
            blocks.extend(to_blocks(entry.content, self._origin[entry.id][1]))
        rebuilt = msg.model_copy(update={"content": blocks})
        fresh = to_entries(rebuilt)
        for entry, origin in fresh:
            self._origin[entry.id] = origin
            self._synced[entry.id] = entry.content
        self._converted[msg_id] = (rebuilt, len(blocks), fresh)
        return rebuilt

    def _groups(self, entries: Sequence[Entry]) -> Iterator[tuple[str, list[Entry]]]:
        for msg_id, group in itertools.groupby(entries, key=lambda e: self._origin[e.id][0]):
            yield msg_id, list(group)

    # -- what the model is shown -------------------------------------------------------

    def shown(self, messages: list[Msg]) -> list[Msg]:
        """`messages` (a model call's) with views applied and hidden entries left out."""
        memory = self.memory
        if not memory.views and not memory.hidden:
            return messages
        by_msg = {msg_id: group for msg_id, group in self._groups(memory.messages())}
        out = []
        for msg in messages:
            group = by_msg.get(msg.id)
            if group is None or not any(
                e.id in memory.views or e.id in memory.hidden for e in group
            ):
                out.append(msg)
                continue
            blocks: list[Any] = []
            for entry in group:
                if entry.id not in memory.hidden:
                    view = memory.shown(entry)
                    blocks.extend(to_blocks(view.content, self._origin[entry.id][1]))
            if blocks:
                out.append(msg.model_copy(update={"content": blocks}))
        return out


def _marks(origin: Origin) -> list[str]:
    """A hint entry is marked as one (as 1.x marks its hints): it is not a user turn."""
    return [HINT_MARK] if any(isinstance(b, HintBlock) for b in origin[1]) else []


def _text(summary: str | Sequence[Any]) -> str:
    if isinstance(summary, str):
        return summary
    return "\n".join(b.text for b in summary if isinstance(b, TextBlock))
