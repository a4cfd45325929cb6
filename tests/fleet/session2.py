"""One scripted AgentScope 2.x session served by workers that share nothing but the stores.

A turn is what the AgentScope app does for each chat run (`app/_service/_chat.py`): load the
session's `AgentState` from the app storage (`RedisStorage` or `AsyncSQLAlchemyStorage`),
build a fresh `Agent(..., state=state, middlewares=[...])`, reply, and persist the state
(`update_session_state`). The agentscope_ctx store (dialog, tool outputs, search index) is
named by `store` (config fields: today the local `working_dir` the workers share; the
PostgreSQL store plugs in the same way). The model is scripted; the tools are real and read
real files: every `cat` output is large enough to be cut, and the session compacts often.

The harness keeps its own progress in the state (`middle_context["fleet_harness"]`), saved
with it in one write: the next turn to run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentscope.agent import Agent
from agentscope.message import UserMsg
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import FunctionTool, Toolkit

from agentscope_ctx import ContextConfig, TokenCounter
from agentscope_ctx.agentscope2 import ContextManager
from tests.fleet.script import (
    DONE_TEXT,
    SYSTEM_PROMPT,
    USER_TEXT,
    call_id,
    file_name,
    new_attempt,
    user_id,
    worker_fields,
    write_files,
)
from tests.support.fakes import ALLOW, FakeChatModel, text, tool_call

USER = "fleet-user"
AGENT = "fleet-agent"
PROGRESS = "fleet_harness"


@dataclass
class StateSpec:
    """Where the app keeps the session's state: `kind` "redis" (host, port, db) or "sql"
    (a SQLAlchemy async URL)."""

    kind: str
    host: str = "127.0.0.1"
    port: int = 6379
    db: int = 0
    url: str = ""
    session_dir: str = ""
    """(Used on 1.x only: where the session state goes beside a SQL memory.)"""

    def open(self) -> Any:
        if self.kind == "redis":
            from agentscope.app.storage import RedisStorage

            return RedisStorage(host=self.host, port=self.port, db=self.db)
        if self.kind == "sql":
            from agentscope.app.storage import AsyncSQLAlchemyStorage

            return AsyncSQLAlchemyStorage(self.url)
        raise ValueError(f"unknown state storage kind {self.kind!r}")


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
        data = self.__dict__ | {"state": self.state.__dict__}
        return json.dumps(data)

    @classmethod
    def from_json(cls, raw: str) -> Spec:
        data = json.loads(raw)
        return cls(**{**data, "state": StateSpec(**data["state"])})


def make_config(spec: Spec) -> ContextConfig:
    store = worker_fields(spec.store)
    return ContextConfig.model_validate(
        {
            **store,
            "max_input_tokens": spec.budget,
            "compact_trigger_ratio": 0.7,
            "keep_recent_ratio": 0.3,
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


def make_toolkit(files: Path) -> Toolkit:
    def cat(path: str) -> str:
        """Print a file.

        Args:
            path (str): the file, relative to the data folder.
        """
        return (files / path).read_text(encoding="utf-8")

    return Toolkit(tools=[FunctionTool(cat, permission=ALLOW, is_read_only=True)])


PROMPT_LOG: Path | None = None
"""Where a worker appends the size of every prompt its model is sent (tokens, one a line)."""

PROVIDER_RATIO = 1.15
"""The scripted provider counts this many tokens per token of our estimate (its usage
reaches the calibration, which must travel with the state)."""


def script(turn: int, steps: int, attempt: str = "") -> FakeChatModel:
    """The model of one turn: `steps` calls of `cat` (ids of this `attempt`; default a new
    one), then the turn's answer; each response reports the prompt's usage as a provider
    would."""
    attempt = attempt or new_attempt()
    answers = [
        tool_call("cat", call_id(turn, k, attempt), path=file_name(turn, k)) for k in range(steps)
    ]
    answers.append(text(DONE_TEXT.format(turn=turn)))
    counter = TokenCounter("cl100k_base")

    async def answer(messages: list[Any]) -> ChatResponse:
        call = model.calls[-1]
        tokens = await counter.count(call["formatted"], call["tools"])
        if PROMPT_LOG is not None:
            with PROMPT_LOG.open("a", encoding="utf-8") as log:
                log.write(f"{tokens}\n")
        response = answers[len(model.calls) - 1]
        usage = ChatUsage(input_tokens=int(tokens * PROVIDER_RATIO), output_tokens=10, time=0.0)
        return ChatResponse(content=list(response.content), is_last=True, usage=usage)

    model = FakeChatModel([answer] * len(answers), default=None)
    return model


def make_agent(manager: ContextManager, state: Any, model: FakeChatModel, files: Path) -> Agent:
    return Agent(
        name="worker",
        system_prompt=SYSTEM_PROMPT,
        model=model,
        toolkit=make_toolkit(files),
        middlewares=[manager.middleware()],
        state=state,
    )


async def create_session(spec: Spec) -> str:
    """A new session in the app storage; returns its id. Writes the data files too."""
    from agentscope.app.storage import SessionConfig

    write_files(Path(spec.files), spec.turns, spec.steps)
    async with spec.state.open() as storage:
        record = await storage.upsert_session(USER, AGENT, SessionConfig(workspace_id="fleet"))
    return str(record.id)


async def next_turn(spec: Spec) -> int:
    async with spec.state.open() as storage:
        record = await storage.get_session(USER, AGENT, spec.session_id)
    return int(record.state.middle_context.get(PROGRESS, {}).get("turn", 0))


async def run_turn(
    spec: Spec, manager: ContextManager, on_start: Callable[[int, str], None] | None = None
) -> int | None:
    """Run the session's next turn as the app would; returns it (None: the session is over).
    `on_start(turn, attempt)` is called before the reply starts."""
    async with spec.state.open() as storage:
        record = await storage.get_session(USER, AGENT, spec.session_id)
        state = record.state
        turn = int(state.middle_context.get(PROGRESS, {}).get("turn", 0))
        if turn >= spec.turns:
            return None
        attempt = new_attempt()
        if on_start is not None:
            on_start(turn, attempt)
        model = script(turn, spec.steps, attempt)
        agent = make_agent(manager, state, model, Path(spec.files))
        reply = await agent.reply(
            UserMsg(name="user", content=USER_TEXT.format(turn=turn), id=user_id(turn))
        )
        if reply.get_text_content() != DONE_TEXT.format(turn=turn):
            raise AssertionError(f"unexpected reply: {reply.get_text_content()!r}")
        agent.state.middle_context[PROGRESS] = {"turn": turn + 1}
        await storage.update_session_state(USER, AGENT, spec.session_id, agent.state)
    manager.detach(agent)
    return turn


class Worker:
    """One worker process's part (tests/fleet/worker.py): a manager for its whole life."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.manager = ContextManager(make_config(spec))

    async def open(self) -> None:
        await self.manager.counter.count_text("warm up")

    async def turn(self, on_start: Callable[[int, str], None]) -> int | None:
        return await run_turn(self.spec, self.manager, on_start)

    async def check(self) -> dict[str, Any]:
        from agentscope.message import TextBlock

        from tests.fleet.checks import check_here

        spec = self.spec
        async with spec.state.open() as storage:
            state = (await storage.get_session(USER, AGENT, spec.session_id)).state
        turns_done = int(state.middle_context.get(PROGRESS, {}).get("turn", 0))
        agent = make_agent(self.manager, state, script(0, 0), Path(spec.files))
        binding = self.manager.bind(agent)
        await self.manager.context_usage(agent)  # pulls the state into the memory
        recall = binding.recall
        assert recall is not None

        async def search(query: str) -> str:
            response = await recall.search_history(query)
            return "".join(b.text for b in response.content if isinstance(b, TextBlock))

        stored, _ = self.manager.dialog.read()
        result = await check_here(
            self.manager,
            binding.memory.messages(),
            stored,
            Path(spec.files),
            turns_done,
            spec.steps,
            search,
        )
        slot = state.middle_context.get("agentscope_ctx", {})
        result["turns_done"] = turns_done
        result["summary"] = slot.get("summary", "")
        result["state_summary"] = str(state.summary)
        self.manager.detach(agent)
        return result

    async def close(self) -> None:
        await self.manager.close()
