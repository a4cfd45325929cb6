"""Attach agentscope-ctx to a ReActAgent you build yourself, with a real provider model.

    export DASHSCOPE_API_KEY=...
    python examples/attach_in_code.py

Swap the model section for any file in configs/providers/ (OpenAI, a local vLLM / llama.cpp
/ Ollama server, Anthropic, Ollama).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentscope.agent import ReActAgent
from agentscope.message import Msg
from agentscope.tool import Toolkit

from agentscope_ctx import ContextConfig, ContextManager, ShellTool, build_model


async def main() -> None:
    model, formatter = build_model(
        {"provider": "dashscope", "model_name": "qwen-max", "api_key_env": "DASHSCOPE_API_KEY"}
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
        print(await manager.context_usage(agent))
    finally:
        await manager.close()


if __name__ == "__main__":
    asyncio.run(main())
