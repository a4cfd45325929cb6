"""The owners of saved outputs kept while the local index was busy belong to the working dir
in the process, not to the handle that kept them (`_search_kept`): the next write of any
handle writes them. Kept by the handle that saved, an owner waited for that handle's next
write, and the output, indexed meanwhile by another handle with no owner, was read again into
the tail of every search of its tenant (the store benchmark's tenant searches at 10k
messages: p50 12-35 ms instead of 0.6-0.7 ms)."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentscope_ctx.core.search._background as background_module
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.search._search_hits import Filters
from agentscope_ctx.stores._search import SearchIndex
from tests.stores.test_search_tail import holding, outputs


@pytest.fixture(autouse=True)
def no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The background indexing runs only when a test runs it (`catch_up`)."""
    monkeypatch.setattr(background_module, "ENABLED", False)


def owners(index: SearchIndex, path: Path) -> set[tuple[str | None, str | None]]:
    return set(
        index.db.run(
            lambda db: db.execute(
                "SELECT agent, session FROM docs WHERE path = ?", (f"tool_result/{path.name}",)
            ).fetchall()
        )
    )


def test_an_owner_one_handle_kept_is_written_by_another(tmp_path: Path) -> None:
    keeper, other = SearchIndex(tmp_path), SearchIndex(tmp_path)  # two sessions' handles
    try:
        other.catch_up()  # the index made
        with holding(tmp_path):  # the owner told while the index is busy: kept
            path = outputs(keeper).save("an okapi output\n")
        assert keeper._kept.pending
        other.catch_up()  # another handle's write (its background step): the output indexed
        assert not keeper._kept.pending and owners(other, path) == {("a", "s1")}
        tenant = Filters(tenant=Tenant.of("a", "s1", scope="session"))
        for _ in range(3):
            assert [h.path for h in other.search("okapi", tenant).hits] == [path]
        assert other.search_work.tail_files == 0  # before: read again (claimed) by each search
    finally:
        keeper.close()
        other.close()


def test_handles_of_other_working_dirs_keep_their_own(tmp_path: Path) -> None:
    one, two = SearchIndex(tmp_path / "one"), SearchIndex(tmp_path / "two")
    try:
        one.catch_up()
        with holding(tmp_path / "one"):
            outputs(one).save("an okapi output\n")
        assert one._kept.pending and not two._kept.pending
    finally:
        one.close()
        two.close()
