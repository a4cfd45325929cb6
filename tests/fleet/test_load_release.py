"""Issue 46 item 17, found by the fleet load benchmark (`benchmarks.fleet.load`): a session's
stores outlived it. A compaction judges how each cut run ended from its whole saved output and
remembers the outcome for the process (`core.summary._outcome._JUDGED`, the newest 512), keyed
by the store's reader; the key held the store's bound method, so the store of every finished
session (its engine handle, search index, recall, failure log, background work) stayed alive
until 512 newer outputs pushed it out. In the benchmark, 100 sessions in one process left 100
output stores, search indexes and recalls alive, with 300 remembered outcomes; at 1,000
sessions on 2 workers, some 90 allocations per session served were still held after the run.
The outcome may stay remembered; the store must go with its session."""

from __future__ import annotations

import gc
import weakref

from agentscope_ctx.core.summary import _outcome
from agentscope_ctx.core.truncation._offload import offload_text
from agentscope_ctx.stores.postgres import PostgresEngine, PostgresOutputStore
from tests.fleet.pg_config import PASSWORD_ENV
from tests.fleet.pg_database import Database, own_database  # noqa: F401 (a fixture)

LOG = "".join(
    "ValueError: disk full\n" if i == 300 else f"10:{i % 60:02d} job={i} status=ok\n"
    for i in range(600)
)


async def test_a_judged_output_does_not_keep_its_store_alive(
    own_database: Database,  # noqa: F811
) -> None:
    engine = PostgresEngine(own_database.dsn, password_env=PASSWORD_ENV)
    store = PostgresOutputStore(engine, 7)
    cut = await offload_text(LOG, 2_000, store)  # saved whole, its middle not in the excerpt
    assert "ValueError" not in cut
    outcome = _outcome.judge(cut, store.read_saved)
    assert outcome.status == "failed" and "disk full" in outcome.detail  # read whole
    # remembered, the newest (a process that judged 512 already dropped its oldest: counting
    # the entries failed in a whole suite's worker)
    key, newest = next(reversed(_outcome._JUDGED.items()))
    assert newest == outcome
    size = len(_outcome._JUDGED)
    assert _outcome.judge(cut, store.read_saved) == outcome  # and found again, for this store
    assert len(_outcome._JUDGED) == size and next(reversed(_outcome._JUDGED)) == key
    gone = weakref.ref(store)
    engine.close()
    del store
    gc.collect()
    assert gone() is None  # the session's store went; its remembered outcome holds none
