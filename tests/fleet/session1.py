"""The fleet session on AgentScope 1.x: a `ReActAgent` whose `ContextMemory` sits over a
shared AgentScope memory, `RedisMemory` (a real Redis server) or `AsyncSQLAlchemyMemory`
(SQLite), the way a 1.x deployment shares a session. The messages and the summary live in
that backend (written through as they happen); the rest of the agent's state (the summary,
the calibration) and the harness's progress are saved after each reply with an AgentScope
session: `RedisSession` beside `RedisMemory`, else `AtomicJSONSession` in a directory the
workers share. The agentscope_ctx store is named by `store` (config fields), as on 2.x.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock
from agentscope.module import StateModule
from agentscope.tool import Toolkit, ToolResponse

from agentscope_ctx import AtomicJSONSession, ContextConfig, ContextManager
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
from tests.support.fakes import FakeChatModel, text, tool_call

USER = "fleet-user"
PROMPT_LOG: Path | None = None
"""Where a worker appends the size of every prompt its model is sent (tokens, one a line)."""


@dataclass
class StateSpec:
    """The shared backend: `kind` "redis" (host, port, db) or "sql" (a SQLAlchemy async URL;
    the session state then goes to `session_dir`)."""

    kind: str
    host: str = "127.0.0.1"
    port: int = 6379
    db: int = 0
    url: str = ""
    session_dir: str = ""


@dataclass
class Spec:
    store: dict[str, Any]
    files: str
    state: StateSpec
    session_id: str = "fleet"
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


class Progress(StateModule):
    def __init__(self) -> None:
        super().__init__()
        self.turn = 0
        self.register_state("turn")


def make_toolkit(files: Path) -> Toolkit:
    def cat(path: str) -> ToolResponse:
        """Print a file.

        Args:
            path (str): the file, relative to the data folder.
        """
        body = (files / path).read_text(encoding="utf-8")
        return ToolResponse(content=[TextBlock(type="text", text=body)])

    toolkit = Toolkit()
    toolkit.register_tool_function(cat)
    return toolkit


def script(model: FakeChatModel, turn: int, steps: int, counter: Any, attempt: str) -> None:
    """Queue turn `turn` on `model`: `steps` calls of `cat` (ids of this `attempt`), then
    the turn's answer; each prompt's size (messages and tool schemas) goes to `PROMPT_LOG`."""
    answers = [
        tool_call("cat", call_id(turn, k, attempt), path=file_name(turn, k)) for k in range(steps)
    ]
    answers.append(text(DONE_TEXT.format(turn=turn)))

    def answer_for(k: int) -> Any:
        async def answer(messages: list[dict[str, Any]]) -> Any:
            if PROMPT_LOG is not None:
                tools = model.calls[-1].get("tools") if model.calls else None
                tokens = await counter.count(messages, tools)
                with PROMPT_LOG.open("a", encoding="utf-8") as log:
                    log.write(f"{tokens}\n")
            return answers[k]

        return answer

    model.enqueue(*[answer_for(k) for k in range(len(answers))])


async def create_session(spec: Spec) -> str:
    write_files(Path(spec.files), spec.turns, spec.steps)
    if spec.state.kind == "sql":
        Path(spec.state.session_dir).mkdir(parents=True, exist_ok=True)
    return spec.session_id


class Worker:
    """One worker process's part: a manager and a backend connection for its whole life, a
    fresh agent for each turn."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.manager = ContextManager(make_config(spec))
        self.engine: Any = None
        self.session: Any = None

    async def open(self) -> None:
        await self.manager.counter.count_text("warm up")
        state = self.spec.state
        if state.kind == "redis":
            from agentscope.session import RedisSession

            self.session = RedisSession(host=state.host, port=state.port, db=state.db)
        else:
            from sqlalchemy.ext.asyncio import create_async_engine

            self.engine = create_async_engine(state.url)
            self.session = AtomicJSONSession(save_dir=state.session_dir)

    def backend(self) -> Any:
        state = self.spec.state
        if state.kind == "redis":
            from agentscope.memory import RedisMemory

            return RedisMemory(
                session_id=self.spec.session_id,
                user_id=USER,
                host=state.host,
                port=state.port,
                db=state.db,
            )
        from agentscope.memory import AsyncSQLAlchemyMemory

        return AsyncSQLAlchemyMemory(self.engine, session_id=self.spec.session_id, user_id=USER)

    async def _agent(self, model: FakeChatModel) -> tuple[ReActAgent, Progress, Any]:
        backend = self.backend()
        agent = ReActAgent(
            name="worker",
            sys_prompt=SYSTEM_PROMPT,
            model=model,
            formatter=OpenAIChatFormatter(),
            toolkit=make_toolkit(Path(self.spec.files)),
            memory=backend,
            max_iters=50,
        )
        agent.set_console_output_enabled(False)
        self.manager.attach(agent)
        progress = Progress()
        await self.session.load_session_state(
            self.spec.session_id, user_id=USER, agent=agent, progress=progress
        )
        return agent, progress, backend

    async def turn(self, on_start: Callable[[int, str], None]) -> int | None:
        model = FakeChatModel()
        agent, progress, backend = await self._agent(model)
        try:
            turn = progress.turn
            if turn >= self.spec.turns:
                return None
            attempt = new_attempt()
            script(model, turn, self.spec.steps, self.manager.counter, attempt)
            on_start(turn, attempt)
            msg = Msg("user", USER_TEXT.format(turn=turn), "user")
            msg.id = user_id(turn)
            reply = await agent(msg)
            if reply.get_text_content() != DONE_TEXT.format(turn=turn):
                raise AssertionError(f"unexpected reply: {reply.get_text_content()!r}")
            progress.turn = turn + 1
            await self.session.save_session_state(
                self.spec.session_id, user_id=USER, agent=agent, progress=progress
            )
            return turn
        finally:
            await _close(backend)

    async def check(self) -> dict[str, Any]:
        from tests.fleet.checks import check_here

        agent, progress, backend = await self._agent(FakeChatModel())
        try:
            await self.manager.context_usage(agent)  # refreshes from the backend
            memory = self.manager.memory_of(agent)

            recall = self.manager._recall_for(str(agent.name))[0]
            assert recall is not None

            async def search(query: str) -> str:
                response = await recall.search_history(query)
                return "".join(str(b.get("text", "")) for b in response.content)

            stored, _ = self.manager.dialog.read()
            result = await check_here(
                self.manager,
                memory.messages(),
                stored,
                Path(self.spec.files),
                progress.turn,
                self.spec.steps,
                search,
            )
            result["turns_done"] = progress.turn
            result["summary"] = memory.compact_summary
            shown = memory.summary_message()
            result["state_summary"] = "" if shown is None else str(shown.content)
            return result
        finally:
            await _close(backend)

    async def close(self) -> None:
        await self.manager.close()
        if self.engine is not None:
            await self.engine.dispose()


async def _close(backend: Any) -> None:
    close = getattr(backend, "close", None)
    if close is not None:
        await close()
