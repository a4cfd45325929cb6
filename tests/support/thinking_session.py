"""A long extended-thinking session through AgentScope's real `AnthropicChatModel` (either
line) against the offline Anthropic simulator (`tests.support.anthropic_sim`), with the
context manager attached: each user turn is a tool loop of `steps` calls of a `read_log` tool
(outputs of `lines` lines), the model thinking once at the loop's start (signed), then calling
the next part, then answering. A small budget makes the ladder mask and compact inside the
loops (issue 45). `run_session` returns the simulator (its requests and calls) and what the
responder saw of each request."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx._line import IS_1X
from tests.support.anthropic_sim import AnthropicSim, Turn, serve

MODEL = "claude-sonnet-4-5"
TASK = "Task {turn}: read log parts {first} to {last} and report the failures."
MASKING = {"mask_after": 10}
"""The sessions mask (below 8,000 tokens the default is not to, `ToolResultConfig.mask_after`)."""


def log_part(part: int, lines: int) -> str:
    """The text of one log part: `lines` lines, distinct per part."""
    return "".join(
        f"2026-12-06 10:{part % 60:02d}:{i % 60:02d} worker-{part} step {i}: "
        f"{'ERROR timeout in queue ' + str(part) if i % 17 == 3 else 'ok processed batch'} "
        f"{i * part}\n"
        for i in range(lines)
    )


@dataclass
class Seen:
    """What the responder saw of each request."""

    loop_steps: list[int] = field(default_factory=list)
    """Tool results after the request's last user task (0: the loop's first call)."""
    firsts: list[str] = field(default_factory=list)
    """The first user message's text (the summary, once there is one)."""


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def responder(steps: int, seen: Seen) -> Any:
    """The model: per turn (the newest "Task N" user text), `steps` calls, then the answer;
    it counts the calls it made itself (compaction takes the older ones out of the prompt)."""
    issued: dict[int, int] = {}

    def answer(body: dict[str, Any]) -> Turn:
        messages = body["messages"]
        seen.firsts.append(_text(messages[0]))
        at = max(i for i, m in enumerate(messages) if _text(m).startswith("Task "))
        turn = int(_text(messages[at]).split("Task ", 1)[1].split(":", 1)[0])
        done = issued.get(turn, 0)
        seen.loop_steps.append(done)
        if done >= steps:
            return Turn(text=f"Task {turn}: the failures are timeouts in the queue.")
        issued[turn] = done + 1
        call = [("read_log", {"part": turn * 100 + done})]
        if done == 0:
            return Turn(
                thinking=f"Task {turn} needs {steps} parts; I start at the first.",
                tool_calls=call,
            )
        return Turn(tool_calls=call)

    return answer


def anthropic_model(url: str, stream: bool, name: str = MODEL) -> Any:
    """AgentScope's real `AnthropicChatModel` of the installed line on the simulator at
    `url`, extended thinking on (a 1,024-token budget), no retries."""
    if IS_1X:
        from agentscope.model import AnthropicChatModel

        return AnthropicChatModel(
            name,
            api_key="sk-test",
            max_tokens=4096,
            stream=stream,
            thinking={"type": "enabled", "budget_tokens": 1024},
            client_kwargs={"base_url": url, "max_retries": 0},
        )
    from agentscope.credential import AnthropicCredential
    from agentscope.model import AnthropicChatModel

    return AnthropicChatModel(
        credential=AnthropicCredential(api_key="sk-test", base_url=url),
        model=name,
        parameters=AnthropicChatModel.Parameters(
            max_tokens=4096, thinking_enable=True, thinking_budget=1024
        ),
        stream=stream,
        max_retries=0,
        client_kwargs={"max_retries": 0},
    )


async def run_session(
    work: Path,
    *,
    turns: int = 3,
    steps: int = 10,
    lines: int = 120,
    budget: int = 6_000,
    stream: bool = True,
    window: int | None = None,
    after: Callable[[ContextManager, Any], Awaitable[None]] | None = None,
    **config: Any,
) -> tuple[AnthropicSim, Seen]:
    """The session (see the module docstring); `config`: more `ContextConfig` fields;
    `after`: given the manager and the agent at the end, before the manager closes."""
    seen = Seen()
    sim = AnthropicSim(responder(steps, seen), model_window=window or budget * 2)
    config.setdefault("tool_result", MASKING)
    cfg = ContextConfig(
        working_dir=work, max_input_tokens=budget, token_counter="cl100k_base", **config
    )
    manager = ContextManager(cfg)  # model=None: extractive summaries, no helper calls
    with serve(sim) as url:
        model = anthropic_model(url, stream)
        try:
            if IS_1X:
                agent = await run_1x(manager, model, turns, steps, lines)
            else:
                agent = await run_2x(manager, model, turns, steps, lines)
            if after is not None:
                await after(manager, agent)
        finally:
            await manager.close()
    return sim, seen


async def run_2x(manager: Any, model: Any, turns: int, steps: int, lines: int) -> Any:
    """`turns` log-reading tasks through a 2.x `Agent` on `model` with `manager`'s middleware
    (outputs of `lines` lines); the agent."""
    from agentscope.agent import Agent
    from agentscope.message import UserMsg
    from agentscope.tool import FunctionTool, Toolkit

    from tests.support.fakes import ALLOW

    def read_log(part: int) -> str:
        """Read one part of the log.

        Args:
            part (int): the part.
        """
        return log_part(part, lines)

    agent = Agent(
        name="analyst",
        system_prompt="You read logs and report failures. " * 8,
        model=model,
        toolkit=Toolkit(tools=[FunctionTool(read_log, permission=ALLOW, is_read_only=True)]),
        middlewares=[manager.middleware()],
    )
    for turn in range(1, turns + 1):
        task = TASK.format(turn=turn, first=turn * 100, last=turn * 100 + steps - 1)
        await agent.reply(UserMsg(name="user", content=task))
    return agent


async def run_1x(
    manager: Any, model: Any, turns: int, steps: int, lines: int, formatter: Any = None
) -> Any:
    """`run_2x` through a 1.x `ReActAgent` (`formatter`: Anthropic's by default); the agent."""
    from agentscope.agent import ReActAgent
    from agentscope.formatter import AnthropicChatFormatter
    from agentscope.message import Msg, TextBlock
    from agentscope.tool import Toolkit, ToolResponse

    def read_log(part: int) -> ToolResponse:
        """Read one part of the log.

        Args:
            part (int): the part.
        """
        return ToolResponse(content=[TextBlock(type="text", text=log_part(part, lines))])

    toolkit = Toolkit()
    toolkit.register_tool_function(read_log)
    agent = ReActAgent(
        name="analyst",
        sys_prompt="You read logs and report failures. " * 8,
        model=model,
        formatter=formatter or AnthropicChatFormatter(),
        toolkit=toolkit,
        max_iters=steps + 2,
    )
    agent.set_console_output_enabled(False)
    manager.attach(agent)
    for turn in range(1, turns + 1):
        task = TASK.format(turn=turn, first=turn * 100, last=turn * 100 + steps - 1)
        await agent(Msg("user", task, "user"))
    return agent


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
