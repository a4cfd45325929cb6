"""ContextMemory over a shared AgentScope memory: replicas serving one session in turn."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x(
            "ContextMemory as a 1.x MemoryBase over AgentScope's own memories, on a ReActAgent"
        ),
        allow_module_level=True,
    )

from agentscope.agent import ReActAgent
from agentscope.memory import AsyncSQLAlchemyMemory, InMemoryMemory
from agentscope.message import Msg
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import create_async_engine

from agentscope_ctx import ContextConfig, ContextManager, ContextMemory, ContextUsageError
from agentscope_ctx.core.context._memory import SUMMARY_MARK
from tests.support.fakes import FakeChatModel, text, tool_call
from tests.support.react1 import react, text_tools


def scan(n: int) -> str:
    """Scan a shard.

    Args:
        n (int): the shard.
    """
    return "".join(f"shard {n} row {i}: fine\n" for i in range(150))


def replica(tmp_path: Path, memory: Any) -> tuple[ReActAgent, ContextManager, FakeChatModel]:
    model = FakeChatModel()
    agent = react(
        model, text_tools(scan), sys_prompt="You scan shards.", memory=memory, max_iters=30
    )
    config = ContextConfig(
        working_dir=tmp_path / "ctx",
        max_input_tokens=6_000,
        compact_trigger_ratio=0.7,
        keep_recent_ratio=0.3,
        token_counter="cl100k_base",
        # Replicas share compactions: no masking, so that they compact.
        tool_result={
            "recent_n": 2,
            "recent_max_bytes": 3_000,
            "old_max_bytes": 1_100,
            "mask_after": None,
            "recent_max_share": None,  # the bytes alone cut the outputs
        },
    )
    manager = ContextManager(config)
    manager.attach(agent)
    return agent, manager, model


async def turn(agent: ReActAgent, model: FakeChatModel, start: int, n: int, answer: str) -> None:
    for i in range(start, start + n):
        model.enqueue(tool_call("scan", call_id=f"s{i}", n=i))
    model.enqueue(text(answer))
    reply = await agent(Msg("user", f"scan shards {start}..{start + n - 1}", "user"))
    assert reply.get_text_content() == answer


@asynccontextmanager
async def two_stores(
    tmp_path: Path,
) -> AsyncIterator[tuple[AsyncSQLAlchemyMemory, AsyncSQLAlchemyMemory]]:
    """Two replicas' own SQLAlchemy memories (two engines) over one SQLite session."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
    engine_a, engine_b = create_async_engine(url), create_async_engine(url)
    store_a = AsyncSQLAlchemyMemory(engine_a, session_id="s1", user_id="u1")
    store_b = AsyncSQLAlchemyMemory(engine_b, session_id="s1", user_id="u1")
    try:
        yield store_a, store_b
    finally:
        await store_a.close()
        await store_b.close()
        await engine_a.dispose()
        await engine_b.dispose()


async def test_two_replicas_share_one_sqlite_session(tmp_path: Path) -> None:
    async with two_stores(tmp_path) as (store_a, store_b):
        a, manager_a, model_a = replica(tmp_path, store_a)
        b, manager_b, model_b = replica(tmp_path, store_b)
        memory_a, memory_b = manager_a.memory_of(a), manager_b.memory_of(b)
        assert memory_a.backend is store_a  # the agent's own memory became the backend

        await turn(a, model_a, 0, 6, "first half done")
        assert memory_a.compact_summary  # compaction ran and removed messages from the store
        await turn(b, model_b, 6, 6, "second half done")  # b starts from a's history
        # b's first prompt carried a's summary and a's recent messages
        first_prompt = str(model_b.calls[0]["messages"])
        assert "<compact_summary>" in first_prompt and "first half done" in first_prompt
        assert memory_b.compact_summary  # (b compacted again since, on top of a's summary)

        stored = await store_a.get_memory(exclude_mark=SUMMARY_MARK, prepend_summary=False)
        shared = [m.id for m in stored]
        assert [m.id for m in memory_b.messages()] == shared
        await memory_a.refresh()
        assert [m.id for m in memory_a.messages()] == shared

        # nothing lost: every message is in the shared store or in dialog/ exactly once
        dialog = [m.id for m in manager_a.dialog.read()[0]]
        assert len(set(dialog)) == len(dialog)
        # (a user turn kept in the prompt is written to dialog/ with the work around it)
        assert all(m.role == "user" for m in memory_b.messages() if m.id in set(dialog))
        questions = [m for m in manager_a.dialog.read()[0] if m.role == "user"]
        assert questions  # a's first request was compacted into dialog/, not dropped


async def test_replicas_share_what_the_summary_carries_as_data(tmp_path: Path) -> None:
    """What a summary carries by code travels with it through the backend (the summary
    message's metadata, `core.summary._kept`): the replica that compacts next carries on from what
    another replica's compaction carried, without reading it out of the summary's text."""
    from agentscope_ctx.core.summary._carry_text import CARRY_HEADER

    async with two_stores(tmp_path) as (store_a, store_b):
        a, manager_a, model_a = replica(tmp_path, store_a)
        b, manager_b, model_b = replica(tmp_path, store_b)
        memory_a, memory_b = manager_a.memory_of(a), manager_b.memory_of(b)
        await turn(a, model_a, 0, 6, "first half done")
        await turn(a, model_a, 6, 6, "second half done")
        assert memory_a.kept is not None and '"scan shards 0..5"' in memory_a.compact_summary
        await memory_b.refresh()
        assert memory_b.kept == memory_a.kept
        shared = memory_a.compact_summary
        await turn(b, model_b, 12, 6, "third part done")
        assert memory_b.compact_summary != shared  # b compacted on top of a's summary
        block = memory_b.compact_summary.rsplit(CARRY_HEADER, 1)[1]
        assert '"scan shards 0..5"' in block and '"scan shards 6..11"' in block
        await memory_a.refresh()
        assert memory_a.kept == memory_b.kept


async def test_explicit_backend_and_refusal_of_held_messages(tmp_path: Path) -> None:
    shared = InMemoryMemory()
    await shared.add(Msg("user", "earlier question", "user"))
    agent = react(FakeChatModel(), name="w", sys_prompt="s")
    manager = ContextManager(ContextConfig(working_dir=tmp_path))
    memory = manager.attach(agent, backend=shared)
    await manager.context_usage(agent)  # reloads from the backend
    assert [m.get_text_content() for m in memory.messages()] == ["earlier question"]
    await agent(Msg("user", "new question", "user"))
    assert await shared.size() == 3  # the question and the answer were written through

    busy = react(FakeChatModel(), name="x", sys_prompt="s")
    await busy.memory.add(Msg("user", "held locally", "user"))
    with pytest.raises(ContextUsageError, match="add them to it first"):
        ContextManager(ContextConfig(working_dir=tmp_path)).attach(busy, backend=InMemoryMemory())


# -- the summary in a backend (issue 11, item 3) ---------------------------------------------


class Killed(BaseException):
    """Stands for a SIGKILL: nothing after it runs."""


class FaultySQLMemory(AsyncSQLAlchemyMemory):
    """The real SQLAlchemy memory; `lock_next_add` makes the next add fail once as SQLite
    does when another process holds the database, `kill_at_write=n` kills the process at the
    n-th write (add or delete) from now."""

    lock_next_add = False
    kill_at_write: int | None = None

    async def _fault(self) -> None:
        if self.kill_at_write is not None:
            self.kill_at_write -= 1
            if self.kill_at_write == 0:
                raise Killed

    async def add(self, *args: Any, **kwargs: Any) -> None:
        await self._fault()
        if self.lock_next_add:
            self.lock_next_add = False
            raise OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))
        await super().add(*args, **kwargs)

    async def delete(self, *args: Any, **kwargs: Any) -> int:
        await self._fault()
        removed: int = await super().delete(*args, **kwargs)
        return removed


async def summaries(store: AsyncSQLAlchemyMemory) -> list[str]:
    found = await store.get_memory(mark=SUMMARY_MARK, prepend_summary=False)
    return [msg.get_text_content() or "" for msg in found]


async def test_i11_03_a_failed_summary_write_keeps_the_old_one_and_is_retried(
    tmp_path: Path,
) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}")
    store = FaultySQLMemory(engine, session_id="s1", user_id="u1")
    try:
        memory = ContextMemory(tmp_path, backend=store)
        await memory.add(Msg("user", "recent question", "user"))
        await memory.update_compressed_summary("old summary")

        store.lock_next_add = True
        await memory.update_compressed_summary("new summary")  # logged, not raised
        assert await summaries(store) == ["old summary"]  # the backend keeps the old one
        # locally the new one stands for the messages already removed
        assert memory.compact_summary == "new summary"

        assert await memory.refresh() is False  # retried: nothing changes here...
        assert await summaries(store) == ["new summary"]  # ...and the backend has it now
        assert memory.compact_summary == "new summary"
        assert [m.get_text_content() for m in memory.messages()] == ["recent question"]

        store.lock_next_add = True
        await memory.update_compressed_summary("third summary")
        await memory.update_compressed_summary("fourth summary")  # the next update writes it
        assert await summaries(store) == ["fourth summary"]
    finally:
        await store.close()
        await engine.dispose()


async def test_i11_03_a_kill_between_the_two_summary_writes_leaves_a_summary(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
    engine = create_async_engine(url)
    store = FaultySQLMemory(engine, session_id="s1", user_id="u1")
    memory = ContextMemory(tmp_path, backend=store)
    await memory.update_compressed_summary("old summary")
    store.kill_at_write = 2  # the update writes twice (new summary, old one): die between
    with pytest.raises(Killed):
        await memory.update_compressed_summary("new summary")
    await store.close()
    await engine.dispose()

    # The next process finds the new summary (the newest of the two it may find).
    engine = create_async_engine(url)
    store = FaultySQLMemory(engine, session_id="s1", user_id="u1")
    try:
        restarted = ContextMemory(tmp_path, backend=store)
        await restarted.refresh()
        assert restarted.compact_summary == "new summary"
        await restarted.update_compressed_summary("third summary")
        assert await summaries(store) == ["third summary"]  # the leftover is gone too
    finally:
        await store.close()
        await engine.dispose()
