"""A long session of an OpenAI-compatible thinking model (``reasoning_content``, DeepSeek's
wire format) through AgentScope's real model classes against the offline Chat Completions
simulator (`tests.support.chat_sim`, profile ``deepseek``), with the context manager
attached: the twin of `thinking_session` (the same tool loops over `log_part`), the model
reasoning at every step of a loop. `run_session` returns the simulator.

- 2.x: `DeepSeekChatModel` with thinking on. AgentScope's DeepSeek formatter sends each
  assistant message's ``reasoning_content`` back, which DeepSeek's thinking mode requires in
  a tool loop (the simulator's ``reasoning_rule="tool_loop"``).
- 1.x (and 2.x with ``model="openai"``): `OpenAIChatModel`, whose formatter drops the reasoning,
  as DeepSeek-R1 requires (``reasoning_rule="reject"``: a request sending it back is refused).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx._line import IS_1X
from tests.support.chat_sim import ChatSim, ManualClock, Turn, serve
from tests.support.thinking_session import MASKING, run_1x, run_2x

_TASK = re.compile(r"Task (\d+): read log parts")


def responder(steps: int) -> Any:
    """Per user turn, `steps` calls of `read_log` (counted by the calls it made itself), each
    with its reasoning, then an answer."""
    issued: dict[int, int] = {}

    def answer(body: dict[str, Any]) -> Turn:
        texts = [m.get("content") for m in body["messages"] if m.get("role") == "user"]
        found = [int(n) for t in texts if isinstance(t, str) for n in _TASK.findall(t)]
        found += [
            int(n)
            for t in texts
            if isinstance(t, list)
            for part in t
            for n in _TASK.findall(str(part.get("text", "")))
        ]
        turn = found[-1] if found else 0
        done = issued.get(turn, 0)
        if done >= steps:
            return Turn(text=f"Task {turn}: timeouts in the queue.", reasoning="All read.")
        issued[turn] = done + 1
        call = [("read_log", {"part": turn * 100 + done})]
        return Turn(tool_calls=call, reasoning=f"Part {done} of task {turn} next.")

    return answer


async def run_session(
    work: Path,
    *,
    model: Literal["deepseek", "openai"] = "deepseek",
    turns: int = 3,
    steps: int = 10,
    lines: int = 120,
    budget: int = 6_000,
    stream: bool = True,
) -> ChatSim:
    """The session; ``deepseek`` (2.x only) or ``openai`` (see the module docstring)."""
    rule: Literal["reject", "tool_loop"] = "tool_loop" if model == "deepseek" else "reject"
    sim = ChatSim(
        responder(steps),
        profile="deepseek",
        model_window=budget * 2,
        clock=ManualClock(),
        reasoning_rule=rule,
    )
    cfg = ContextConfig(
        working_dir=work,
        max_input_tokens=budget,
        token_counter="cl100k_base",
        tool_result=MASKING,
    )
    manager = ContextManager(cfg)  # extractive summaries
    with serve(sim) as url:
        try:
            if IS_1X:
                await _run_1x(manager, url, stream, turns, steps, lines)
            else:
                await _run_2x(manager, url, model, stream, turns, steps, lines)
        finally:
            await manager.close()
    return sim


async def _run_2x(
    manager: Any, url: str, kind: str, stream: bool, turns: int, steps: int, lines: int
) -> None:
    from agentscope.credential import DeepSeekCredential, OpenAICredential
    from agentscope.model import DeepSeekChatModel, OpenAIChatModel

    model: Any
    if kind == "deepseek":
        model = DeepSeekChatModel(
            credential=DeepSeekCredential(api_key="sk-test", base_url=url),
            model="deepseek-reasoner",
            parameters=DeepSeekChatModel.Parameters(thinking_enable=True),
            stream=stream,
            max_retries=0,
        )
    else:
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key="sk-test", base_url=url),
            model="deepseek-reasoner",
            stream=stream,
            max_retries=0,
        )
    await run_2x(manager, model, turns, steps, lines)


async def _run_1x(manager: Any, url: str, stream: bool, turns: int, steps: int, lines: int) -> None:
    from agentscope.formatter import OpenAIChatFormatter
    from agentscope.model import OpenAIChatModel

    model = OpenAIChatModel(
        "deepseek-reasoner",
        api_key="sk-test",
        stream=stream,
        client_kwargs={"base_url": url, "max_retries": 0},
    )
    await run_1x(manager, model, turns, steps, lines, OpenAIChatFormatter())
