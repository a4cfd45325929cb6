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

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentscope.agent import Agent
from agentscope.message import UserMsg
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import FunctionTool, Toolkit

from agentscope_ctx import TokenCounter
from agentscope_ctx.agentscope2 import ContextManager
from tests.fleet import session as shared
from tests.fleet.script import (
    SYSTEM_PROMPT,
    USER_TEXT,
    new_attempt,
    user_id,
    write_files,
)
from tests.fleet.session import USER, Spec, make_config
from tests.support.fakes import ALLOW, FakeChatModel, text, tool_call

AGENT = "fleet-agent"
PROGRESS = "fleet_harness"


def make_toolkit(files: Path, folder: str = "data") -> Toolkit:
    """A toolkit of the session's `cat` tool (`session.cat_tool`), read-only, never asking."""
    tool = FunctionTool(shared.cat_tool(files, folder), permission=ALLOW, is_read_only=True)
    return Toolkit(tools=[tool])


PROVIDER_RATIO = 1.15
"""The scripted provider counts this many tokens per token of our estimate (its usage
reaches the calibration, which must travel with the state)."""


def script(turn: int, steps: int, attempt: str = "") -> FakeChatModel:
    """The model of one turn: `steps` calls of `cat` (ids of this `attempt`; default a new
    one), then the turn's answer; each response reports the prompt's usage as a provider
    would."""
    attempt = attempt or new_attempt()
    answers = shared.answers(turn, steps, attempt, tool_call, text)
    counter = TokenCounter("cl100k_base")

    async def answer(messages: list[Any]) -> ChatResponse:
        call = model.calls[-1]
        tokens = await counter.count(call["formatted"], call["tools"])
        shared.log_prompt(tokens)
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
        shared.assert_done(str(reply.get_text_content()), turn)
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

        slot = state.middle_context.get("agentscope_ctx", {})
        result = await shared.check(
            self.manager,
            binding.memory,
            spec,
            turns_done,
            search,
            summary=slot.get("summary", ""),
            state_summary=str(state.summary),
        )
        self.manager.detach(agent)
        return result

    async def close(self) -> None:
        await self.manager.close()
