"""The fleet session on AgentScope 1.x: a `ReActAgent` whose `ContextMemory` sits over a
shared AgentScope memory, `RedisMemory` (a real Redis server) or `AsyncSQLAlchemyMemory`
(SQLite), the way a 1.x deployment shares a session. The messages and the summary live in
that backend (written through as they happen); the rest of the agent's state (the summary,
the calibration) and the harness's progress are saved after each reply with an AgentScope
session: `RedisSession` beside `RedisMemory`, else `AtomicJSONSession` in a directory the
workers share. The agentscope_ctx store is named by `store` (config fields), as on 2.x; what
both lines share is in `tests/fleet/session.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg
from agentscope.module import StateModule
from agentscope.tool import Toolkit

from agentscope_ctx import AtomicJSONSession, ContextManager
from tests.fleet import session as shared
from tests.fleet.script import (
    SYSTEM_PROMPT,
    USER_TEXT,
    new_attempt,
    user_id,
    write_files,
)
from tests.fleet.session import USER, Spec, StateSpec
from tests.support.fakes import FakeChatModel, text, tool_call
from tests.support.react1 import text_tools

DEFAULT_SESSION = "fleet"
"""The session's id when the spec names none."""


def shared_memory(state: StateSpec, session_id: str, engine: Any = None) -> Any:
    """One worker's connection to the session's shared memory: `RedisMemory`, or (kind
    "sql") `AsyncSQLAlchemyMemory` on this worker's `engine`."""
    if state.kind == "redis":
        from agentscope.memory import RedisMemory

        return RedisMemory(
            session_id=session_id, user_id=USER, host=state.host, port=state.port, db=state.db
        )
    from agentscope.memory import AsyncSQLAlchemyMemory

    return AsyncSQLAlchemyMemory(engine, session_id=session_id, user_id=USER)


class Progress(StateModule):
    def __init__(self) -> None:
        super().__init__()
        self.turn = 0
        self.register_state("turn")


def make_toolkit(files: Path) -> Toolkit:
    return text_tools(shared.cat_tool(files))


def script(model: FakeChatModel, turn: int, steps: int, counter: Any, attempt: str) -> None:
    """Queue turn `turn` on `model` (`shared.answers`: the calls of this `attempt`, then the
    turn's answer); each prompt's size (messages and tool schemas) goes to the prompt log."""
    replies = shared.answers(turn, steps, attempt, tool_call, text)

    def answer_for(k: int) -> Any:
        async def answer(messages: list[dict[str, Any]]) -> Any:
            tools = model.calls[-1].get("tools") if model.calls else None
            shared.log_prompt(await counter.count(messages, tools))
            return replies[k]

        return answer

    model.enqueue(*[answer_for(k) for k in range(len(replies))])


async def create_session(spec: Spec) -> str:
    write_files(Path(spec.files), spec.turns, spec.steps)
    if spec.state.kind == "sql":
        Path(spec.state.session_dir).mkdir(parents=True, exist_ok=True)
    return spec.session_id or DEFAULT_SESSION


class Worker:
    """One worker process's part: a manager and a backend connection for its whole life, a
    fresh agent for each turn."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.manager = ContextManager(shared.make_config(spec))
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
        return shared_memory(self.spec.state, self.spec.session_id, self.engine)

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
            shared.assert_done(str(reply.get_text_content()), turn)
            progress.turn = turn + 1
            await self.session.save_session_state(
                self.spec.session_id, user_id=USER, agent=agent, progress=progress
            )
            return turn
        finally:
            await _close(backend)

    async def check(self) -> dict[str, Any]:
        agent, progress, backend = await self._agent(FakeChatModel())
        try:
            await self.manager.context_usage(agent)  # refreshes from the backend
            memory = self.manager.memory_of(agent)

            recall = self.manager._recall_for(str(agent.name))[0]
            assert recall is not None

            async def search(query: str) -> str:
                response = await recall.search_history(query)
                return "".join(str(b.get("text", "")) for b in response.content)

            shown = memory.summary_message()
            return await shared.check(
                self.manager,
                memory,
                self.spec,
                progress.turn,
                search,
                summary=memory.compact_summary,
                state_summary="" if shown is None else str(shown.content),
            )
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
