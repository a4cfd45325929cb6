"""What a `forget` acts on and what it reports (`_forget`, docs/data.md): `ForgetTarget`, the
tenant by its parts as `core._tenant` names them, and `ForgetReport`, records and bytes by
kind.

- ``agent`` (with ``user`` when the end user is known): the agent key `agent_key(agent,
  user)`, exactly;
- ``user`` alone: every agent key of that user (``user/...``);
- ``session``: only that session (``""``: the records of no session, with an agent or a
  user); alone, that session of every agent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core._errors import ContextUsageError
from ..core._tenant import agent_key, agent_name

__all__ = ["KINDS", "ForgetReport", "ForgetTarget", "Step"]

KINDS = (
    "dialog",
    "dialog_days",
    "outputs",
    "index",
    "memory",
    "media",
    "steps",
    "usage",
    "tombstones",
    "pages",
)
"""What a forget reports, in this order: dialog records, the day files (local) or per-owner
days (``dialog_days``) left empty, saved outputs, search index entries, long-term memory
documents, media files, steps records, usage records, and the tombstones retention left of
the tenant's deleted records (`_tombstones`: they name their owners), and the viewer's
pages of its sessions in the working dir (``agentscope-ctx view`` writes ``view.html`` there)."""

Step = Callable[[str], None]
"""Called with the name of each kind once it is deleted (tests stop a worker there)."""


@dataclass(frozen=True)
class ForgetTarget:
    """Which tenant to forget (see the module docstring)."""

    user: str | None = None
    """The end user (`RecallConfig.user`); alone: every agent of that user."""
    agent: str | None = None
    """The agent's name (with `user`: that user's agent)."""
    session: str | None = None
    """The session id (``""``: no session; only with `agent` or `user`)."""

    def __post_init__(self) -> None:
        for name in ("user", "agent", "session"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ContextUsageError(f"forget: {name} must be a string, got {value!r}")
            if value is not None and ("\x00" in value or (value == "" and name != "session")):
                raise ContextUsageError(f"forget: {name} must be a non-empty name, got {value!r}")
        if self.user is None and self.agent is None and self.session is None:
            raise ContextUsageError(
                "forget: give at least one of user, agent, session (got none): forgetting "
                "every tenant is not a forget"
            )
        if self.session == "" and self.user is None and self.agent is None:
            raise ContextUsageError(
                "forget: session='' (no session) needs an agent or a user beside it"
            )

    @property
    def key(self) -> str | None:
        """The exact agent key, when `agent` is given."""
        return None if self.agent is None else agent_key(self.agent, self.user)

    @property
    def prefix(self) -> str | None:
        """The prefix of every agent key of `user`, when `user` is given without `agent`."""
        if self.user is None or self.agent is not None:
            return None
        return agent_key("", self.user)

    def owns_key(self, key: object) -> bool:
        """Whether an agent key is one of the target's."""
        if not isinstance(key, str):
            return False
        if self.key is not None:
            return key == self.key
        if self.prefix is not None:
            return key.startswith(self.prefix)
        return True

    def owns(self, key: object, session: object) -> bool:
        """Whether a record owned by (`key`, `session`) is the target's (a record of no
        session has ``""``)."""
        if not self.owns_key(key):
            return False
        return self.session is None or (session if isinstance(session, str) else "") == (
            self.session
        )

    def name_of(self, key: str) -> str:
        """The agent's name in `key` (what the steps and usage records name)."""
        if self.agent is not None:
            return self.agent
        if self.prefix is not None and key.startswith(self.prefix):
            return key[len(self.prefix) :]
        return agent_name(key)

    @property
    def fields(self) -> dict[str, str | None]:
        """As an audit line names it."""
        return {"user": self.user, "agent": self.agent, "session": self.session}


@dataclass
class ForgetReport:
    """What a forget deleted (or, with `dry_run`, would delete): records and bytes by kind."""

    target: ForgetTarget
    store: str
    dry_run: bool = False
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    """Records of each kind (`KINDS`)."""
    bytes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    """Bytes of data of each kind."""
    notes: list[str] = field(default_factory=list)
    """What the forget did not delete, and why (shared memory, ...)."""

    def add(self, kind: str, count: int, size: int = 0) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + count
        self.bytes[kind] = self.bytes.get(kind, 0) + size

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())

    def as_dict(self) -> dict[str, Any]:
        """The report as the CLI's ``--json`` shows it."""
        return {
            "tenant": self.target.fields,
            "store": self.store,
            "dry_run": self.dry_run,
            "counts": dict(self.counts),
            "bytes": dict(self.bytes),
            "total_bytes": self.total_bytes,
            "notes": list(self.notes),
        }
