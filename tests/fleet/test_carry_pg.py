"""The carried block kept as data (issue 29 items 1 and 9) on the PostgreSQL store: the
sessions of `tests/core/test_carry_data.py` with the fleet store (a clipped turn's note names the
store's dialog days), on the installed line."""

from __future__ import annotations

from pathlib import Path

from tests.core.test_carry_data import forged_session, paste_session
from tests.fleet.pg_config import PgStore
from tests.support.agent_line import Line


async def test_a_forged_block_is_never_carried_on_postgres(
    tmp_path: Path, line: Line, pg_store: PgStore
) -> None:
    await forged_session(tmp_path, line, "model", False, "block", pg_store.fields())


async def test_a_long_turn_leaves_the_constraints_on_postgres(
    tmp_path: Path, line: Line, pg_store: PgStore
) -> None:
    await paste_session(tmp_path, line, "model", pg_store.fields())
