"""The fleet example on AgentScope 2.x: AgentScope's own app server with agentscope_ctx.

    . ./fleet-data/env.sh          # from servers.py: FLEET_CONFIG, CTX_DB_PASSWORD, REDIS_URL
    uvicorn app2:app --app-dir examples/fleet --workers 2 --port 8000

Every worker process imports this module and builds the same app: sessions in AgentScope's
`RedisStorage`, the message bus on the same Redis (its session lock is what keeps one turn of a
session running at a time across workers), and agentscope_ctx's factory over the PostgreSQL
store named in FLEET_CONFIG, so that a cut output saved by one worker is read and searched
from the other. Two tools that produce big outputs, `cat_file` and `shell`, are added to the
app's own.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import agentscope

if not agentscope.__version__.startswith("2."):
    sys.exit(
        f"examples/fleet/app2.py needs AgentScope 2.x; AgentScope "
        f"{agentscope.__version__} is installed: run examples/fleet/worker1.py"
    )

from agentscope.app import create_app
from agentscope.app.message_bus import MessageBusKeys, RedisMessageBus
from agentscope.app.storage import RedisStorage
from agentscope.app.workspace_manager import LocalWorkspaceManager
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool
from redis.asyncio import BlockingConnectionPool

from agentscope_ctx import ContextConfig, app_middlewares

config = ContextConfig.from_yaml(os.environ["FLEET_CONFIG"])
redis = urlparse(os.environ["REDIS_URL"])
files = Path(os.environ["FLEET_DIR"]) / "files"

# A worker killed mid-turn keeps its session's lock until the lease runs out (600 s by default,
# renewed every half of it while the worker lives): the session answers again only then. The
# example shortens the lease so that the chat goes on within seconds of a kill.
MessageBusKeys.SESSION_RUN_TTL_SECS = int(os.environ.get("FLEET_LEASE_SECS", "10"))

# The example's tools run without asking (AgentScope 2.x asks the user before a custom tool).
ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="the fleet example")


async def extra_tools(user_id: str, agent_id: str, session_id: str) -> list[Any]:
    def cat_file(path: str) -> str:
        """Print a file of the example's data folder.

        Args:
            path: the file's name in the data folder.
        """
        return (files / Path(path).name).read_text(encoding="utf-8")

    async def shell(command: str) -> str:
        """Run a shell command; its output (stdout and stderr).

        Args:
            command: the command line.
        """
        proc = await asyncio.create_subprocess_shell(
            command, cwd=files, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await proc.communicate()
        return out.decode(errors="replace")

    return [FunctionTool(f, permission=ALLOW, is_read_only=True) for f in (cat_file, shell)]


factory = app_middlewares(config)  # one per worker process: its stores open at the first turn
redis_at = {"host": redis.hostname, "port": redis.port or 6379, "db": int(redis.path[1:] or 0)}
# Redis connections, per worker (docs/fleet.md, "Redis connections"): AgentScope's storage and
# bus each make a pool of 100 by default that fails a turn past it ("Too many connections").
# Pools that wait for a free connection instead, sized by the sessions a worker runs at once:
# each running or streamed session holds one bus connection (its events' subscription).
sessions = int(os.environ.get("FLEET_SESSIONS_PER_WORKER", "100"))
storage_pool = BlockingConnectionPool(
    **redis_at, decode_responses=True, max_connections=32, timeout=60
)  # short reads and writes: a few dozen serve every session
bus_pool = BlockingConnectionPool(
    **redis_at, decode_responses=True, max_connections=2 * sessions + 16, timeout=60
)
app = create_app(
    storage=RedisStorage(connection_pool=storage_pool),
    message_bus=RedisMessageBus(connection_pool=bus_pool),
    workspace_manager=LocalWorkspaceManager(str(Path(os.environ["FLEET_DIR"]) / "workspaces")),
    extra_agent_middlewares=factory,
    extra_agent_tools=extra_tools,
    enable_scheduler=False,  # no scheduled jobs here (each worker would run its own scheduler)
    enable_channel_worker=False,
)
factory.close_with(app)  # the PostgreSQL pool closes when the worker stops


class TellWorker:
    """Every answer names the worker process that gave it (`X-Worker-Pid`): a chat turn runs in
    the worker that accepted its POST /chat/, so the client can kill that one mid-turn. A plain
    ASGI middleware: it leaves the app's event streams as they are."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def send_named(message: Any) -> None:
            if message["type"] == "http.response.start":
                pid = (b"x-worker-pid", str(os.getpid()).encode())
                message["headers"] = [*message.get("headers", []), pid]
            await send(message)

        await self.app(scope, receive, send_named if scope["type"] == "http" else send)


app.add_middleware(TellWorker)
