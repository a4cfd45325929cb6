"""Long-term memory: the main agent's tools, the daily consolidation and its scheduler."""

from __future__ import annotations

import asyncio
import fcntl
import time
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("long-term memory tools and consolidation run as 1.x agents"),
        allow_module_level=True,
    )

from agentscope.formatter import OpenAIChatFormatter
from agentscope.tool import Toolkit

from agentscope_ctx.core.config._config import ConsolidationConfig
from agentscope_ctx.core.tokens._tokens import TokenCounter
from agentscope_ctx.memory._consolidation import ConsolidationReport, consolidate
from agentscope_ctx.memory._long_term import LongTermMemory
from agentscope_ctx.memory._schedule import ConsolidationScheduler
from tests.memory.test_summarizer import reply_text
from tests.support.agent_line import said
from tests.support.fakes import FakeChatModel, hang

NOW = datetime(2026, 3, 14, 0, 0, 5)


def write_note(tmp_path: Path, day: str, text: str) -> None:
    memory_dir = tmp_path / "memory"
    memory_dir.mkdir(exist_ok=True)
    (memory_dir / f"{day}.md").write_text(f"# {day}\n\n{text}\n", encoding="utf-8")


def memory_md(tmp_path: Path) -> str:
    return (tmp_path / "memory" / "MEMORY.md").read_text(encoding="utf-8")


# -- the main agent's tools ----------------------------------------------------------------


def test_remember_appends_bullets_without_duplicates(tmp_path: Path) -> None:
    memory = LongTermMemory(tmp_path)
    assert reply_text(memory.remember("The user prefers pytest")).startswith("Saved to")
    memory.remember("Deploys go through `make release`")
    assert reply_text(memory.remember("- the user  prefers pytest")).startswith("Already")
    assert reply_text(memory.remember("  ")).startswith("Error")
    assert memory_md(tmp_path) == (
        "# Long-term memory\n- The user prefers pytest\n- Deploys go through `make release`\n"
    )


def test_remember_inserts_above_the_change_log(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "MEMORY.md").write_text(
        "# Long-term memory\n\n- old fact\n\n## Change log\n- 2026-03-01: merged 1 notes from x\n"
    )
    LongTermMemory(tmp_path).remember("new fact")
    assert memory_md(tmp_path) == (
        "# Long-term memory\n\n- old fact\n- new fact\n\n"
        "## Change log\n- 2026-03-01: merged 1 notes from x\n"
    )


def test_log_today_appends_to_the_daily_file(tmp_path: Path) -> None:
    memory = LongTermMemory(tmp_path)
    memory.log_today("Fixed the CR bug in parse_header")
    memory.log_today("Ran the suite\nall green")
    assert reply_text(memory.log_today("fixed the CR bug in parse_header")).startswith("Already")
    path = tmp_path / "memory" / f"{date.today().isoformat()}.md"
    assert memory.daily_path() == path
    assert path.read_text() == (
        f"# {path.stem}\n\n- Fixed the CR bug in parse_header\n- Ran the suite\n- all green\n"
    )


def test_tools_register_with_documented_schemas(tmp_path: Path) -> None:
    memory, toolkit = LongTermMemory(tmp_path), Toolkit()
    toolkit.register_tool_function(memory.remember)
    toolkit.register_tool_function(memory.log_today)
    schemas = {s["function"]["name"]: s["function"] for s in toolkit.get_json_schemas()}
    assert set(schemas) == {"remember", "log_today"}
    remember = schemas["remember"]
    assert remember["description"].startswith("Save a durable fact")
    assert remember["parameters"]["required"] == ["fact"]
    assert "self-contained" in remember["parameters"]["properties"]["fact"]["description"]
    assert schemas["log_today"]["parameters"]["properties"]["note"]["type"] == "string"


async def test_memory_prompt_caps_to_max_tokens(tmp_path: Path) -> None:
    counter, memory = TokenCounter("cl100k_base"), LongTermMemory(tmp_path)
    assert await memory.memory_prompt(counter, 500) is None  # no file yet
    for i in range(100):
        memory.remember(f"fact number {i}: " + "detail " * 5)
    body = memory_md(tmp_path).rstrip("\n")
    (tmp_path / "memory" / "MEMORY.md").write_text(body + "\n\n## Change log\n- 2026: merged\n")

    assert await memory.memory_prompt(counter, 100_000) == body  # the change log left out
    cut = await memory.memory_prompt(counter, 300)
    assert cut is not None and await counter.count_text(cut) <= 300
    assert cut.startswith("# Long-term memory\n- fact number 0:")  # the head is kept
    assert cut.endswith(f"lines shown; read {tmp_path / 'memory' / 'MEMORY.md'} for the rest]")
    assert "fact number 99" not in cut
    assert await memory.memory_prompt(counter, 0) is None
    assert await memory.memory_prompt(counter, 5) is None  # not even the note fits


# -- consolidation ---------------------------------------------------------------------------


async def test_extractive_consolidation_merges_recent_notes_once(tmp_path: Path) -> None:
    LongTermMemory(tmp_path).remember("The user prefers pytest")
    write_note(tmp_path, "2026-03-01", "- Fact: too old to merge")
    write_note(tmp_path, "2026-03-12", "- Preference: the user prefers pytest\n- Fact: uses uv")
    write_note(tmp_path, "2026-03-13", "- Lesson: CRLF broke parse_header; fixed by rstrip")
    write_note(tmp_path, "2026-03-14", "- Fact: uses uv\n- Fact: deploys on Fridays")

    report = await consolidate(tmp_path, now=NOW, days=7)

    assert report == ConsolidationReport(
        skipped=False,
        notes=("2026-03-12", "2026-03-13", "2026-03-14"),
        added=4,
        changed=True,
        source="extractive",
    )
    assert memory_md(tmp_path) == (
        "# Long-term memory\n"
        "- The user prefers pytest\n"
        "- Preference: the user prefers pytest\n"
        "- Fact: uses uv\n"
        "- Lesson: CRLF broke parse_header; fixed by rstrip\n"
        "- Fact: deploys on Fridays\n"
        "\n## Change log\n"
        "- 2026-03-14: merged 3 notes from 2026-03-12, 2026-03-13, 2026-03-14 (extractive)\n"
    )

    # Idempotent: the same notes again change nothing, not even the change log.
    before = memory_md(tmp_path)
    again = await consolidate(tmp_path, now=NOW + timedelta(hours=1), days=7)
    assert again == ConsolidationReport(False, (), 0, False, "none")
    assert memory_md(tmp_path) == before

    # A note that grew since: only its new line is merged.
    write_note(tmp_path, "2026-03-14", "- Fact: uses uv\n- Fact: deploys on Fridays\n- Fact: new")
    third = await consolidate(tmp_path, now=NOW + timedelta(days=1), days=7)
    assert third.notes == ("2026-03-14",) and third.added == 1
    text = memory_md(tmp_path)
    assert text.count("- Fact: uses uv") == 1 and "- Fact: new\n\n## Change log" in text
    assert text.endswith("- 2026-03-15: merged 1 notes from 2026-03-14 (extractive)\n")


async def test_a_changed_note_with_nothing_new_is_not_logged(tmp_path: Path) -> None:
    write_note(tmp_path, "2026-03-14", "- Fact: uses uv")
    await consolidate(tmp_path, now=NOW)
    write_note(tmp_path, "2026-03-14", "- fact: uses uv")  # same fact, other case
    report = await consolidate(tmp_path, now=NOW)
    assert report.notes == ("2026-03-14",) and not report.changed and report.added == 0
    assert memory_md(tmp_path).count("Change log\n-") == 1


async def test_model_consolidation_rewrites_the_body_and_keeps_the_log(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "MEMORY.md").write_text(
        "# Long-term memory\n- Fact: uses pip\n\n## Change log\n- 2026-03-10: merged 1 notes\n"
    )
    write_note(tmp_path, "2026-03-13", "- Fact: switched from pip to uv")
    new_body = "# Long-term memory\n\n- Fact: uses uv (switched from pip on 2026-03-13)"
    model = FakeChatModel([f"```markdown\n{new_body}\n```"])

    report = await consolidate(tmp_path, model=model, formatter=OpenAIChatFormatter(), now=NOW)

    assert report.source == "model" and report.changed and report.notes == ("2026-03-13",)
    prompt = said(model.calls[0], "user")
    assert "- Fact: uses pip" in prompt and "### 2026-03-13" in prompt
    assert "- Fact: switched from pip to uv" in prompt
    assert memory_md(tmp_path) == (
        f"{new_body}\n\n## Change log\n- 2026-03-10: merged 1 notes\n"
        "- 2026-03-14: merged 1 notes from 2026-03-13 (model)\n"
    )


async def test_model_failure_merges_extractively(tmp_path: Path) -> None:
    write_note(tmp_path, "2026-03-13", "- Fact: uses uv")
    model = FakeChatModel(["I cannot help with that."])
    report = await consolidate(tmp_path, model=model, formatter=OpenAIChatFormatter(), now=NOW)
    assert report.source == "extractive" and report.reason == "the model's answer holds no bullet"
    assert "- Fact: uses uv" in memory_md(tmp_path)


async def test_concurrent_runs_one_is_skipped(tmp_path: Path) -> None:
    write_note(tmp_path, "2026-03-13", "- Fact: uses uv")
    first, second = await asyncio.gather(
        consolidate(tmp_path, now=NOW), consolidate(tmp_path, now=NOW)
    )
    assert not first.skipped and first.changed
    assert second.skipped and second.reason == "another consolidation is running"
    assert memory_md(tmp_path).count("- Fact: uses uv") == 1


async def test_lock_held_by_another_process_skips(tmp_path: Path) -> None:
    write_note(tmp_path, "2026-03-13", "- Fact: uses uv")
    with (tmp_path / "memory" / ".consolidate.lock").open("a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert (await consolidate(tmp_path, now=NOW)).skipped
    assert (await consolidate(tmp_path, now=NOW)).changed  # released: runs


# -- the scheduler ---------------------------------------------------------------------------


def scheduler(at: str = "00:00", tz: str | None = None, **extra: Any) -> ConsolidationScheduler:
    config = ConsolidationConfig(enabled=True, at=at, timezone=tz, **extra)
    return ConsolidationScheduler(config, Path("/nonexistent"))


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("at", "tz", "now", "expected_utc", "wall"),
    [
        # Shanghai (UTC+8): 23:59 local -> midnight a minute later
        ("00:00", "Asia/Shanghai", utc(2026, 3, 1, 15, 59), utc(2026, 3, 1, 16, 0), "00:00"),
        # exactly at the run time -> the next day
        ("00:00", "Asia/Shanghai", utc(2026, 3, 1, 16, 0), utc(2026, 3, 2, 16, 0), "00:00"),
        # Kolkata (UTC+5:30), later the same local day
        ("09:15", "Asia/Kolkata", utc(2026, 6, 1, 1, 0), utc(2026, 6, 1, 3, 45), "09:15"),
        # New York spring forward (2026-03-08): 02:30 does not exist -> 03:30 EDT
        ("02:30", "America/New_York", utc(2026, 3, 8, 5, 0), utc(2026, 3, 8, 7, 30), "03:30"),
        # the day after, back to normal (EDT, UTC-4)
        ("02:30", "America/New_York", utc(2026, 3, 8, 7, 30), utc(2026, 3, 9, 6, 30), "02:30"),
        # New York fall back (2026-11-01): 01:30 happens twice -> the first (EDT)
        ("01:30", "America/New_York", utc(2026, 11, 1, 4, 0), utc(2026, 11, 1, 5, 30), "01:30"),
        # ... and only once: after it, the next run is the following day (EST)
        ("01:30", "America/New_York", utc(2026, 11, 1, 5, 31), utc(2026, 11, 2, 6, 30), "01:30"),
        # London midnight around its spring change (2026-03-29): a 23-hour day
        ("00:00", "Europe/London", utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 0, 0), "00:00"),
        ("00:00", "Europe/London", utc(2026, 3, 29, 0, 0), utc(2026, 3, 29, 23, 0), "00:00"),
        # a `now` in another zone is converted first
        ("08:00", "UTC", datetime(2026, 5, 1, 7, 0, tzinfo=ZoneInfo("Asia/Tokyo")),
         utc(2026, 5, 1, 8, 0), "08:00"),
    ],
)  # fmt: skip
def test_next_run_across_timezones_and_dst(
    at: str, tz: str, now: datetime, expected_utc: datetime, wall: str
) -> None:
    result = scheduler(at, tz).next_run(now)
    # (compared in UTC: PEP 495 makes a repeated wall time unequal to any other zone's value)
    assert result.astimezone(timezone.utc) == expected_utc
    assert result.tzinfo == ZoneInfo(tz) and result.strftime("%H:%M") == wall


@pytest.fixture
def berlin_local(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("berlin_local")
def test_next_run_in_the_local_zone() -> None:
    # Berlin springs forward on 2026-03-29 (CET+1 -> CEST+2); a naive `now` is local time.
    assert scheduler("00:00").next_run(datetime(2026, 3, 28, 23, 0)) == utc(2026, 3, 28, 23, 0)
    assert scheduler("00:00").next_run(datetime(2026, 3, 29, 0, 0)) == utc(2026, 3, 29, 22, 0)
    assert scheduler("06:00").next_run(utc(2026, 7, 1, 5, 0)) == utc(2026, 7, 2, 4, 0)


async def test_start_runs_consolidation_and_stop_cancels(tmp_path: Path) -> None:
    write_note(tmp_path, date.today().isoformat(), "- Fact: scheduled")
    job = ConsolidationScheduler(ConsolidationConfig(enabled=True), tmp_path)
    job.next_run = lambda now: now + timedelta(milliseconds=10)  # type: ignore[method-assign]
    assert job.start() is True
    for _ in range(200):
        if job.last_report is not None:
            break
        await asyncio.sleep(0.01)
    await job.stop()
    assert job.last_report is not None and job.last_report.changed
    assert "- Fact: scheduled" in memory_md(tmp_path)
    await job.stop()  # twice is fine


async def test_start_does_nothing_when_disabled(tmp_path: Path) -> None:
    job = ConsolidationScheduler(ConsolidationConfig(enabled=False), tmp_path)
    assert job.start() is False
    await job.stop()


async def test_unreadable_state_file_merges_again_without_duplicates(tmp_path: Path) -> None:
    write_note(tmp_path, "2026-03-13", "- Fact: uses uv")
    await consolidate(tmp_path, now=NOW)
    (tmp_path / "memory" / ".consolidate.json").write_text("{not json")
    report = await consolidate(tmp_path, now=NOW)
    assert report.notes == ("2026-03-13",) and not report.changed
    assert memory_md(tmp_path).count("- Fact: uses uv") == 1


async def test_consolidation_gives_up_on_a_hanging_model(tmp_path: Path) -> None:
    write_note(tmp_path, "2026-03-13", "- Fact: uses uv")
    model = FakeChatModel(default=hang)
    report = await asyncio.wait_for(  # (the outer limit only turns a hang into a failure)
        consolidate(
            tmp_path,
            model=model,
            formatter=OpenAIChatFormatter(),
            now=NOW,
            timeout_seconds=0.05,
        ),
        10,
    )
    assert (report.source, report.reason) == ("extractive", "model timed out after 0.05 s")
    assert model.calls and "- Fact: uses uv" in memory_md(tmp_path)


async def test_stop_cancels_a_run_waiting_on_a_hanging_model(tmp_path: Path) -> None:
    write_note(tmp_path, date.today().isoformat(), "- Fact: scheduled")
    model = FakeChatModel(default=hang)
    job = ConsolidationScheduler(
        ConsolidationConfig(enabled=True), tmp_path, model=model, formatter=OpenAIChatFormatter()
    )
    job.next_run = lambda now: now + timedelta(milliseconds=10)  # type: ignore[method-assign]
    job.start()
    for _ in range(200):
        if model.calls:
            break
        await asyncio.sleep(0.01)
    assert model.calls  # the run waits on the model
    await asyncio.wait_for(job.stop(), 10)
    assert job.last_report is None and not (tmp_path / "memory" / "MEMORY.md").exists()
