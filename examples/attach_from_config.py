"""Build an agent with agentscope-ctx attached from one YAML file, and chat with it.
On either AgentScope line: a 2.x `Agent` on 2.x (the default install), a `ReActAgent` on 1.x.

    export OPENAI_API_KEY=...    # or OPENAI_BASE_URL=http://localhost:8000/v1 (any key)
    python examples/attach_from_config.py configs/agent.yaml

Type `/compact [instruction]` to compact on demand, `/usage` to see where the tokens go,
an empty line (or end of input) to quit.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import agentscope

from agentscope_ctx import ConfigError, build_agent

IS_1X = agentscope.__version__.startswith("1.")


async def ask(agent: Any, text: str) -> None:
    """One user turn, the way the installed line takes it."""
    if IS_1X:
        from agentscope.message import Msg

        await agent(Msg("user", text, "user"))  # a ReActAgent prints its reply itself
    else:
        from agentscope.message import UserMsg

        reply = await agent.reply(UserMsg(name="user", content=text))
        print(f"{agent.name}: {reply.get_text_content()}")


def read_line() -> str:
    try:
        return input("you> ").strip()
    except EOFError:
        return ""


async def main(path: str) -> None:
    try:
        agent, manager = build_agent(path)
    except ConfigError as exc:
        sys.exit(f"config error: {exc}")
    try:
        while line := await asyncio.to_thread(read_line):
            if line.startswith("/compact"):
                report = await manager.compact(agent, line.removeprefix("/compact").strip())
                why = f" ({report.note})" if report.note else ""  # e.g. nothing older to compact
                print(f"compacted {report.compacted} messages{why}")
            elif line == "/usage":
                usage = await manager.context_usage(agent)
                print(f"{usage.total} of {usage.max_input_tokens} tokens ({usage.ratio:.0%})")
            else:
                await ask(agent, line)
    finally:
        await manager.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "configs/agent.yaml"))
