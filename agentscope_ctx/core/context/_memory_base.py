"""The base class of `ContextMemory`: on 1.x AgentScope's `MemoryBase` (so that a 1.x
`ReActAgent` takes it as its memory), lent by the 1.x adapter (`_host`: the core imports no
AgentScope); on 2.x the stand-in below."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._host import host

__all__ = ["MemoryBase", "PlainMemoryBase"]


class PlainMemoryBase:
    """On AgentScope 2.x (no `MemoryBase`, no `StateModule`): the part of 1.x's base that
    `ContextMemory` uses. There the 2.x adapter keeps the memory in step with the agent's
    `AgentState`, which is what 2.x persists; `state_dict` is for tests and tools."""

    def __init__(self) -> None:
        self._compressed_summary = ""
        self._state_names: list[str] = []

    def register_state(self, name: str) -> None:
        self._state_names.append(name)

    def state_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._state_names}

    # What `ContextMemory` calls on a backend: on 2.x there are no AgentScope memories,
    # so a `backend` (1.x only) never exists there.
    async def add(self, memories: Any, marks: Any = None, **kwargs: Any) -> None:
        raise NotImplementedError

    async def delete(self, msg_ids: list[str], **kwargs: Any) -> int:
        raise NotImplementedError

    async def clear(self) -> None:
        raise NotImplementedError

    async def update_messages_mark(
        self, new_mark: str | None, old_mark: str | None = None, msg_ids: Any = None
    ) -> int:
        raise NotImplementedError


if TYPE_CHECKING:  # each line's type check sees its own (mypy --always-true/false IS_1X)
    from ..._line import IS_1X

    if IS_1X:
        from agentscope.memory import MemoryBase
    else:
        MemoryBase = PlainMemoryBase
else:
    MemoryBase = host().memory_base or PlainMemoryBase
