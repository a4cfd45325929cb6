"""`read_file` for one tenant of a shared working dir (DESIGN.md §15): 2.x media and saved
outputs of another tenant read as missing files; a day of the dialog shows the tenant's own
records, the others' lines empty, so that line numbers stay the file's; the 2.x middleware's
tool reads for the agent whose call it is (`CALLER`)."""

from __future__ import annotations

import json
from pathlib import Path

from agentscope_ctx.core._tenant import Tenant, owner_tag
from agentscope_ctx.core.config._config import ToolResultConfig
from agentscope_ctx.recall._read_file import FileReader
from agentscope_ctx.recall._read_scope import CALLER, ReadScope
from agentscope_ctx.stores._tool_results import ToolResultPolicy, ToolResultStore
from tests.support.lines import text_of

ALICE = Tenant.of("assistant", "s-alice")
BOB = Tenant.of("assistant", "s-bob")


def reader(working_dir: Path, tenant: Tenant | None = None) -> FileReader:
    store = (working_dir / "tool_result").resolve()
    return FileReader(
        [working_dir],
        ToolResultPolicy(ToolResultConfig()),
        store_dir=store,
        scope=ReadScope(
            store_dir=store,
            dialog_dir=(working_dir / "dialog").resolve(),
            media_dir=(working_dir / "media").resolve(),
        ),
        tenant=tenant,
    )


def tag_dir(tenant: Tenant) -> str:
    return f"{owner_tag(tenant.agent)}-{owner_tag(tenant.session)}"


async def test_media_of_another_tenant_reads_as_a_missing_file(tmp_path: Path) -> None:
    mine = tmp_path / "media" / tag_dir(ALICE) / "a.svg"
    mine.parent.mkdir(parents=True)
    mine.write_text("<svg>alice's whiteboard</svg>")
    legacy = tmp_path / "media" / "b.svg"  # saved before owners were kept: nobody's
    legacy.write_text("<svg>old</svg>")
    assert "whiteboard" in text_of(await reader(tmp_path, ALICE).read_file(str(mine)))
    bob = reader(tmp_path, BOB)
    for path in (mine, legacy):
        missing = path.with_name("none.svg")
        answer = text_of(await bob.read_file(str(path)))
        assert answer == text_of(await bob.read_file(str(missing))).replace(str(missing), str(path))
        assert "does not exist" in answer
    assert "old" in text_of(await reader(tmp_path).read_file(str(legacy)))  # the operator


async def test_saved_outputs_are_read_by_their_owner_tenant_only(tmp_path: Path) -> None:
    alice = ToolResultStore(tmp_path, 7, owner=(ALICE.agent, ALICE.session))
    path = alice.save("alice's output\n")
    assert "alice's output" in text_of(await reader(tmp_path, ALICE).read_file(str(path)))
    relative = f"tool_result/{path.name}"
    assert text_of(await reader(tmp_path, BOB).read_file(relative)) == (
        f"Error: {relative!r} does not exist"
    )
    every = Tenant.of("assistant", "s-bob", scope="agent")  # all of the agent's sessions
    assert "alice's output" in text_of(await reader(tmp_path, every).read_file(str(path)))


async def test_a_day_shows_the_own_records_on_the_lines_of_the_file(tmp_path: Path) -> None:
    day = tmp_path / "dialog" / "2026-12-02.jsonl"
    day.parent.mkdir()
    lines = [
        {"v": 1, "msg": {"id": str(i), "name": "u", "role": "user", "content": f"text {i}",
                         "metadata": {}, "timestamp": "2026-12-02 10:00:00"},
         "agent": "assistant", "session": "s-alice" if i % 2 else "s-bob"}
        for i in range(6)
    ]  # fmt: skip
    day.write_text("".join(json.dumps(line) + "\n" for line in lines) + "not a record\n")
    answer = text_of(await reader(tmp_path, ALICE).read_file(str(day), start_line=4))
    assert answer.splitlines()[0].startswith('{"v": 1') and '"text 3"' in answer
    assert "text 4" not in answer and "text 2" not in answer and "not a record" not in answer
    whole = text_of(await reader(tmp_path, ALICE).read_file(str(day)))
    assert [bool(line) for line in whole.splitlines()] == [False, True] * 3 + [False]


async def test_the_middlewares_tool_reads_for_the_agent_of_the_call(tmp_path: Path) -> None:
    alice = ToolResultStore(tmp_path, 7, owner=(ALICE.agent, ALICE.session))
    path = str(alice.save("alice's output\n"))
    shared = reader(tmp_path)  # the 2.x middleware's reader: no tenant of its own
    token = CALLER.set(BOB)
    try:
        assert "does not exist" in text_of(await shared.read_file(path))
    finally:
        CALLER.reset(token)
    token = CALLER.set(ALICE)
    try:
        assert "alice's output" in text_of(await shared.read_file(path))
    finally:
        CALLER.reset(token)
