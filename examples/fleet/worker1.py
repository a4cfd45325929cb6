"""A worker of the fleet example on AgentScope 1.x: one process, one port; start two.

    . ./fleet-data/env.sh          # from servers.py: FLEET_CONFIG, CTX_DB_PASSWORD, REDIS_URL
    python examples/fleet/worker1.py --port 8101 --model http://127.0.0.1:8300/v1 &
    python examples/fleet/worker1.py --port 8102 --model http://127.0.0.1:8300/v1 &

POST /chat {"user", "session", "id", "text"} runs one turn of a session as any worker would:
a fresh `ReActAgent` whose memory is AgentScope's `RedisMemory` for that session (written
through as the turn goes, so the other worker sees every message), agentscope_ctx attached
over it with the PostgreSQL store of FLEET_CONFIG (its compactions summarised by the model
server), the rest of the agent's state loaded from and saved to `RedisSession`. Answers
{"reply", "pid"}. GET / answers {"pid"}.

Its budget is `--max-input-tokens` (4,000 by default), not fleet.yaml's 12,000: that one counts
on the 2.x app server's sixteen built-in tools, about 7,200 tokens of schemas in every prompt,
where this agent has two. With 4,000, the ten turns of client1.py outgrow it as the 2.x chat
outgrows its own, and the old turns are compacted (summaries the model server writes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import agentscope

if not agentscope.__version__.startswith("1."):
    sys.exit(
        f"examples/fleet/worker1.py needs AgentScope 1.x; AgentScope "
        f"{agentscope.__version__} is installed: run examples/fleet/app2.py"
    )

import uvicorn
from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.memory import RedisMemory
from agentscope.message import Msg, TextBlock
from agentscope.model import OpenAIChatModel
from agentscope.session import RedisSession
from agentscope.tool import Toolkit, ToolResponse
from fastapi import FastAPI

from agentscope_ctx import ContextConfig, ContextManager

config = ContextConfig.from_yaml(os.environ["FLEET_CONFIG"])
redis = urlparse(os.environ["REDIS_URL"])
REDIS = {"host": redis.hostname, "port": redis.port or 6379, "db": int(redis.path[1:] or 0)}
files = Path(os.environ["FLEET_DIR"]) / "files"
app = FastAPI()
managers: dict[tuple[str, str], ContextManager] = {}  # one per session: its tenant
MODEL_URL = ""


def toolkit() -> Toolkit:
    def cat_file(path: str) -> ToolResponse:
        """Print a file of the example's data folder.

        Args:
            path (str): the file's name in the data folder.
        """
        text = (files / Path(path).name).read_text(encoding="utf-8")
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    async def shell(command: str) -> ToolResponse:
        """Run a shell command; its output (stdout and stderr).

        Args:
            command (str): the command line.
        """
        proc = await asyncio.create_subprocess_shell(
            command, cwd=files, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await proc.communicate()
        return ToolResponse(content=[TextBlock(type="text", text=out.decode(errors="replace"))])

    tools = Toolkit()
    tools.register_tool_function(cat_file)
    tools.register_tool_function(shell)
    return tools


def chat_model() -> OpenAIChatModel:
    """The model server's model (the agent's, and the compactor's: it writes the summaries)."""
    return OpenAIChatModel(
        "scripted", api_key="offline", stream=False, client_kwargs={"base_url": MODEL_URL}
    )


def manager_for(user: str, session: str) -> ContextManager:
    """The session's manager: made at its first turn on this worker, kept after it."""
    if (user, session) not in managers:
        recall = config.recall.model_copy(update={"user": user, "session": session})
        managers[user, session] = ContextManager(
            config.model_copy(update={"recall": recall}),
            model=chat_model(),
            formatter=OpenAIChatFormatter(),
        )
    return managers[user, session]


@app.get("/")
async def pid() -> dict[str, Any]:
    return {"pid": os.getpid()}


@app.post("/chat")
async def chat(turn: dict[str, str]) -> dict[str, Any]:
    user, session = turn["user"], turn["session"]
    model = chat_model()
    memory = RedisMemory(session_id=session, user_id=user, **REDIS)
    agent = ReActAgent(
        name="assistant",
        sys_prompt="You are a build engineer. Answer each turn in one line.",
        model=model,
        formatter=OpenAIChatFormatter(),
        toolkit=toolkit(),
        memory=memory,
    )
    agent.set_console_output_enabled(False)
    manager_for(user, session).attach(agent)  # RedisMemory becomes the ContextMemory's backend
    state = RedisSession(**REDIS)
    try:
        await state.load_session_state(session, user_id=user, agent=agent)
        message = Msg(user, turn["text"], "user")
        # The client's id: a turn sent again after its worker died is this same message, and
        # RedisMemory keeps a message id once (the dead worker had already written it).
        message.id = turn["id"]
        reply = await agent(message)
        await state.save_session_state(session, user_id=user, agent=agent)
    finally:
        await memory.close()
    return {"reply": reply.get_text_content(), "pid": os.getpid()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8101)
    parser.add_argument("--model", default="http://127.0.0.1:8300/v1", help="the model server")
    parser.add_argument("--max-input-tokens", type=int, default=4_000, help="the budget")
    args = parser.parse_args()
    MODEL_URL = args.model
    config = ContextConfig.model_validate(
        config.model_dump() | {"max_input_tokens": args.max_input_tokens}
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
