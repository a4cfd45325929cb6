"""`await manager.forget(user=..., agent=..., session=...)` on the installed line (issue 47):
two users' sessions of one agent on one working dir, each turn cutting and saving a tool's
output and compacting; forgetting one user leaves none of its bytes under the working dir
(its steps and usage records included), the other's searches and reads as they were; a bad
call names the field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentscope_ctx import ContextConfig
from agentscope_ctx.core._errors import ContextUsageError
from agentscope_ctx.core._tenant import Tenant, agent_key
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.stores._audit import AuditFile
from agentscope_ctx.stores.factory import open_stores
from tests.support.agent_line import Line, Session

TOKENS = {"alice": "tokalicewqzxvbnm", "bob": "tokbobkjhgfdsaqp"}


def found(root: Path, token: str) -> list[str]:
    needle = token.encode()
    out = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                out.append(str(path.relative_to(root)))
    return sorted(out)


def config_of(working_dir: Path, user: str) -> ContextConfig:
    return ContextConfig(
        working_dir=working_dir,
        max_input_tokens=6_000,
        tool_result={"recent_max_bytes": 2_000, "old_max_bytes": 1_024},
        recall={"user": user, "session": f"{user}-session"},
    )


async def chat(line: Line, working_dir: Path, user: str) -> Session:
    token = TOKENS[user]

    def dump(arg: str) -> str:
        return "".join(f"{token} step {n}: module {arg}{n}\n" for n in range(200))

    session = line.session(config_of(working_dir, user), None, {"dump": dump})
    for n in range(3):
        await session.turn(f"{token} turn {n}: build it", line.tool_call("dump", arg=f"m{n}"))
    await session.compact()
    return session


def search(working_dir: Path, user: str, query: str | None = None) -> list[tuple[str, int]]:
    """The hits of `query` (the user's token) in its own session."""
    key, sid = agent_key("coder", user), f"{user}-session"
    stores = open_stores(ContextConfig(working_dir=working_dir), agent=key, session=sid)
    try:
        result = stores.search.search(
            query or TOKENS[user],
            Filters(tenant=Tenant(key, sid)),
            limit=20,
            catch_up_seconds=None,
        )
        return sorted((str(h.path), h.start_line) for h in result.hits)
    finally:
        stores.close()


async def test_manager_forget_removes_a_users_bytes_and_keeps_the_others(
    tmp_path: Path, line: Line
) -> None:
    alice = await chat(line, tmp_path, "alice")
    bob = await chat(line, tmp_path, "bob")
    try:
        assert {"dialog", "tool_result"} <= {
            p.split("/")[0] for p in found(tmp_path, TOKENS["alice"])
        }
        assert any(p.startswith("usage/") for p in found(tmp_path, "alice-session"))
        kept = found(tmp_path, TOKENS["bob"])
        bob_hits = search(tmp_path, "bob", "turn")  # fewer than the limit: the same set after
        # (among more equal-ranked hits than the limit, the rebuilt index may pick others)
        assert search(tmp_path, "alice") and bob_hits
        with pytest.raises(ContextUsageError, match="at least one"):
            await alice.manager.forget()
        with pytest.raises(ContextUsageError, match="agent"):
            await alice.manager.forget(agent="")
        dry = await alice.manager.forget(user="alice", dry_run=True)
        assert dry.counts["dialog"] > 0 and dry.counts["outputs"] > 0
        assert found(tmp_path, TOKENS["alice"])  # a dry run deletes nothing
        report = await alice.manager.forget(user="alice", who="support-ticket-17")
        assert report.counts == {**dry.counts}
        assert found(tmp_path, TOKENS["alice"]) == []
        assert found(tmp_path, "alice-session") == []  # its names too
        assert search(tmp_path, "alice") == []
        assert found(tmp_path, TOKENS["bob"]) == kept
        assert search(tmp_path, "bob", "turn") == bob_hits and search(tmp_path, "bob")
        [line_] = AuditFile(tmp_path).read()
        assert line_["who"] == "support-ticket-17" and line_["action"] == "forget"
        assert line_["tenant"] == {"user": "alice", "agent": None, "session": None}
        assert TOKENS["alice"] not in (tmp_path / "audit.jsonl").read_text()
    finally:
        await alice.close()
        await bob.close()
