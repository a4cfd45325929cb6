"""The tenant boundary (DESIGN.md §15): who owns a record, and what a caller may see.

Every record a store keeps (a dialog row, a saved output, a search chunk, a 2.x media file)
names its **owner**: an *agent key* and a *session*.

- The agent key is `agent_key(agent, user)`: the agent's name, or ``user/agent`` when the
  end user is known (AgentScope 2.x's app server gives its middleware factory the
  ``user_id``; `RecallConfig.user`). ``%`` and ``/`` are percent-encoded (``%25``, ``%2F``)
  in the user part and in the name of an agent without a user, so the key of a user's agent
  holds a ``/`` and the key of an agent without one never does: distinct (user, agent) pairs
  have distinct keys (a user's agent's name, after the first ``/``, is kept as it is).
  Long-term memory is keyed by the agent key alone (one memory per user's agent).
- Keys of version 1 (`KEY_VERSION`) left the name of an agent without a user as it was, so
  such an agent named ``alice/assistant`` had user alice's ``assistant``'s key. A store of
  that version is migrated once (`upgraded_key`: a key of version 1 that reads as
  ``user/agent`` stays the user's; every other is escaped): the local store by
  `stores._keys_local`, PostgreSQL by its schema version 8.
- The session is the session id (`RecallConfig.session`), ``""`` when none is known.

A caller is a `Tenant`: its own owner and a *scope* (`RecallConfig.scope`):

- ``session`` (the default): its own agent key in its own session;
- ``agent``: every session of its own agent key (and the long-term memory files);
- ``shared``: every record of the store (one user's app on its own store).

A record outside the scope does not exist for the caller: a ref to it reads as a ref to
nothing ("a ref is a name, never a key"). `None` in place of a tenant (the operator's CLI
without ``--agent``/``--session``, the index's own catch-up, retention) sees everything.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "KEY_VERSION",
    "SCOPES",
    "Scope",
    "Tenant",
    "agent_key",
    "agent_name",
    "owner_tag",
    "upgraded_key",
]

Scope = Literal["session", "agent", "shared"]
SCOPES: tuple[Scope, ...] = ("session", "agent", "shared")
"""The values of `RecallConfig.scope`, narrowest first."""
KEY_VERSION = 2
"""The version of `agent_key`'s keys (1: an agent without a user keyed by its name as is)."""
_TAG_HEX = 16
_ESCAPED = re.compile(r"(?:[^%/]|%25|%2F)*")
"""A part `_escape` wrote."""


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F")


def agent_key(agent: str, user: str | None = None) -> str:
    """The owner key of `agent` (of `user`, when known): ``agent`` or ``user/agent``, ``%`` and
    ``/`` percent-encoded in `user`, and in `agent` when there is no user."""
    if user is None:
        return _escape(agent)
    return f"{_escape(user)}/{agent}"


def agent_name(key: str) -> str:
    """The agent's name in the agent key `key` (`agent_key`)."""
    if "/" in key:
        return key.split("/", 1)[1]
    return key.replace("%2F", "/").replace("%25", "%")


def upgraded_key(key: str) -> str:
    """The key of version 2 (`KEY_VERSION`) of the owner of `key`, a key of version 1.

    A key of version 1 that reads as ``user/agent`` (a ``/``, and before the first one a user
    part as `agent_key` escaped it) is kept: it was a user's agent's, or, which version 1
    could not tell apart, an agent's without a user whose name read so; that owner now is the
    user's agent. Every other key was the name of an agent without a user: it is escaped.
    """
    user, slash, _ = key.partition("/")
    if slash and _ESCAPED.fullmatch(user):
        return key
    return _escape(key)


def owner_tag(part: str) -> str:
    """A fixed-length name part standing for `part` (an agent key or a session) in file names
    (64 bits of its SHA-256, hex)."""
    digest = hashlib.sha256(part.encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:_TAG_HEX]


@dataclass(frozen=True)
class Tenant:
    """A caller of the stores: its own owner (`agent` key, `session`) and its `scope`."""

    agent: str
    """The agent key (`agent_key`)."""
    session: str = ""
    """The session id (``""``: none)."""
    scope: Scope = "session"
    """What it sees: its session, every session of its agent, or everything."""

    @classmethod
    def of(
        cls,
        agent: str,
        session: str | None = None,
        *,
        user: str | None = None,
        scope: Scope = "session",
    ) -> Tenant:
        """The tenant of `agent` (of `user`) in `session` (`None`: none)."""
        return cls(agent_key(agent, user), session or "", scope)

    @property
    def fields(self) -> dict[str, str]:
        """What a record it writes carries: ``agent`` and ``session``."""
        return {"agent": self.agent, "session": self.session}

    def sees(self, agent: object, session: object) -> bool:
        """Whether a record owned by (`agent`, `session`) is in the scope (an owner that is
        not a string, or no owner at all, is nobody's: only ``shared`` sees it)."""
        if self.scope == "shared":
            return True
        if not isinstance(agent, str) or agent != self.agent:
            return False
        if self.scope == "agent":
            return True
        return (session if isinstance(session, str) else "") == self.session

    @property
    def tags(self) -> tuple[str, str]:
        """The file-name tags of its agent key and of its session (`owner_tag`)."""
        return owner_tag(self.agent), owner_tag(self.session)

    def sees_tags(self, agent_tag: str, session_tag: str) -> bool:
        """`sees`, for a file named by the tags of its owner."""
        if self.scope == "shared":
            return True
        own_agent, own_session = self.tags
        return agent_tag == own_agent and (self.scope == "agent" or session_tag == own_session)
