"""A 1.x `ReActAgent` as the tests of the 1.x adapter build it: a real agent with the OpenAI
formatter, console output off, and a real `Toolkit` made of plain functions that return text
(each result becomes a `ToolResponse` with one text block). Only a module that runs on 1.x
calls these (AgentScope is imported when called)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.agent_line import _functions, installed


def text_tools(*functions: Callable[..., str]) -> Any:
    """A real 1.x `Toolkit` holding `functions` (Google docstrings, returning text)."""
    return installed().toolkit(list(functions))


def add_text_tools(toolkit: Any, *functions: Callable[..., str]) -> Any:
    """Register `functions` (Google docstrings, returning text) in the 1.x `toolkit` (one
    with middleware, say), each result a `ToolResponse` with one text block; `toolkit`."""
    from agentscope.message import TextBlock
    from agentscope.tool import ToolResponse

    def wrap(text: str) -> Any:
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    for fn in _functions(list(functions), wrap):
        toolkit.register_tool_function(fn)
    return toolkit


def react(
    model: Any,
    toolkit: Any = None,
    *,
    name: str = "worker",
    sys_prompt: str = "You help.",
    formatter: Any = None,
    **kwargs: Any,
) -> Any:
    """A 1.x `ReActAgent` named `name` on `model` with `toolkit` (an empty one by default) and
    `formatter` (OpenAI's by default), console output off; `kwargs` go to `ReActAgent`
    (`memory=`, `max_iters=`, `parallel_tool_calls=`...)."""
    from agentscope.agent import ReActAgent
    from agentscope.formatter import OpenAIChatFormatter
    from agentscope.tool import Toolkit

    agent = ReActAgent(
        name=name,
        sys_prompt=sys_prompt,
        model=model,
        formatter=formatter if formatter is not None else OpenAIChatFormatter(),
        toolkit=toolkit if toolkit is not None else Toolkit(),
        **kwargs,
    )
    agent.set_console_output_enabled(False)
    return agent


def dump_log(log: str) -> str:
    """Print a log file.

    Args:
        log (str): the log.
    """
    return "".join(f"{log}: line {i} ERROR something failed here\n" for i in range(600))


async def dump_turns(
    agent: Any, model: Any, turns: int, steps: int = 10, first: Any = None
) -> None:
    """`turns` user turns of `steps` big `dump_log` calls each (the agent's toolkit holds
    `dump_log`), each answered "turn <i> done"; `first` (a `Msg`) opens the session if
    given."""
    from agentscope.message import Msg

    from tests.support.fakes import text, tool_call

    n = 0
    for turn in range(turns):
        for _ in range(steps):
            model.enqueue(tool_call("dump_log", call_id=f"c{n}", log=f"log{n}"))
            n += 1
        model.enqueue(text(f"turn {turn} done"))
        question = first if turn == 0 and first is not None else Msg("user", f"task {turn}", "user")
        reply = await agent(question)
        assert reply.get_text_content() == f"turn {turn} done"


def record_adds(memory: Any) -> list[str]:
    """The ids of the messages added to `memory` from now, in order (its `add` is wrapped)."""
    from agentscope.message import Msg

    added: list[str] = []
    original = memory.add

    async def spy(memories: Any, *args: Any, **kwargs: Any) -> None:
        for msg in [memories] if isinstance(memories, Msg) else memories or []:
            if msg.id not in added:
                added.append(msg.id)
        await original(memories, *args, **kwargs)

    memory.add = spy
    return added


def dump_config(working_dir: Any, budget: int, **overrides: Any) -> Any:
    """The `ContextConfig` of a `dump_turns` session that compacts: `budget` tokens,
    extractive summaries, and no masking (masking alone would free enough); `overrides`
    replace fields."""
    from agentscope_ctx import ContextConfig

    fields: dict[str, Any] = {
        "working_dir": working_dir,
        "max_input_tokens": budget,
        "compact_trigger_ratio": 0.7,
        "keep_recent_ratio": 0.3,
        "tool_result": {
            "recent_n": 3,
            "recent_max_bytes": 6_000,
            "old_max_bytes": 1_500,
            "mask_after": None,
        },
        "token_counter": "cl100k_base",
        "summarizer": {"enabled": False},
    }
    fields.update(overrides)
    return ContextConfig(**fields)


def tool_uses(name: str, k: int, arguments: list[dict[str, Any]]) -> list[Any]:
    """The tool-use blocks of step `k` of a scripted model: one call of tool `name` per
    entry of `arguments`, with the ids ``c<k>_<j>``."""
    import json

    from agentscope.message import ToolUseBlock

    return [
        ToolUseBlock(
            type="tool_use",
            id=f"c{k}_{j}",
            name=name,
            input=args,
            raw_input=json.dumps(args),
        )
        for j, args in enumerate(arguments)
    ]


def session_examples(n: int) -> Any:
    """Hypothesis settings for `n` whole agent sessions: no deadline, and the health checks
    that big generated sessions trip (slow, large data) off."""
    from hypothesis import HealthCheck, settings

    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
