"""Long-term memory on the fleet store (issue 28 item 3): with ``store.kind: postgres``,
MEMORY.md and the daily notes are rows of the database, one memory per agent name, so that
every worker's agent of that name reads and writes the same memory (a private PostgreSQL
server, see `conftest`). Workers here have working dirs of their own, as on separate
machines: nothing of the memory is on their disks."""

from __future__ import annotations

import asyncio
import inspect
import tempfile
import threading
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_ctx import ContextManager
from agentscope_ctx.cli import main as cli_main
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.memory._consolidation import consolidate
from agentscope_ctx.memory._long_term import LongTermMemory
from agentscope_ctx.memory._summarizer import MemoryFiles
from agentscope_ctx.stores.factory import open_stores
from agentscope_ctx.stores.postgres._schema import SCHEMA_VERSION
from tests.fleet.memory_agents import FakeChatModel, ask, make_agent, prompt_text, text, tool_call
from tests.fleet.pg_config import PgStore, config_file
from tests.fleet.remember_worker import expected_facts, remember_in_two_processes
from tests.support.lines import IS_1X, Msg, text_of

if IS_1X:
    from agentscope.formatter import OpenAIChatFormatter

    FORMATTER: Any = OpenAIChatFormatter()
else:
    FORMATTER = None

TODAY = date(2026, 3, 14)


def said(answer: Any) -> str:
    """A memory tool's answer as text (a 1.x `ToolResponse`, a 2.x `str`)."""
    return answer if isinstance(answer, str) else text_of(answer)


async def test_what_an_agent_remembers_on_one_worker_its_namesake_reads_on_another(
    tmp_path: Path, pg_store: PgStore
) -> None:
    worker_a = ContextManager(pg_store.config(tmp_path / "a"))
    worker_b = ContextManager(pg_store.config(tmp_path / "b"))
    model_a = FakeChatModel(
        [tool_call("remember", fact="The user's build tool is Bazel 7"), text("Noted.")]
    )
    await ask(make_agent(worker_a, model_a), "remember: I build with Bazel 7")
    model_b = FakeChatModel([text("You use Bazel 7.")])
    await ask(make_agent(worker_b, model_b), "what do I build with?")
    other = FakeChatModel([text("I do not know.")])
    await ask(make_agent(worker_b, other, name="stranger"), "what do I build with?")
    await worker_a.close()
    await worker_b.close()

    assert "The user's build tool is Bazel 7" in prompt_text(model_b.calls[0])
    assert "Saved to pg-memory:MEMORY.md" in prompt_text(model_a.calls[1])
    assert "Bazel" not in prompt_text(other.calls[0])  # another agent's memory is its own
    for name in ("a", "b"):  # nothing of the memory on either worker's disk
        assert not (tmp_path / name / "memory").exists()


# -- no lost `remember` between workers ---------------------------------------------------------


def _remember_on_two_workers(tmp_path: Path, pg_store: PgStore, count: int) -> None:
    remember_in_two_processes(lambda name: pg_store.config(tmp_path / name), tmp_path / "go", count)
    reader = ContextManager(pg_store.config(tmp_path / "reader"))
    body = reader.long_term_of("helper").store.read("MEMORY.md")
    facts = [line for line in body.splitlines() if " fact " in line]
    assert len(facts) == 2 * count and set(facts) == expected_facts(count)
    assert not (tmp_path / "alpha" / "memory").exists()


def test_remember_on_two_workers_keeps_every_fact(tmp_path: Path, pg_store: PgStore) -> None:
    _remember_on_two_workers(tmp_path, pg_store, 60)


@pytest.mark.slow
def test_remember_on_two_workers_keeps_600_facts(tmp_path: Path, pg_store: PgStore) -> None:
    _remember_on_two_workers(tmp_path, pg_store, 300)


# -- consolidation: one memory, merged once, read everywhere ------------------------------------


async def test_a_fact_one_worker_consolidates_is_what_the_other_reads(
    tmp_path: Path,
    pg_store: PgStore,
    capsys: pytest.CaptureFixture[str],
) -> None:
    worker_a = ContextManager(pg_store.config(tmp_path / "a"))
    note = "The deploy key is in vault path secret/deploy"
    model_a = FakeChatModel([tool_call("log_today", note=note), text("Logged.")])
    await ask(make_agent(worker_a, model_a), "note where the deploy key is")
    await worker_a.close()
    config = config_file(tmp_path / "fleet.yaml", tmp_path / "cron", pg_store.fields())

    cron = ["consolidate", "--config", str(config)]  # cron, on another machine
    assert await asyncio.to_thread(cli_main, cron) == 0
    out = capsys.readouterr().out
    assert "merged 1 daily note(s)" in out and "agent 'helper'" in out
    worker_b = ContextManager(pg_store.config(tmp_path / "b"))
    model_b = FakeChatModel([text("In secret/deploy.")])
    await ask(make_agent(worker_b, model_b), "where is the deploy key?")
    await worker_b.close()

    assert note in prompt_text(model_b.calls[0])  # MEMORY.md, as consolidated elsewhere
    assert await asyncio.to_thread(cli_main, [*cron, "--agent", "helper"]) == 0
    assert "nothing new to merge" in capsys.readouterr().out  # what was merged: in the store
    assert not (tmp_path / "cron").exists() and not (tmp_path / "b" / "memory").exists()


async def test_a_remember_on_another_worker_during_the_model_merge_is_kept(
    tmp_path: Path, pg_store: PgStore
) -> None:
    worker_a = ContextManager(pg_store.config(tmp_path / "a"))
    worker_b = ContextManager(pg_store.config(tmp_path / "b"))
    memory_a, memory_b = worker_a.long_term_of("helper"), worker_b.long_term_of("helper")
    memory_a.log_today("Lesson: pip needs --break-system-packages here")
    meanwhile = "The user works in UTC+8"

    def first_merge(messages: object) -> str:  # the other worker remembers meanwhile
        memory_b.remember(meanwhile)
        return "# Long-term memory\n\n- Lesson: pip needs --break-system-packages here"

    model = FakeChatModel(
        [
            first_merge,
            f"# Long-term memory\n\n- {meanwhile}\n"
            "- Lesson: pip needs --break-system-packages here",
        ]
    )
    report = await consolidate(memory_a.store, model=model, formatter=FORMATTER)
    body = memory_b.store.read("MEMORY.md")
    await worker_a.close()
    await worker_b.close()

    assert len(model.calls) == 2  # the swap failed once: merged again from what it held
    assert meanwhile in prompt_text(model.calls[1])
    assert report.source == "model" and report.changed
    assert f"- {meanwhile}" in body and "- Lesson: pip needs --break-system-packages" in body
    assert "## Change log" in body


async def test_one_consolidation_at_a_time_across_workers(
    tmp_path: Path, pg_store: PgStore
) -> None:
    worker_a = ContextManager(pg_store.config(tmp_path / "a"))
    worker_b = ContextManager(pg_store.config(tmp_path / "b"))
    worker_a.long_term_of("helper").log_today("Fact: the CI runs on two cores")
    with worker_a.long_term_of("helper").store.consolidation_lock() as held:
        assert held
        report = await consolidate(worker_b.long_term_of("helper").store)
        other = await consolidate(worker_b.long_term_of("other").store)  # its own lock
    assert report.skipped and report.reason == "another consolidation is running"
    assert not other.skipped
    report = await consolidate(worker_b.long_term_of("helper").store)  # released
    assert report.notes and report.added == 1
    await worker_a.close()
    await worker_b.close()


def test_the_summarizer_on_the_fleet_store_only_appends_to_todays_note(
    tmp_path: Path, pg_store: PgStore
) -> None:
    manager = ContextManager(pg_store.config(tmp_path / "a"))
    store = manager.long_term_of("helper").store
    manager.long_term_of("helper").remember("The user prefers pytest")
    files = MemoryFiles(store, TODAY)
    refused = [
        files.write_memory_file("MEMORY.md", "- Fact: injected"),
        files.write_memory_file("2026-03-13.md", "- Fact: yesterday"),
        files.write_memory_file("../2026-03-14.md", "- Fact: escaped"),
        files.write_memory_file("/etc/2026-03-14.md", "- Fact: escaped"),
        files.read_memory_file(".consolidate.json"),
    ]
    wrote = files.write_memory_file("2026-03-14.md", "- Fact: the user is Ana\n- Fact: x")
    again = files.write_memory_file("pg-memory:2026-03-14.md", "- Fact: the user is Ana")
    shown = files.read_memory_file("MEMORY.md")

    assert all(said(answer).startswith("Error:") for answer in refused)
    assert said(wrote) == "Appended 2 line(s) to 2026-03-14.md."
    assert said(again).startswith("Nothing appended")
    assert "- The user prefers pytest" in said(shown)
    assert "injected" not in store.read("MEMORY.md")
    assert store.names() == ["2026-03-14.md", "MEMORY.md"]
    assert store.read("2026-03-14.md") == "# 2026-03-14\n\n- Fact: the user is Ana\n- Fact: x\n"
    manager.backend.close()


def test_a_version_1_database_gains_the_memory_table(tmp_path: Path, pg_store: PgStore) -> None:
    config = pg_store.config(tmp_path / "a")
    stores = open_stores(config, agent="helper")
    ref = stores.outputs.save("kept across the upgrade\n")
    engine = stores.outputs.engine  # the version-1 database: no memory table, version 1
    with engine.connection() as conn:
        conn.execute(f"DROP TABLE {pg_store.schema}.memory_docs")
        conn.execute(f"UPDATE {pg_store.schema}.schema_version SET version = 1")
    stores.close()

    manager = ContextManager(config)  # a worker of the new version
    answer = manager.long_term_of("helper").remember("The user prefers pytest")
    with engine.connection() as conn:
        versions = conn.execute(f"SELECT version FROM {pg_store.schema}.schema_version").fetchall()

    assert said(answer) == "Saved to pg-memory:MEMORY.md."
    assert sorted(row[0] for row in versions) == [1, SCHEMA_VERSION]
    saved = manager.store.read_saved(str(ref))
    assert saved is not None and b"".join(saved) == b"kept across the upgrade\n"
    manager.backend.close()


async def test_search_history_finds_the_agents_memory_on_every_worker(
    tmp_path: Path, pg_store: PgStore
) -> None:
    # memory is searched at the agent-wide scope (docs/tenants.md): the default, a session's
    # own records, shows it in the prompt but leaves it out of search_history
    agent_wide = {"recall": {"scope": "agent"}}
    worker_a = ContextManager(pg_store.config(tmp_path / "a", **agent_wide))
    worker_a.long_term_of("helper").remember("The staging database is called quokka")
    worker_a.long_term_of("helper").log_today("Lesson: quokka needs sslmode=require")
    worker_a.long_term_of("stranger").remember("The stranger's quokka is private")
    worker_b = ContextManager(pg_store.config(tmp_path / "b", **agent_wide))
    model = FakeChatModel([tool_call("search_history", query="quokka"), text("Found it.")])
    await ask(make_agent(worker_b, model), "what was the staging database called?")
    worker_b.search_index.rebuild()  # the index is a cache: memory comes back with the rest
    again = worker_b.search_index.search("sslmode", Filters(agent="helper"))
    await worker_a.close()
    await worker_b.close()

    found = prompt_text(model.calls[1])
    assert "The staging database is called quokka" in found
    assert "quokka needs sslmode=require" in found and "long-term memory" in found
    assert "private" not in found  # another agent's memory
    assert [hit.kind for hit in again.hits] == ["memory"]
    assert str(again.hits[0].path) == f"pg-memory:{date.today().isoformat()}.md"


# -- the Summarizer, and the two stores alike ---------------------------------------------------


async def test_the_summarizer_of_a_fleet_worker_writes_the_agents_memory(
    tmp_path: Path, pg_store: PgStore
) -> None:
    today = f"{date.today().isoformat()}.md"
    model = FakeChatModel(
        [
            tool_call("write_memory_file", file_path=today, content="- Fact: the user is Ana"),
            tool_call("write_memory_file", file_path="MEMORY.md", content="- Fact: injected"),
            text("Recorded one fact."),
        ]
    )
    config = pg_store.config(tmp_path / "a", summarizer={"min_batch_tokens": 0})
    worker = ContextManager(config, model=model, formatter=FORMATTER)
    await worker.start_summarizer([Msg("user", "I am Ana, call me that", "user")], "helper")
    await worker.close()  # waits for the background run
    reader = ContextManager(pg_store.config(tmp_path / "b"))
    store = reader.long_term_of("helper").store

    assert store.read(today).endswith("- Fact: the user is Ana\n")
    assert store.read("MEMORY.md") == ""  # confined: the Summarizer never writes MEMORY.md
    assert reader.long_term_of("other").store.names() == []
    assert not (tmp_path / "a" / "memory").exists()
    reader.backend.close()


FACTS = st.lists(
    st.tuples(
        st.sampled_from(["remember", "log_today"]),
        st.sampled_from(["pytest", "- Pytest ", "uv  run", "UV RUN", "1. tabs", "", "ü 中文"]),
    ),
    max_size=8,
)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=FACTS)
def test_the_fleet_memory_holds_what_the_local_one_holds(
    tmp_path: Path, pg_store: PgStore, calls: Any
) -> None:
    """Whatever the calls, the database's documents are the files' bytes: the fleet memory is
    the local one on another medium (same dedup, same headers, same answers)."""
    working_dir = Path(tempfile.mkdtemp(dir=tmp_path))
    local = LongTermMemory(working_dir)
    manager = ContextManager(pg_store.config(working_dir))
    fleet = manager.long_term_of(f"agent-{working_dir.name}")
    for tool, fact in calls:
        answers = [said(getattr(memory, tool)(fact)) for memory in (local, fleet)]
        if answers[0] != answers[1]:  # they name their documents differently, nothing else
            assert answers[0].replace(str(local.memory_dir) + "/", "pg-memory:") == answers[1]
    files = sorted(p.name for p in (working_dir / "memory").glob("*.md")) if calls else []
    assert fleet.store.names() == [n for n in files if local.store.read(n)]
    for name in files:
        assert fleet.store.read(name) == (working_dir / "memory" / name).read_text()
    manager.backend.close()


async def test_the_daily_job_of_a_fleet_worker_consolidates_each_agents_memory(
    tmp_path: Path, pg_store: PgStore
) -> None:
    config = pg_store.config(tmp_path / "a", consolidation={"enabled": True})
    worker = ContextManager(config)
    for agent in ("helper", "other"):
        worker.long_term_of(agent).log_today(f"Fact: {agent} runs nightly")
    worker.ensure_scheduler()  # its task first runs at our next await: with this clock
    job = worker.scheduler
    assert job is not None
    job.next_run = lambda now: now + timedelta(milliseconds=10)  # type: ignore[method-assign]
    bodies: list[str] = []
    for _ in range(500):
        bodies = [worker.long_term_of(a).store.read("MEMORY.md") for a in ("helper", "other")]
        if all(bodies):
            break
        await asyncio.sleep(0.01)
    await worker.close()

    assert "- Fact: helper runs nightly" in bodies[0] and "other" not in bodies[0]
    assert "- Fact: other runs nightly" in bodies[1]


async def test_a_remember_waiting_for_another_workers_row_lock_leaves_the_event_loop_free(
    tmp_path: Path, pg_store: PgStore
) -> None:
    worker = ContextManager(pg_store.config(tmp_path / "a"))
    memory = worker.long_term_of("helper")
    memory.remember("The user prefers pytest")  # the row exists
    other = ContextManager(pg_store.config(tmp_path / "b"))
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:  # another worker in the middle of its write of MEMORY.md
        with other.backend.search.engine.connection() as conn, conn.transaction():
            conn.execute(
                f"SELECT 1 FROM {pg_store.schema}.memory_docs "
                "WHERE agent = 'helper' AND name = 'MEMORY.md' FOR UPDATE"
            )
            locked.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert locked.wait(30)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    remember = memory.tool_functions()[0]  # what the agent's toolkit calls
    timer = threading.Timer(0.3, release.set)
    timer.start()
    running = asyncio.create_task(ticker())
    answer = remember(fact="The user works in UTC+8")  # 1.x and 2.x await an awaitable
    if inspect.isawaitable(answer):
        answer = await answer
    seen, waited = ticks, release.is_set()
    running.cancel()
    holder.join()
    await worker.close()
    await other.close()

    assert said(answer) == "Saved to pg-memory:MEMORY.md."
    assert waited  # it did wait for the other worker's lock
    assert seen > 0  # and the event loop ran meanwhile (other agents, other sessions)
