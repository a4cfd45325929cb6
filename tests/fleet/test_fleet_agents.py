"""Issue 23 end to end, on the installed line (the `line` fixture: a 1.x `ReActAgent` or a 2.x
`Agent`): an agent whose manager is configured with ``store: {kind: postgres}`` works through
a session whose big outputs are cut and whose older messages are compacted; then a SECOND
manager and agent, on another working dir (another worker: it shares nothing with the first
but the database), reads every notice of the first agent's last prompt back byte for byte,
finds the first agent's outputs and words with `search_history`, and reads the day the
summary's guide points to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentscope.message import TextBlock

from agentscope_ctx import ContextConfig
from agentscope_ctx.core.truncation._truncation import parse_notice
from tests.fleet.pg_config import PgStore
from tests.support.agent_line import Line, Session
from tests.support.chain import follow_chain
from tests.support.lines import requires_1x, text_of

TURNS, STEPS = 5, 2
"""Worker A's session: `TURNS` user turns, each reading `STEPS` logs."""


def log(n: int) -> str:
    lines = [
        f"2026-12-03 10:{i % 60:02d} worker-{n} job={i} status=ok 用户 {i}\n" for i in range(300)
    ]
    lines[250] = f"2026-12-03 11:00 worker-{n} ERROR fluxgate{n} overheated at 97C\n"
    return "".join(lines)


def config(work: Path, pg_store: PgStore, budget: int) -> ContextConfig:
    return ContextConfig.model_validate(
        {
            "working_dir": str(work),
            "max_input_tokens": budget,
            "read_roots": [str(work)],
            # no masking, no share cap: the older steps must be compacted away
            "tool_result": {
                "recent_max_bytes": 5_000,
                "old_max_bytes": 1_200,
                "mask_after": None,
                "recent_max_share": None,
            },
            "summarizer": {"enabled": False},
            "store": pg_store.fields(),
        }
    )


def tool_texts(session: Session) -> dict[str, str]:
    """The tool results of the last prompt `session`'s model received (OpenAI-formatted on
    both lines), by call id."""
    out = {}
    for message in json.loads(session.prompt()):
        if message.get("role") == "tool":
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(str(part.get("text", "")) for part in content)
            out[str(message.get("tool_call_id"))] = str(content)
    return out


def step(line: Line, n: int) -> Any:
    """Say why (text that only the dialog holds once compacted), then read log n."""
    response = line.tool_call("cat", f"c{n}", arg=f"log{n}.txt")
    response.content.insert(
        0, TextBlock(type="text", text=f"Reading log {n} for the periwinkle{n} audit.")
    )
    return response


def pointer(answer: str, prefix: str) -> tuple[str, int, int]:
    """The first ``read on:`` pointer of a search answer naming a ref with `prefix`."""
    for row in answer.splitlines():
        row = row.strip()
        if row.startswith("read on: read_file file_path=" + prefix):
            fields: dict[str, Any] = dict(
                item.split("=", 1) for item in row.removeprefix("read on: read_file ").split()
            )
            return fields["file_path"], int(fields["start_line"]), int(fields.get("line_offset", 0))
    raise AssertionError(f"no {prefix} pointer in {answer!r}")


async def test_a_second_worker_reads_and_finds_what_the_first_saved_in_postgres(
    tmp_path: Path, line: Line, pg_store: PgStore
) -> None:
    logs = {f"log{n}.txt": log(n) for n in range(TURNS * STEPS)}

    # -- worker A: reads every log in a 5k budget: outputs cut, older messages compacted
    helper_a = line.fake_model(default="## Goal\n- read logs")
    a = line.session(config(tmp_path / "a", pg_store, 5_000), helper_a, {"cat": logs.__getitem__})
    for turn in range(TURNS):
        steps = [step(line, turn * STEPS + k) for k in range(STEPS)]
        await a.turn(f"Read logs {turn * STEPS} on.", *steps, f"report {turn} read: marigold{turn}")
    await a.close()

    prompt = a.prompt()
    notices = {k: v for k, v in tool_texts(a).items() if parse_notice(v) is not None}
    assert notices, "the big outputs were cut"
    refs = {parse_notice(v)[1].file_path for v in notices.values()}  # type: ignore[index]
    assert all(ref.startswith("pg-output:") for ref in refs), refs
    assert not (tmp_path / "a" / "tool_result").exists()  # nothing went to A's disk
    assert not (tmp_path / "a" / "dialog").exists()
    assert a.manager.dialog.ids(), "compaction moved the older messages to the database"
    assert "pg-dialog:YYYY-MM-DD" in prompt, "the summary's guide names the database's days"

    # -- worker B: another manager and agent, another working dir, the same database
    helper_b = line.fake_model(default="## Goal\n- answer")
    b = line.session(config(tmp_path / "b", pg_store, 60_000), helper_b, {})

    async def read(path: str, start: int, offset: int) -> str:
        return text_of(await b.manager.reader.read_file(path, start, offset))

    for output in notices.values():  # every notice in A's prompt, byte for byte, from B
        assert await follow_chain(output, read) in logs.values()

    day = b.manager.dialog.days()[-1]
    ref = sorted(refs)[0]
    await b.turn(
        "Which fluxgate overheated in log 3?",
        line.tool_call("read_file", "r1", file_path=ref, start_line=1),
        line.tool_call("search_history", "s1", query="fluxgate3 overheated"),
        line.tool_call("search_history", "s2", query="periwinkle0"),
        line.tool_call("search_history", "s3", query="marigold0"),
        line.tool_call("read_file", "r2", file_path=f"pg-dialog:{day}", start_line=1),
        "Found it.",
    )
    answers = tool_texts(b)
    first = answers["r1"]
    assert any(text.startswith(first.split("\n<<<TRUNCATED>>>")[0]) for text in logs.values())

    found = answers["s1"]
    assert "fluxgate3 overheated" in found and "read_file file_path=pg-output:" in found, found
    shown = await read(*pointer(found, "pg-output:"))  # from the line before the match
    assert "worker-3 ERROR fluxgate3 overheated" in "".join(shown.splitlines(True)[:3]), shown

    for key, words, said in (
        ("s2", "periwinkle0", "Reading log 0 for the periwinkle0 audit."),  # a step's words
        ("s3", "marigold0", "report 0 read: marigold0"),  # a turn's answer
    ):  # the assistant's words: only the dialog holds them
        answer = answers[key]
        assert words in answer and "read_file file_path=pg-dialog:" in answer, answer
        shown = await read(*pointer(answer, "pg-dialog:"))
        assert shown.startswith(said), shown

    assert answers["r2"].startswith('{"v":'), answers["r2"][:200]  # the guide's day: records
    await b.close()


@requires_1x("a ReActAgent's turns after PromptTooLargeError")
async def test_a_1x_session_recovers_after_prompt_too_large_on_postgres(
    tmp_path: Path, pg_store: PgStore
) -> None:
    """Issue 29 item 5 on the fleet store (the session: `tests/test_budget_recover.py`)."""
    from tests.agentscope1.test_budget_recover import recover

    await recover(config(tmp_path, pg_store, 3_000))
