"""A long tool-using session in native mode (``compactor.mode: native``) through AgentScope's
real model classes against the offline simulators: `AnthropicChatModel` (either line,
extended thinking on, the model thinking at every step) on `tests.support.anthropic_sim`,
and `OpenAIResponseModel` (2.x) on `tests.support.responses_sim`. Each user turn is a tool
loop of `steps` calls of a `read_log` tool, then the answer. With `handoff`, every turn runs
on a fresh agent, manager and model client loaded from the state the previous turn left
(the fleet's "another worker"). `run_session` returns the simulator and the working dir."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx._line import IS_1X
from tests.support.anthropic_sim import AnthropicSim
from tests.support.anthropic_sim import Turn as AnthropicTurn
from tests.support.anthropic_sim import serve as serve_anthropic
from tests.support.chat_sim import OPENAI_URL, openai_routed
from tests.support.chat_sim import Turn as ChatTurn
from tests.support.responses_sim import ResponsesSim, serve
from tests.support.thinking_session import anthropic_model, log_part

Provider = Literal["anthropic", "responses"]
TASK = "Task {turn}: read log parts {first} to {last} and report the failures."
_TASK = re.compile(r"Task (\d+):")


@dataclass
class Session:
    """What a session left: the simulator, the working dir, the states handed over."""

    sim: Any
    work: Path
    handoffs: list[str] = field(default_factory=list)
    """The state each fresh agent was loaded from (JSON on 2.x, the memory's on 1.x)."""


def _texts(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(
        str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and "text" in b
    )


def responder(provider: Provider, steps: int) -> Any:
    """The model: per turn (the newest "Task N" the user sent), `steps` calls, then the
    answer. It counts the calls it made itself, and remembers the turn when a compaction
    took the task's text out of the prompt."""
    issued: dict[int, int] = {}
    current = [0]

    def answer(body: dict[str, Any]) -> Any:
        items = body["messages"] if provider == "anthropic" else body["input"]
        for item in reversed(items):
            if item.get("role") == "user":
                found = _TASK.match(_texts(item.get("content")))
                if found:
                    current[0] = int(found[1])
                    break
        turn = current[0]
        done = issued.get(turn, 0)
        issued[turn] = done + 1
        if done >= steps:
            text = f"Task {turn}: the failures are timeouts in the queue."
            if provider == "anthropic":
                return AnthropicTurn(text=text, thinking=f"Task {turn} is read.")
            return ChatTurn(text=text)
        call = [("read_log", {"part": turn * 100 + done})]
        if provider == "anthropic":
            return AnthropicTurn(thinking=f"Task {turn}: part {done} next.", tool_calls=call)
        return ChatTurn(tool_calls=call, reasoning=f"Task {turn}: part {done} next.")

    return answer


def _model(provider: Provider, url: str, name: str, stream: bool) -> Any:
    if provider == "responses":
        from agentscope.credential import OpenAICredential
        from agentscope.model import OpenAIResponseModel

        # on OpenAI's URL, as a user's model is (a prompt_cache_key goes with each call),
        # the requests routed to the simulator
        return OpenAIResponseModel(
            credential=OpenAICredential(api_key="sk-test", base_url=OPENAI_URL),
            model=name,
            stream=stream,
            max_retries=0,
            client_kwargs=openai_routed(url),
        )
    return anthropic_model(url, stream, name)


async def run_session(
    work: Path,
    provider: Provider = "anthropic",
    *,
    model: str = "claude-sonnet-4-6",
    turns: int = 2,
    steps: int = 10,
    lines: int = 300,
    budget: int = 80_000,
    stream: bool = True,
    handoff: bool = False,
    **config: Any,
) -> Session:
    """The session (see the module docstring); `config`: more `ContextConfig` fields."""
    answer = responder(provider, steps)
    sim: Any
    if provider == "anthropic":
        sim = AnthropicSim(answer, model_window=budget + budget // 4)
        serving = serve_anthropic(sim)
    else:
        sim = ResponsesSim(answer, model_window=budget + budget // 4)
        serving = serve(sim)
    compactor = {"mode": "native", **config.pop("compactor", {})}
    cfg = ContextConfig(
        working_dir=work,
        max_input_tokens=budget,
        token_counter="cl100k_base",
        compactor=compactor,
        **config,
    )
    session = Session(sim, work)
    with serving as url:
        state: Any = None
        for turn in range(1, turns + 1):
            if turn == 1 or handoff:
                manager = ContextManager(cfg)  # model=None: extractive local summaries
                agent = _agent(manager, _model(provider, url, model, stream), lines, steps, state)
            task = TASK.format(turn=turn, first=turn * 100, last=turn * 100 + steps - 1)
            try:
                state = await _reply(manager, agent, task)
            finally:
                if handoff or turn == turns:
                    await manager.close()
            if handoff:
                session.handoffs.append(state if isinstance(state, str) else repr(state))
    return session


def _agent(manager: Any, model: Any, lines: int, steps: int, state: Any) -> Any:
    if not IS_1X:
        from agentscope.agent import Agent
        from agentscope.state import AgentState
        from agentscope.tool import FunctionTool, Toolkit

        from tests.support.fakes import ALLOW

        def read_log(part: int) -> str:
            """Read one part of the log.

            Args:
                part (int): the part.
            """
            return log_part(part, lines)

        return Agent(
            name="analyst",
            system_prompt="You read logs and report failures. " * 8,
            model=model,
            toolkit=Toolkit(tools=[FunctionTool(read_log, permission=ALLOW, is_read_only=True)]),
            middlewares=[manager.middleware()],
            **({} if state is None else {"state": AgentState.model_validate_json(state)}),
        )
    from agentscope.agent import ReActAgent
    from agentscope.formatter import AnthropicChatFormatter
    from agentscope.message import TextBlock
    from agentscope.tool import Toolkit, ToolResponse

    def read_log_1x(part: int) -> ToolResponse:
        """Read one part of the log.

        Args:
            part (int): the part.
        """
        return ToolResponse(content=[TextBlock(type="text", text=log_part(part, lines))])

    toolkit = Toolkit()
    toolkit.register_tool_function(read_log_1x, func_name="read_log")
    agent = ReActAgent(
        name="analyst",
        sys_prompt="You read logs and report failures. " * 8,
        model=model,
        formatter=AnthropicChatFormatter(),
        toolkit=toolkit,
        max_iters=steps + 2,
    )
    agent.set_console_output_enabled(False)
    manager.attach(agent)
    if state is not None:
        manager.memory_of(agent).load_state_dict(state)
    return agent


async def _reply(manager: Any, agent: Any, task: str) -> Any:
    """One user turn; the state it leaves (2.x: the agent's as JSON; 1.x: its memory's)."""
    if IS_1X:
        from agentscope.message import Msg

        await agent(Msg("user", task, "user"))
        return manager.memory_of(agent).state_dict()
    from agentscope.message import UserMsg

    await agent.reply(UserMsg(name="user", content=task))
    return str(agent.state.model_dump_json())


def dialog_records(work: Path) -> list[dict[str, Any]]:
    """Every message of the local dialog store under `work`, in file order."""
    import json

    out = []
    for path in sorted((work / "dialog").rglob("*.jsonl")):
        for line in path.read_text("utf-8").splitlines():
            if line:
                record = json.loads(line)
                out.append(record.get("msg", record))
    return out
