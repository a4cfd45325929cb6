"""Retention beside a live session (issue 47): the background task (with the hourly cleanup
of saved outputs) deletes what is past its age, spares what the live context points to,
leaves one audit line, and the session reads on as before: the output it points to reads
whole, a deleted one answers that retention deleted it, and its prompts keep their budget."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agentscope_ctx import ContextConfig
from agentscope_ctx.recall._read_file import ReadFileError
from agentscope_ctx.services._cleanup import forget
from agentscope_ctx.stores._audit import AuditFile
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._tool_results import ToolResultStore
from tests.support.agent_line import Line
from tests.support.lines import Msg

BIG = "".join(f"line {n} of the quokka log\n" for n in range(400))


async def test_the_background_task_spares_the_live_context(tmp_path: Path, line: Line) -> None:
    wd = tmp_path / "w"
    config = ContextConfig(
        working_dir=wd,
        max_input_tokens=8_000,
        summarizer={"enabled": False},
        tool_result={"recent_max_bytes": 2_048, "old_max_bytes": 1_024},
        retention={"dialog_days": 1, "outputs_days": 7},
    )
    old = Msg("user", "the numbat question of long ago", "user")
    old.timestamp = "2020-01-01 10:00:00.000"
    await DialogStore(wd, record_fields={"agent": "coder", "session": ""}).append([old])
    stale = ToolResultStore(wd, 7, owner=("coder", "")).save("an unused old output\n")
    day_bytes = (wd / "dialog" / "2020-01-01.jsonl").stat().st_size
    session = line.session(config, line.fake_model(default="ok"), {"cat": lambda arg: BIG})
    await session.turn("show the log", line.tool_call("cat", arg="log"), line.text("seen"))
    [live] = [p for p in (wd / "tool_result").glob("*.txt") if p != stale]
    long_ago = time.time() - 30 * 86_400
    for path in (live, stale):  # both past 7 days; the live context points to one
        os.utime(path, (long_ago, long_ago))

    forget()  # the hourly cleanup is due: it runs at the next pipeline run
    await session.turn("and now?", line.text("still here"))

    assert live.exists() and not stale.exists()
    assert not (wd / "dialog" / "2020-01-01.jsonl").exists()
    lines = AuditFile(wd).read()  # a line per run that deleted something (the first turn's:
    assert lines and all(a["who"].startswith("task:") for a in lines)  # the old day)
    assert all(a["action"] == "retention" for a in lines)
    assert sum(a["counts"]["dialog"] for a in lines) == 1
    assert sum(a["counts"]["outputs"] for a in lines) == 1
    assert sum(a["bytes"] for a in lines) == day_bytes + len("an unused old output\n")
    reader = session.manager.reader_for("coder")
    assert (await reader.read_text(str(live))).startswith("line 0 of the quokka log\n")
    with pytest.raises(ReadFileError, match="was deleted by retention on"):
        reader.read_now(str(stale))
    assert "line 0 of the quokka log" in session.prompt()  # the context as it was
    usage = await session.manager.context_usage(session.agent)
    assert usage.calibrated_total <= config.max_input_tokens
    await session.close()
