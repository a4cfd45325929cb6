"""`app_middlewares` on AgentScope 2.x's app server over the fleet's stores: sessions in
`RedisStorage` (a private Redis), our records in PostgreSQL as an ordinary role (row-level
security on), driven through HTTP (`tests/support/app_server.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X

if IS_1X:
    pytest.skip("AgentScope 2.x's app server (create_app)", allow_module_level=True)

pytest.importorskip("fastapi")

from agentscope_ctx import ContextConfig
from agentscope_ctx.core.truncation._truncation import parse_notice
from agentscope_ctx.recall._read_file import ReadFileError
from tests.fleet.redis_server import RedisServer, redis_server  # noqa: F401
from tests.fleet.test_tenants import (
    _store,
    app_role,  # noqa: F401
)
from tests.support.app_server import running_app, texts, tool_text


def test_two_users_agents_named_alike_on_postgres_and_redis(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    from agentscope.app.storage import RedisStorage

    cfg = ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "ctx"),
            "store": _store("postgres", request),
            "max_input_tokens": 60_000,
            "token_counter": "cl100k_base",
            "summarizer": {"enabled": False},
            "consolidation": {"enabled": False},
        }
    )
    storage = RedisStorage(
        host=redis_server.host, port=redis_server.port, db=redis_server.fresh_db()
    )
    with running_app(tmp_path, cfg, storage=storage) as app:
        ids = {who: app.setup(who) for who in ("alice", "bob")}
        for who, (agent_id, session_id) in ids.items():
            app.chat(who, agent_id, session_id, "fetch the log")
        app.chat("bob", *ids["bob"], "fetch the log")  # a second turn: the same stores
        managers = {who: app.factory.manager_for(who, *ids[who]) for who in ids}
        assert managers["alice"].backend is managers["bob"].backend is app.factory.backend

        refs: dict[str, Any] = {}
        answers = [
            r for r in app.server.requests if any(m["role"] == "tool" for m in r["messages"])
        ]
        assert len(answers) == 3
        for who, request_ in zip(("alice", "bob"), answers, strict=False):
            tool = next(m for m in request_["messages"] if m["role"] == "tool")
            assert "line 1999 of" not in texts([tool])
            parsed = parse_notice(tool_text(tool))
            assert parsed is not None
            refs[who] = parsed[1].file_path
        assert all(str(ref).startswith("pg-output:") for ref in refs.values())
        bob = managers["bob"].reader_for("assistant")
        assert "line 1998 of the build log of bob" in bob.read_now(refs["bob"], 1999)
        fake = refs["alice"][:-4] + "0000"
        with pytest.raises(ReadFileError) as theirs:
            bob.read_now(refs["alice"], 1)
        with pytest.raises(ReadFileError) as missing:
            bob.read_now(fake, 1)
        assert str(theirs.value) == str(missing.value).replace(fake, refs["alice"])
