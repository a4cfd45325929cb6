"""AgentScope 2.x's real app server (`agentscope.app.create_app`) for tests, driven through
HTTP (Starlette's TestClient), with `app_middlewares` as its `extra_agent_middlewares`: SQL
session storage on SQLite (or a given storage), the in-process message bus, local workspaces,
and a scripted OpenAI-compatible model server on loopback (`tests/support/openai_server.py`). The tool
is an extra agent tool whose output is large, so every call of it is cut and saved."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentscope.app import create_app
from agentscope.app.message_bus import InMemoryMessageBus
from agentscope.app.storage import AsyncSQLAlchemyStorage
from agentscope.app.workspace_manager import LocalWorkspaceManager
from agentscope.tool import FunctionTool
from fastapi.testclient import TestClient

from agentscope_ctx import ContextConfig, app_middlewares
from agentscope_ctx.agentscope2 import AppMiddlewares
from tests.support.fakes import ALLOW
from tests.support.openai_server import Reply, Server, base_url, serving

SECRET = "line {n} of the build log of {who}\n"


def build_log(who: str) -> str:
    """The tool: a long build log that names its user."""
    return "".join(SECRET.format(n=n, who=who) for n in range(2_000))


async def extra_tools(user_id: str, agent_id: str, session_id: str) -> list[Any]:
    def fetch_log() -> str:
        """Fetch the build log."""
        return build_log(user_id)

    return [FunctionTool(fetch_log, permission=ALLOW, is_read_only=True)]


def respond(body: dict[str, Any]) -> Reply:
    """The model: call `fetch_log` when asked to, then answer; other calls (the app's
    naming of a session) get a plain text."""
    tools = [t["function"]["name"] for t in body.get("tools", [])]
    if any(m["role"] == "tool" for m in body["messages"]):
        return Reply(text="Read it.")
    if "fetch_log" in tools and "fetch the log" in json.dumps(body["messages"]):
        return Reply(tool="fetch_log")
    return Reply(text="Hello.")


def config(tmp_path: Path, budget: int = 60_000) -> ContextConfig:
    return ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "ctx"),
            "max_input_tokens": budget,
            "token_counter": "cl100k_base",
            "summarizer": {"enabled": False},
            "consolidation": {"enabled": False},
        }
    )


class App:
    """A running app and what a test drives it with."""

    def __init__(self, client: TestClient, server: Server, factory: AppMiddlewares) -> None:
        self.client, self.server, self.factory = client, server, factory

    def setup(self, user: str, agent_name: str = "assistant") -> tuple[str, str]:
        """A credential, an agent named `agent_name` and a session of `user`."""
        h = {"X-User-ID": user}
        cred = self.client.post(
            "/credential/",
            headers=h,
            json={
                "data": {
                    "type": "openai_credential",
                    "api_key": "k",
                    "base_url": base_url(self.server),
                }
            },
        )
        assert cred.status_code == 201, cred.text
        agent = self.client.post("/agent/", headers=h, json={"name": agent_name})
        assert agent.status_code in (200, 201), agent.text
        agent_id = agent.json()["agent_id"]
        model = {
            "type": "openai_chat",
            "credential_id": cred.json()["credential_id"],
            "model": "gpt-4o-mini",
            "parameters": {"stream": False},
        }
        session = self.client.post(
            "/sessions/", headers=h, json={"agent_id": agent_id, "chat_model_config": model}
        )
        assert session.status_code in (200, 201), session.text
        return agent_id, session.json()["session_id"]

    def chat(self, user: str, agent_id: str, session_id: str, text: str) -> list[dict[str, Any]]:
        """Send a user message; wait for the run to end; the session's messages."""
        h = {"X-User-ID": user}
        before = len(self.messages(user, agent_id, session_id))
        msg = {"role": "user", "name": user, "content": [{"type": "text", "text": text}]}
        sent = self.client.post(
            "/chat/", headers=h, json={"agent_id": agent_id, "session_id": session_id, "input": msg}
        )
        assert sent.status_code == 200, sent.text
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = self.client.get(
                f"/sessions/{session_id}/status", headers=h, params={"agent_id": agent_id}
            ).json()["status"]
            messages = self.messages(user, agent_id, session_id)
            if len(messages) > before + 1 and status != "running":
                return messages
            time.sleep(0.1)
        raise AssertionError(f"the chat run did not end: {status}")

    def messages(self, user: str, agent_id: str, session_id: str) -> list[dict[str, Any]]:
        got = self.client.get(
            f"/sessions/{session_id}/messages",
            headers={"X-User-ID": user},
            params={"agent_id": agent_id},
        )
        assert got.status_code == 200, got.text
        body = got.json()
        return list(body["messages"] if isinstance(body, dict) else body)


@contextmanager
def running_app(
    tmp_path: Path,
    cfg: ContextConfig,
    *,
    storage: Any = None,
    tools: Callable[..., Any] | None = extra_tools,
) -> Iterator[App]:
    """The app over `cfg` (storage default: SQL on SQLite under `tmp_path`), started; its
    lifespan ends (and the factory closes) on exit."""
    factory = app_middlewares(cfg)
    with serving() as server:
        server.reported = None
        server.script += [respond] * 200
        fastapi_app = create_app(
            storage=storage or AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{tmp_path / 'app.db'}"),
            message_bus=InMemoryMessageBus(),
            workspace_manager=LocalWorkspaceManager(str(tmp_path / "workspaces")),
            extra_agent_middlewares=factory,
            extra_agent_tools=tools,
            enable_scheduler=False,
            enable_channel_worker=False,
        )
        factory.close_with(fastapi_app)
        with TestClient(fastapi_app) as client:
            yield App(client, server, factory)


def texts(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages)


def tool_text(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)
