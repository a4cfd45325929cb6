"""`StateMirror`: a 2.x agent's `AgentState` seen as the core's `ContextMemory`, and back.

The 2.x agent keeps its conversation in `state.context` (2.x messages) and `state.summary`;
the core's stages work on a `ContextMemory` of entries (see `_entries`). Before each run of
the pipeline, `pull` brings the memory in step with the state, and after it `push` writes
what the core changed back. Both move only what changed, so a step costs what the step
added, not what the history holds:

- `pull`: when the state is the one last seen with messages appended (each known message
  the same object with as many blocks; a cheap check of identities and lengths, no
  conversion) and the memory is as the mirror left it (same `revision`, same last entry),
  only the new messages, the grown live reply (from its last entry on, `_conversions`) and
  messages replaced by other objects are converted; the new entries are appended. Anything
  else (a state loaded, cleared or edited; the memory changed behind the mirror) takes the
  whole path: every message looked at, the memory adopted anew when it is not an append.
- `push`: the memory notes the messages whose content the pipeline replaced
  (`ContextMemory.edited`); only their 2.x messages are rebuilt and put at their places
  (each block keeps its id, so the agent's bookkeeping of its tool calls holds). After a
  compaction (messages removed: a new `revision`) the context is rebuilt from the memory.
  Then `state.summary` becomes the summary the model is shown (with the dialog guide and
  the MEMORY.md note, as on 1.x).

The state holds every message whole; what the model is shown instead of an output that could
not be saved (a view), and the messages compacted but not yet saved (hidden), are applied to
the messages of each model call (`shown`), exactly as the 1.x memory shows them.

What the core keeps between replies and the state must carry across processes is this
package's slot in `state.middle_context` (`_slot`).
"""

from __future__ import annotations

import copy
import itertools
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentscope.message import HintBlock, Msg

from ..core.context._memory import ContextMemory
from ..core.context._turns import HINT_MARK
from ._conversions import Conversions, Pairs
from ._entries import Entry, Origin
from ._slot import STATE_KEY, read_slot, show_summary, write_slot

if TYPE_CHECKING:
    from agentscope.state import AgentState

__all__ = ["STATE_KEY", "StateMirror"]

_CONTENT = operator.attrgetter("content")


class StateMirror:
    """Keeps one `ContextMemory` in step with one agent's `AgentState`."""

    def __init__(self, memory: ContextMemory) -> None:
        self.memory = memory
        memory.edited = set()
        self.table = Conversions()
        self._synced: dict[str, object] = {}
        """By entry id: the content object last reconciled with the memory."""
        self._loaded = False
        self.offload_note = ""
        """Appended to the summary the model is shown: where the agent's offloader keeps the
        compacted context (AgentScope's reminder; see `_workspace`)."""
        self._order: list[Msg] = []
        """The state's messages as the memory mirrors them (the objects), and their sizes."""
        self._sizes: list[int] = []
        self._places: dict[str, int] = {}
        """By 2.x message id: its index in `_order`."""
        self._stored: dict[str, Entry] = {}
        """By entry id: the memory's own entry (its copy: the pipeline edits that one)."""
        self._revision: int | None = None
        """`memory.revision` when the fields above were true (`None`: not known to be)."""
        self._tail: Entry | None = None

    # -- state → memory ----------------------------------------------------------------

    async def pull(self, state: AgentState) -> None:
        """Bring the memory in step with `state` (see the module docstring)."""
        if not self._loaded:
            self._load(state)
        context = state.context
        changed = self._changed(context)
        if changed is None or not await self._pull_tail(context, changed):
            await self._pull_all(context)

    def _in_step(self) -> bool:
        """Whether the memory is as the mirror left it (no message added or removed since)."""
        content = self.memory.content
        return (
            self._revision == self.memory.revision
            and len(content) == len(self._stored)
            and (content[-1][0] if content else None) is self._tail
        )

    def _changed(self, context: Sequence[Msg]) -> list[int] | None:
        """The indices of the known messages of `context` that are other objects or have
        another size, or `None` when `context` is not the known one with messages appended
        (or the memory is not as the mirror left it). Runs in C over the messages."""
        order = self._order
        k = len(order)
        if len(context) < k or not self._in_step():
            return None
        moved = set(itertools.compress(range(k), map(operator.is_not, context, order)))
        sizes = map(len, map(_CONTENT, context))
        moved.update(itertools.compress(range(k), map(operator.ne, sizes, self._sizes)))
        return sorted(moved)

    async def _pull_tail(self, context: Sequence[Msg], changed: list[int]) -> bool:
        """The cheap path of `pull`: convert the changed and the new messages only; `False`
        (nothing done to the memory) when a change is more than that path handles."""
        k = len(self._order)
        new: Pairs = []
        seen: Pairs = []  # the changed messages' entries the memory has (by id)
        edits: list[tuple[str, Any]] = []
        for i in changed:
            msg = context[i]
            if msg.id != self._order[i].id:
                return False
            pairs, first, replaced = self.table.convert(msg)
            fresh = pairs[first:]
            if [e.id for e, _ in fresh[: len(replaced)]] != [e.id for e, _ in replaced]:
                return False  # its entries are other ones: the whole path
            if len(fresh) > len(replaced) and i != k - 1:
                return False  # entries added inside the context, not at its end
            for entry, _ in fresh[: len(replaced)]:
                stored = self._stored.get(entry.id)
                if stored is None:
                    return False
                if stored.content != entry.content:
                    edits.append((entry.id, entry.content))
            seen.extend(fresh[: len(replaced)])
            new.extend(fresh[len(replaced) :])
        for msg in context[k:]:
            new.extend(self.table.convert(msg)[0])
        memory = self.memory
        edited = memory.edited or set()
        for entry_id, content in edits:
            memory.replace_content(entry_id, content)
            edited.discard(entry_id)  # (the pipeline's edits are what `push` writes back)
        if edits:
            memory.revision += 1  # counted again
        for entry, _ in seen:  # (only now: the whole path compares what was not synced)
            self._synced[entry.id] = entry.content
        await self._append(new)
        for i in changed:
            self._order[i] = context[i]
            self._sizes[i] = len(context[i].content)
        for msg in context[k:]:
            self._places[msg.id] = len(self._order)
            self._order.append(msg)
            self._sizes.append(len(msg.content))
        return True

    async def _append(self, new: Pairs) -> bool:
        """Add the entries `new` to the memory (hints marked as such) and note its copies;
        `False` when the memory gave one of them another id (the next pull then takes the
        whole path)."""
        memory = self.memory
        start = len(memory.content)
        for marks, run in itertools.groupby(new, key=lambda pair: _marks(pair[1])):
            await memory.add([entry for entry, _ in run], marks=marks)
        for entry, _ in new:
            self._synced[entry.id] = entry.content
        added = [msg for msg, _ in memory.content[start:]]
        self._stored.update((msg.id, msg) for msg in added)
        self._tail = memory.content[-1][0] if memory.content else None
        same = [m.id for m in added] == [e.id for e, _ in new]
        self._revision = memory.revision if same else None
        return same

    async def _pull_all(self, context: Sequence[Msg]) -> None:
        """The whole path of `pull`: every message looked at; the memory adopts the state's
        entries anew when they are not the memory's with entries appended."""
        memory = self.memory
        pairs = [pair for msg in context for pair in self.table.convert(msg)[0]]
        self.table.keep_only(context)
        live = memory.messages()
        ids = [entry.id for entry, _ in pairs]
        edited = memory.edited if memory.edited is not None else set()
        appended = True
        if [msg.id for msg in live] != ids[: len(live)]:
            # Not an append: the state was edited or replaced (loaded, cleared): start over.
            # (copies: the memory rebinds the content of its entries, ours stay as converted)
            memory.adopt(
                [(copy.copy(entry), _marks(origin)) for entry, origin in pairs],
                memory.compact_summary,
            )
            self._synced = {entry.id: entry.content for entry, _ in pairs}
            edited.clear()
        else:
            changed = False
            for (entry, _), msg in zip(pairs, live, strict=False):
                if self._synced.get(entry.id) is entry.content:
                    continue
                self._synced[entry.id] = entry.content
                if msg.content != entry.content:
                    memory.replace_content(entry.id, entry.content)
                    edited.discard(entry.id)  # (the state's, not the pipeline's)
                    changed = True
            if changed:
                memory.revision += 1
            appended = await self._append(pairs[len(live) :])
        self._mark(context)
        if not appended:
            self._revision = None

    def _mark(self, context: Sequence[Msg]) -> None:
        """Note `context` and the memory as in step (after the whole path of either way)."""
        memory = self.memory
        self._order = list(context)
        self._sizes = [len(msg.content) for msg in context]
        self._places = {msg.id: i for i, msg in enumerate(context)}
        self._stored = {msg.id: msg for msg, _ in memory.content}
        self._tail = memory.content[-1][0] if memory.content else None
        self._revision = memory.revision

    def _load(self, state: AgentState) -> None:
        """First pull: the summary, calibration and note this package left in the state."""
        self.offload_note = read_slot(state, self.memory)
        self._loaded = True

    def reconvert(self, msg_id: str) -> None:
        """Convert message `msg_id` afresh at the next pull (its metadata changed: a pin)."""
        self.table.forget(msg_id)
        self._revision = None

    # -- memory → state ----------------------------------------------------------------

    def push(self, state: AgentState) -> None:
        """Write the memory back to `state`: the messages whose entries the pipeline changed,
        rebuilt (all of the context after a compaction), the summary the model is shown, and
        this package's slot in `middle_context`."""
        memory = self.memory
        context = state.context
        origin = self.table.origin
        edited = memory.edited or set()
        if (
            self._in_step()
            and len(context) == len(self._order)
            and all(map(operator.is_, context, self._order))
            and all(entry_id in origin for entry_id in edited)
        ):
            for msg_id in {origin[entry_id][0] for entry_id in edited}:
                self._rewrite(context, msg_id)
        else:
            self._push_context(state)
        if memory.edited is not None:
            memory.edited.clear()
        show_summary(state, memory, self.offload_note)
        self.save_slot(state)

    def save_slot(self, state: AgentState) -> None:
        """Write this package's slot of `state.middle_context` (`_slot.write_slot`). Also at
        the end of every reply: the usage of the reply's last model call comes after the
        last `push`."""
        if self._loaded:  # (never pulled: the slot the state has is the one to keep)
            write_slot(state, self.memory, self.offload_note)

    def _rewrite(self, context: list[Msg], msg_id: str) -> None:
        """Put the 2.x message `msg_id` rebuilt from the memory's entries at its place."""
        i = self._places[msg_id]
        entries = [self._stored[entry.id] for entry, _ in self.table.by_msg[msg_id][2]]
        msg, fresh = self.table.message(msg_id, entries)
        if fresh is None:
            return
        for entry, _ in fresh:
            self._synced[entry.id] = entry.content
        if [e.id for e, _ in fresh] != [e.id for e in entries]:
            self._revision = None  # (its entries are other ones now: the whole path next)
        context[i] = self._order[i] = msg
        self._sizes[i] = len(msg.content)

    def _push_context(self, state: AgentState) -> None:
        """The context rebuilt from the memory (after a compaction, or an edit of the state
        between pull and push)."""
        context: list[Msg] = []
        table = self.table
        for msg_id, entries in table.groups(self.memory.messages()):
            msg, fresh = table.message(msg_id, entries)
            for entry, _ in fresh or ():
                self._synced[entry.id] = entry.content
            context.append(msg)
        reply_id = state.reply_context.reply_id
        if reply_id in table.by_msg and all(msg.id != reply_id for msg in context):
            # The live reply keeps its message (and usage) even when all of it left, as
            # AgentScope's own compression does: the agent looks its calls up there.
            empty = table.by_msg[reply_id][0].model_copy(update={"content": []})
            table.by_msg[reply_id] = (empty, 0, [])
            context.append(empty)
        if [id(m) for m in context] != [id(m) for m in state.context]:
            state.context = context
        self._mark(state.context)

    # -- what the model is shown -------------------------------------------------------

    def shown(self, messages: list[Msg]) -> list[Msg]:
        """`messages` (a model call's) with views applied and hidden entries left out."""
        return self.table.shown(self.memory, messages)


def _marks(origin: Origin) -> list[str]:
    """A hint entry is marked as one (as 1.x marks its hints): it is not a user turn."""
    return [HINT_MARK] if any(isinstance(b, HintBlock) for b in origin[1]) else []
