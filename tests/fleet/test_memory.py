"""Long-term memory on the fleet store (issue 28 item 3): with ``store.kind: postgres``,
MEMORY.md and the daily notes are rows of the database, one memory per agent name, so that
every worker's agent of that name reads and writes the same memory (a private PostgreSQL
server, see `conftest`). Workers here have working dirs of their own, as on separate
machines: nothing of the memory is on their disks."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from agentscope_ctx import ContextConfig, ContextManager
from tests.fleet.memory_agents import FakeChatModel, ask, make_agent, prompt_text, text, tool_call
from tests.fleet.postgres_server import PostgresServer
from tests.fleet.remember_worker import worker


def fleet_config(working_dir: Path, server: PostgresServer, schema: str) -> ContextConfig:
    return ContextConfig(
        working_dir=working_dir,
        store={
            "kind": "postgres",
            "dsn": server.dsn,
            "password_env": "AGENTSCOPE_CTX_TEST_PGPASSWORD",
            "schema_name": schema,
        },
    )


async def test_what_an_agent_remembers_on_one_worker_its_namesake_reads_on_another(
    tmp_path: Path, pg_server: PostgresServer, pg_password: str, pg_schema: str
) -> None:
    worker_a = ContextManager(fleet_config(tmp_path / "a", pg_server, pg_schema))
    worker_b = ContextManager(fleet_config(tmp_path / "b", pg_server, pg_schema))
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
    for worker in ("a", "b"):  # nothing of the memory on either worker's disk
        assert not (tmp_path / worker / "memory").exists()


# -- no lost `remember` between workers ---------------------------------------------------------


def _remember_on_two_workers(
    tmp_path: Path, server: PostgresServer, schema: str, count: int
) -> None:
    go = tmp_path / "go"
    context = multiprocessing.get_context("fork")  # starts at once: AgentScope is imported
    results = context.Queue()
    procs = [
        context.Process(
            target=worker,
            args=(fleet_config(tmp_path / name, server, schema), go, name, count, results),
        )
        for name in ("alpha", "beta")
    ]
    for proc in procs:
        proc.start()
    assert [results.get(timeout=120) for _ in procs] == ["READY"] * 2  # they start together
    go.touch()
    reports = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0  # a failure's traceback is in the captured stderr
    assert reports == [{"saved": count, "other": []}] * 2
    reader = ContextManager(fleet_config(tmp_path / "reader", server, schema))
    body = reader.long_term_of("helper").store.read("MEMORY.md")
    facts = [line for line in body.splitlines() if " fact " in line]
    expected = {f"- {name} fact {i}" for name in ("alpha", "beta") for i in range(count)}
    assert len(facts) == 2 * count and set(facts) == expected
    assert not (tmp_path / "alpha" / "memory").exists()


def test_remember_on_two_workers_keeps_every_fact(
    tmp_path: Path, pg_server: PostgresServer, pg_password: str, pg_schema: str
) -> None:
    _remember_on_two_workers(tmp_path, pg_server, pg_schema, 60)


@pytest.mark.slow
def test_remember_on_two_workers_keeps_600_facts(
    tmp_path: Path, pg_server: PostgresServer, pg_password: str, pg_schema: str
) -> None:
    _remember_on_two_workers(tmp_path, pg_server, pg_schema, 300)
