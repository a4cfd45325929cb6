"""The steps record (`services._steps`, what the session viewer and export read) holds every
compaction, not only those run before a model call: `manager.compact` on both lines and, on
1.x, the emergency compaction after a provider's context-length error (2.x records its own
through the middleware's run). Both were left out: the viewer's count of compactions missed
them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentscope_ctx import ContextConfig
from agentscope_ctx.stores._steps_file import read_steps
from tests.support.agent_line import Line


def _dump(arg: str) -> str:
    return "".join(f"build step {n}: compiled module {arg}{n}\n" for n in range(200))


def _records(working_dir: Path) -> list[dict[str, Any]]:
    return [
        record
        for path in sorted((working_dir / "usage" / "steps").rglob("*.jsonl"))
        for record in read_steps(path)
    ]


async def test_a_compaction_asked_for_is_in_the_steps_record(tmp_path: Path, line: Line) -> None:
    config = ContextConfig(
        working_dir=tmp_path / "ctx",
        max_input_tokens=20_000,
        keep_recent_ratio=0.01,
        summarizer={"enabled": False},  # type: ignore[arg-type]
        token_counter="cl100k_base",
    )
    session = line.session(config, None, {"dump": _dump})
    try:
        await session.turn("Build core.", line.tool_call("dump", arg="core"), line.text("built"))
        await session.turn("Anything else?", line.text("no"))
        assert not any(r["compacted"] for r in _records(config.working_dir))
        compacted = await session.compact()
        assert compacted > 0
        await session.turn("Thanks.", line.text("welcome"))
        records = _records(config.working_dir)
        assert [r["compacted"] for r in records if r["compacted"]] == [compacted]
        forced = next(r for r in records if r["compacted"])
        assert forced["call"] is False and forced["summary"]
    finally:
        await session.close()
