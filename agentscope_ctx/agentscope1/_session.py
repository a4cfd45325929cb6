"""`AtomicJSONSession`: AgentScope's `JSONSession`, saved crash-safely."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agentscope.module import StateModule
from agentscope.session import JSONSession

from ..core._private import private_dir, write_atomic

__all__ = ["AtomicJSONSession"]


class AtomicJSONSession(JSONSession):
    """A `JSONSession` whose save is atomic: temporary file, fsync, rename.

    The session file holds the agent's messages, so it is private to its owner (``0600``; a
    missing `save_dir` is made ``0700``, an existing one is left as it is), and each save
    writes a temporary file of its own (two processes saving at once do not collide).

    AgentScope 1.0.21's `JSONSession.save_session_state` truncates the session file and then
    writes it: a crash in between leaves a file that does not load, and the previous state is
    gone with it. With this class a crash leaves the previous state or the new one. Loading
    is AgentScope's own.
    """

    async def save_session_state(
        self, session_id: str, user_id: str = "", **state_modules_mapping: StateModule
    ) -> None:
        states = {name: module.state_dict() for name, module in state_modules_mapping.items()}
        await asyncio.to_thread(private_dir, Path(self.save_dir), tighten=False)
        path = self._get_save_path(session_id, user_id=user_id)
        await asyncio.to_thread(_write_atomically, path, json.dumps(states, ensure_ascii=False))


def _write_atomically(path: str, text: str) -> None:
    write_atomic(Path(path), text.encode("utf-8", errors="surrogatepass"))
