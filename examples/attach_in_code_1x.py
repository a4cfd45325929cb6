"""Attach agentscope-ctx to an AgentScope 1.x `ReActAgent` you build yourself, with a real
model. For AgentScope 1.x (in a clone: pip install -e ".[agentscope1]"); on 2.x, the default
install, run examples/attach_in_code.py.

    export OPENAI_API_KEY=...    # or OPENAI_BASE_URL=http://localhost:8000/v1 (any key)
    python examples/attach_in_code_1x.py

Swap the model section for any file in configs/providers/ (OpenAI, a local vLLM / llama.cpp
/ Ollama server, DashScope, Anthropic, Ollama).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import agentscope

if not agentscope.__version__.startswith("1."):
    sys.exit(
        f"examples/attach_in_code_1x.py needs AgentScope 1.x; AgentScope "
        f"{agentscope.__version__} is installed: run examples/attach_in_code.py"
    )

from agentscope.agent import ReActAgent
from agentscope.message import Msg
from agentscope.tool import Toolkit

from agentscope_ctx import ContextConfig, ContextManager, ShellTool, build_model


async def main() -> None:
    model, formatter = build_model(
        {"provider": "openai", "model_name": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}
    )
    toolkit = Toolkit()
    toolkit.register_tool_function(ShellTool(Path.cwd()).run_shell)
    agent = ReActAgent(
        name="assistant",
        sys_prompt="You are a careful engineering assistant.",
        model=model,
        formatter=formatter,
        toolkit=toolkit,
    )
    config = ContextConfig(working_dir=Path("~/.agentscope_ctx"), max_input_tokens=100_000)
    manager = ContextManager(config, model=model, formatter=formatter)
    manager.attach(agent)  # memory, read_file, truncation middleware, pipeline hooks
    try:
        await agent(Msg("user", "Which files in this directory mention TODO?", "user"))
        report = await manager.compact(agent, extra_instruction="keep the file names")
        why = f" ({report.note})" if report.note else ""  # e.g. nothing older to compact
        print(f"compacted {report.compacted} messages{why}")
        print(await manager.context_usage(agent))
    finally:
        await manager.close()


if __name__ == "__main__":
    asyncio.run(main())
