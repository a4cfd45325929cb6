"""Attach agentscope-ctx to an AgentScope 2.x `Agent` you build yourself, with a real model.
For AgentScope 2.x (the default install); on 1.x, run examples/attach_in_code_1x.py.

    export OPENAI_API_KEY=...    # or OPENAI_BASE_URL=http://localhost:8000/v1 (any key)
    python examples/attach_in_code.py

Swap the model section for any file in configs/providers/ (OpenAI, a local vLLM / llama.cpp
/ Ollama server, DashScope, Anthropic, Ollama).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import agentscope

if agentscope.__version__.startswith("1."):
    sys.exit(
        f"examples/attach_in_code.py needs AgentScope 2.x; AgentScope {agentscope.__version__} "
        "is installed: run examples/attach_in_code_1x.py"
    )

from agentscope.agent import Agent
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_ctx import ContextConfig, ContextManager, ShellTool, build_model, function_tool


async def main() -> None:
    model, _ = build_model(
        {"provider": "openai", "model_name": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}
    )
    config = ContextConfig(working_dir=Path("~/.agentscope_ctx"), max_input_tokens=100_000)
    manager = ContextManager(config, model=model)
    agent = Agent(
        name="assistant",
        system_prompt="You are a careful engineering assistant.",
        model=model,
        toolkit=Toolkit(tools=[function_tool(ShellTool(Path.cwd()).run_shell, read_only=True)]),
    )
    manager.attach(agent)  # the middleware: read_file, memory tools, cuts, pipeline
    try:
        reply = await agent.reply(
            UserMsg(name="user", content="Which files in this directory mention TODO?")
        )
        print(f"assistant: {reply.get_text_content()}")
        report = await manager.compact(agent, extra_instruction="keep the file names")
        why = f" ({report.note})" if report.note else ""  # e.g. nothing older to compact
        print(f"compacted {report.compacted} messages{why}")
        print(await manager.context_usage(agent))
    finally:
        await manager.close()


if __name__ == "__main__":
    asyncio.run(main())
