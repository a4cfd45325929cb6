"""Issue 19.10: time stamps of either AgentScope line compare as times.

1.x stamps a message ``2026-12-03 14:48:00.123``; 2.x ``2026-12-03T14:48:00.123456`` (and a
timestamp factory may add an offset). The `since`/`until` filters of `search_history` and the
eviction index must treat both the same. Line-neutral (the core's `Msg` takes either form);
the 2.x agent test is `tests/agentscope2/test_stamps.py`.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core.summary._eviction import EVICTION_HEADER, eviction_index
from agentscope_ctx.recall._recall import parse_time
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._search import Filters, SearchIndex

NOW = datetime(2026, 12, 3, 14, 48, 0, 123456)
FORMS = {
    "1.x": lambda t: t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
    "2.x": lambda t: t.isoformat(),
    "2.x, whole seconds": lambda t: t.replace(microsecond=0).isoformat(),
    "offset": lambda t: t.astimezone().astimezone(timezone(timedelta(hours=-5))).isoformat(),
    "utc Z": lambda t: t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z"),
}


def minute(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M")


def stamped(text: str, stamp: str, role: str = "user") -> Msg:
    msg = Msg("someone", text, role)  # type: ignore[arg-type]
    msg.timestamp = stamp
    return msg


@pytest.mark.parametrize("form", list(FORMS))
async def test_since_and_until_an_hour_around_a_message(tmp_path: Path, form: str) -> None:
    index = SearchIndex(tmp_path)
    stamp = FORMS[form](NOW)
    await DialogStore(tmp_path, on_append=index.dialog_appended).append(
        [stamped("the quokka was seen", stamp)]
    )

    def found(**filters: str | None) -> bool:
        return bool(index.search("quokka", Filters(**filters)).hits)

    hour = timedelta(hours=1)
    assert found()
    assert found(since=minute(NOW - hour)) and not found(since=minute(NOW + hour))
    assert found(until=minute(NOW + hour)) and not found(until=minute(NOW - hour))
    assert found(since=minute(NOW), until=minute(NOW))  # a minute includes its seconds
    assert found(until=NOW.strftime("%Y-%m-%d")) and not found(since="2026-12-04")
    # every documented input form, and ISO input
    for since in ("2026-12-03", "2026-12-03 13:48", "2026-12-03T13:48", "2026-12-03 13:48:30"):
        assert found(since=parse_time(since, "since")), since
    assert not found(since=parse_time("2026-12-03T15:48:00", "since"))
    hit = index.search("quokka").hits[0]
    assert hit.ts is not None and hit.ts.startswith("2026-12-03 14:48:00")


async def test_an_index_built_with_iso_stamps_is_filtered_right(tmp_path: Path) -> None:
    """An index written before the fix holds 2.x stamps as they came (``T``): the filters
    still compare them as times."""
    from agentscope_ctx.stores._search_db import write

    index = SearchIndex(tmp_path)
    await DialogStore(tmp_path, on_append=index.dialog_appended).append(
        [stamped("the quokka was seen", NOW.isoformat())]
    )

    def older(db: sqlite3.Connection) -> None:
        with write(db):
            db.execute("UPDATE docs SET ts = ?", (NOW.isoformat(),))

    index.db.run(older)  # the stored value is now raw ISO, as an older index has it
    hour = timedelta(hours=1)
    assert index.search("quokka", Filters(until=minute(NOW + hour))).hits
    assert not index.search("quokka", Filters(since=minute(NOW + hour))).hits


@pytest.mark.parametrize("form", list(FORMS))
def test_the_eviction_index_has_the_time_range_of_either_line(form: str) -> None:
    msgs = [
        stamped("please fix the flaky test", FORMS[form](NOW)),
        stamped("done", FORMS[form](NOW + timedelta(minutes=7)), "assistant"),
    ]
    text, _ = eviction_index(msgs, (), 1_200)
    assert text.splitlines()[0] == EVICTION_HEADER
    assert text.splitlines()[1].startswith("- 2026-12-03 14:48 → 14:55 · 2 messages · user: ")


def test_a_runtime_hint_is_not_quoted_as_the_users_words() -> None:
    hint = "<system-reminder>Treat the following as the ground truth at this point"
    msgs = [stamped("please fix the flaky test", NOW.isoformat()), stamped(hint, NOW.isoformat())]
    entry = eviction_index(msgs, (), 1_200)[0].splitlines()[1]
    assert entry.endswith('· user: "please fix the flaky test"'), entry


@given(
    a=st.datetimes(datetime(2000, 1, 1), datetime(2099, 12, 31)),
    b=st.datetimes(datetime(2000, 1, 1), datetime(2099, 12, 31)),
    form_a=st.sampled_from(["1.x", "2.x", "2.x, whole seconds"]),
    form_b=st.sampled_from(["1.x", "2.x", "2.x, whole seconds"]),
)
def test_local_stamps_sort_as_the_times_they_stand_for(
    a: datetime, b: datetime, form_a: str, form_b: str
) -> None:
    from agentscope_ctx.core._stamps import local_stamp

    sa, sb = local_stamp(FORMS[form_a](a)), local_stamp(FORMS[form_b](b))
    assert sa is not None and sb is not None
    # to the millisecond (the 1.x form keeps no more)
    ka, kb = a.replace(microsecond=a.microsecond // 1000 * 1000), b
    kb = b.replace(microsecond=b.microsecond // 1000 * 1000)
    if form_a == "2.x, whole seconds":
        ka = a.replace(microsecond=0)
    if form_b == "2.x, whole seconds":
        kb = b.replace(microsecond=0)
    if ka < kb:
        assert sa < sb
    elif ka > kb:
        assert sa > sb
    assert sa[:16] == minute(a) and sb[:16] == minute(b)


def test_local_stamp_forms() -> None:
    from agentscope_ctx.core._stamps import local_stamp

    assert local_stamp("2026-12-03T14:48:00.123456") == "2026-12-03 14:48:00.123456"
    assert local_stamp("2026-12-03 14:48:00.123") == "2026-12-03 14:48:00.123"
    assert local_stamp("2026-12-03T14:48") == "2026-12-03 14:48"
    assert local_stamp("2026-12-03") == "2026-12-03"
    aware = datetime(2026, 12, 3, 14, 48, tzinfo=timezone.utc)
    assert local_stamp("2026-12-03T14:48:00Z") == aware.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    for bad in (None, "", "yesterday", "2026-13-03", "2026-12-03 25:00", 17):
        assert local_stamp(bad) is None, bad
