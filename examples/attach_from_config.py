"""Build a ReActAgent with agentscope-ctx attached from one YAML file, and chat with it.

    export OPENAI_API_KEY=...           # or edit the model: section (configs/providers/)
    python examples/attach_from_config.py configs/agent.yaml

Type `/compact [instruction]` to compact on demand, `/usage` to see where the tokens go,
an empty line to quit.
"""

from __future__ import annotations

import asyncio
import sys

from agentscope.message import Msg

from agentscope_ctx import ConfigError, build_agent


async def main(path: str) -> None:
    try:
        agent, manager = build_agent(path)
    except ConfigError as exc:
        sys.exit(f"config error: {exc}")
    try:
        while line := (await asyncio.to_thread(input, "you> ")).strip():
            if line.startswith("/compact"):
                report = await manager.compact(agent, line.removeprefix("/compact").strip())
                print(f"compacted {report.compacted} messages")
            elif line == "/usage":
                usage = await manager.context_usage(agent)
                print(f"{usage.total} of {usage.max_input_tokens} tokens ({usage.ratio:.0%})")
            else:
                await agent(Msg("user", line, "user"))
    finally:
        await manager.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "configs/agent.yaml"))
