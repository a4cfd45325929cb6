"""The fleet session's parts both AgentScope lines share: what a worker is given (`Spec`, JSON
on its command line), the worker's `ContextConfig`, a turn's scripted answers, the prompt log,
and the result of a `CHECK`. How a turn loads, replies and saves is the line's own
(`session1`: a 1.x `ReActAgent` over a shared AgentScope memory; `session2`: a 2.x `Agent`
whose state the app storage keeps); `line_session` picks the installed line's.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentscope_ctx import ContextConfig
from agentscope_ctx._line import IS_1X
from tests.fleet.script import DONE_TEXT, call_id, file_name, worker_fields

USER = "fleet-user"
PROMPT_LOG: Path | None = None
"""Where a worker appends the size of every prompt its model is sent (tokens, one a line)."""


@dataclass
class StateSpec:
    """Where the session's state is shared: `kind` "redis" (host, port, db) or "sql" (a
    SQLAlchemy async URL). 2.x: the app storage (`open`); 1.x: the agent's memory, and beside
    a SQL memory the session state goes to `session_dir`."""

    kind: str
    host: str = "127.0.0.1"
    port: int = 6379
    db: int = 0
    url: str = ""
    session_dir: str = ""
    """(1.x only: where the session state goes beside a SQL memory.)"""

    def open(self) -> Any:
        """The 2.x app storage this names."""
        if self.kind == "redis":
            from agentscope.app.storage import RedisStorage

            return RedisStorage(host=self.host, port=self.port, db=self.db)
        if self.kind == "sql":
            from agentscope.app.storage import AsyncSQLAlchemyStorage

            return AsyncSQLAlchemyStorage(self.url)
        raise ValueError(f"unknown state storage kind {self.kind!r}")


def state_at(kind: str, folder: Path, redis: Any = None) -> StateSpec:
    """A fresh shared state of `kind`: "redis" (a fresh database of the `redis` server) or
    "sql" (SQLite in `folder`; on 1.x the session state beside it)."""
    if kind == "redis":
        return StateSpec("redis", host=redis.host, port=redis.port, db=redis.fresh_db())
    return StateSpec(
        "sql", url=f"sqlite+aiosqlite:///{folder / 'app.db'}", session_dir=str(folder / "sessions")
    )


@dataclass
class Spec:
    """Everything a worker needs (JSON on its command line)."""

    store: dict[str, Any]
    """`ContextConfig` fields that choose the store (local: `working_dir`)."""
    files: str
    state: StateSpec
    session_id: str = ""
    turns: int = 6
    steps: int = 6
    budget: int = 6_000
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(self.__dict__ | {"state": self.state.__dict__})

    @classmethod
    def from_json(cls, raw: str) -> Spec:
        data = json.loads(raw)
        return cls(**{**data, "state": StateSpec(**data["state"])})


def cat_tool(files: Path, folder: str = "data") -> Callable[[str], str]:
    """The `cat` tool of a session's agent: a file of `files` (the `folder`, as its argument's
    description names it) as text."""

    def cat(path: str) -> str:
        return (files / path).read_text(encoding="utf-8")

    cat.__doc__ = f"""Print a file.

        Args:
            path (str): the file, relative to the {folder} folder.
        """
    return cat


def make_config(spec: Spec) -> ContextConfig:
    """A worker's config: its store, a small budget, big outputs cut, frequent compaction."""
    store = worker_fields(spec.store)
    return ContextConfig.model_validate(
        {
            **store,
            "max_input_tokens": spec.budget,
            "compact_trigger_ratio": 0.7,
            "keep_recent_ratio": 0.3,
            "compact_headroom": 0,  # (the kept 0.3 holds cut outputs: notices to follow)
            "read_roots": [store.get("working_dir", "."), spec.files],
            "token_counter": "cl100k_base",
            "tool_result": {
                "recent_n": 2,
                "recent_max_bytes": 3_000,
                "old_max_bytes": 1_100,
                "mask_after": None,
            },
            "summarizer": {"enabled": False},
            "consolidation": {"enabled": False},
            **spec.extra,
        }
    )


def answers(turn: int, steps: int, attempt: str, tool_call: Any, text: Any) -> list[Any]:
    """The model's answers in turn `turn` (the line's fake `tool_call` and `text`): `steps`
    calls of `cat` with ids of this `attempt`, then the turn's answer."""
    calls = [
        tool_call("cat", call_id(turn, k, attempt), path=file_name(turn, k)) for k in range(steps)
    ]
    return [*calls, text(DONE_TEXT.format(turn=turn))]


def assert_done(reply: str, turn: int) -> None:
    """The reply of turn `turn` is its scripted answer."""
    if reply != DONE_TEXT.format(turn=turn):
        raise AssertionError(f"unexpected reply: {reply!r}")


def log_prompt(tokens: int) -> None:
    """Append one prompt's size to `PROMPT_LOG` (if set)."""
    if PROMPT_LOG is not None:
        with PROMPT_LOG.open("a", encoding="utf-8") as log:
            log.write(f"{tokens}\n")


async def check(
    manager: Any,
    memory: Any,
    spec: Spec,
    turns_done: int,
    search: Callable[[str], Awaitable[str]],
    *,
    summary: str,
    state_summary: str,
) -> dict[str, Any]:
    """A worker's `CHECK` of the session (tests/fleet/checks.py) from its `memory` (the live
    messages it loaded) and its manager's dialog store; `summary` is the summary kept,
    `state_summary` the one the state shows."""
    from tests.fleet.checks import check_here

    stored, _ = manager.dialog.read()
    result = await check_here(
        manager, memory.messages(), stored, Path(spec.files), turns_done, spec.steps, search
    )
    result["turns_done"] = turns_done
    result["summary"] = summary
    result["summary_shown"] = memory.shown_summary()  # cut on a small budget, from the state
    result["state_summary"] = state_summary
    return result


def line_session() -> Any:
    """The installed line's session module (`session1` on 1.x, `session2` on 2.x)."""
    if IS_1X:
        from tests.fleet import session1

        return session1
    from tests.fleet import session2

    return session2
