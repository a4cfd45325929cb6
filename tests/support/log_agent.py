"""The log-reading 2.x agent of the providers' end-to-end tests
(`tests/providers/test_cache_marks_e2e.py`, `test_cold_cache_e2e.py`): a scripted model's
answers (`responder`) and the agent, its `read_log` tool returning one part of a log
(`log_agent`)."""

from __future__ import annotations

from typing import Any

from tests.support import chat_sim


def log_text(lines: int) -> str:
    """A log of `lines` lines."""
    return "".join(f"line {i}: worker step {i} ok, queue depth {i % 7}\n" for i in range(lines))


def responder(steps: int) -> Any:
    """Per user turn: `steps` calls of `read_log`, then an answer."""

    def respond(body: dict[str, Any]) -> chat_sim.Turn:
        messages = body["messages"]
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        done = sum(1 for m in messages[last_user:] if m["role"] == "tool")
        if done >= steps:
            return chat_sim.Turn(text="The log is fine.")
        return chat_sim.Turn(tool_calls=[("read_log", {"part": done})])

    return respond


def log_agent(model: Any, manager: Any, log: str, state: Any = None) -> Any:
    """A 2.x `Agent` on `model` with `manager`'s middleware, its `read_log` tool returning
    ``part N`` and `log`; made from `state` when one is given."""
    from agentscope.agent import Agent, InjectionConfig
    from agentscope.tool import FunctionTool, Toolkit

    from tests.support.fakes import ALLOW

    def read_log(part: int) -> str:
        """Read one part of the log.

        Args:
            part (int): the part.
        """
        return f"part {part}\n{log}"

    return Agent(
        name="analyst",
        system_prompt="You read logs and report what you find. " * 40,
        model=model,
        toolkit=Toolkit(tools=[FunctionTool(read_log, permission=ALLOW, is_read_only=True)]),
        injection_config=InjectionConfig(inject_runtime_state=False),
        middlewares=[manager.middleware()],
        **({} if state is None else {"state": state}),
    )
