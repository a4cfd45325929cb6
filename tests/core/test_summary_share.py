"""The summary held to its share of a small budget (`ContextConfig.summary_max_share`, by
default below 8,000 tokens; issue 45) is saved with the summary: a worker that resumes the
session from its saved state shows the model the same summary message as the worker that
compacted, on both AgentScope lines."""

from __future__ import annotations

import json
from pathlib import Path

from agentscope_ctx import ContextConfig
from agentscope_ctx.core.ladder._summary_fit import cap_writer
from agentscope_ctx.core.summary._carry_text import CarryState
from agentscope_ctx.core.summary._kept import Kept
from tests.core.test_pipeline import pipeline
from tests.support.agent_line import Line, Session

LONG = (
    "## Goal\n- Review the modules\n## Constraints\n- (none)\n## Progress\n### Done\n"
    + "".join(
        f"- Read `/repo/src/module_{k:03d}.py`: its handler logs the error and retries twice.\n"
        for k in range(24)
    )
    + "## Key Decisions\n- (none)\n## Next Steps\n- Read on.\n## Critical Context\n- (none)\n"
)
"""The compactor's summary: about 650 tokens (the compactor may write 712 here), over 0.15 of a 4,000-token budget with the guide."""


def _summary_shown(session: Session) -> str:
    """The summary message of the last prompt the agent's model was sent."""
    for message in session.model.calls and json.loads(session.prompt()):
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(str(b.get("text", "")) for b in content)
        if message.get("role") == "user" and str(content).startswith("<compact_summary>"):
            return str(content)
    raise AssertionError(f"no summary message in {session.prompt()[:300]}")


async def test_a_resumed_session_shows_the_summary_cut_as_the_compacting_one(
    tmp_path: Path, line: Line
) -> None:
    # the output enters at 600 tokens (0.15), so that a compaction has an older part to take
    # (with the trigger under the budget: at the budget, the default below 8,000 tokens, the
    # compaction's room for fresh outputs would keep all of this short session)
    config = ContextConfig(
        working_dir=tmp_path,
        max_input_tokens=4_000,
        compact_trigger_ratio=0.75,
        tool_result={"recent_max_share": 0.15},
    )
    tools = {"read": lambda arg: f"{arg}: " + "a line of the file\n" * 200}
    first = line.session(config, line.fake_model(default=LONG), tools)
    await first.turn("Read the first module.", line.tool_call("read", "c1", arg="m0"), "ok")
    assert await first.compact()
    await first.turn("What did you find?")
    shown = _summary_shown(first)
    assert "module_000.py" in shown and "module_023.py" not in shown  # a head, then a notice
    assert "read_file" in shown and "module_023.py" in first.memory.compact_summary
    saved = first.saved()
    await first.close()

    later = line.session(config, line.fake_model(default="ok"), tools, saved)
    await later.turn("And then?")
    assert _summary_shown(later) == shown
    await later.close()


async def test_the_cut_keeps_as_much_of_the_writers_text_as_the_share_holds(
    tmp_path: Path,
) -> None:
    """`cap_writer`: the head it leaves fills the share (the notice is counted once, inside
    the cut's byte limit), and the whole text is saved once, however many cuts it tried."""
    pipe, memory, _ = pipeline(tmp_path)
    writer = "".join(
        f"- Read `/repo/src/module_{k:03d}.py`: it retries twice.\n" for k in range(60)
    )
    counter = pipe.accountant.counter

    async def tokens(summary: str) -> int:
        msg = memory.summary_message_for(summary)
        assert msg is not None
        return await counter.count_msg(msg)

    cap = await tokens(writer) // 2
    kept = await cap_writer(
        memory, counter, pipe.cutter, writer, Kept(CarryState(), (), ""), cap, 1.0
    )
    assert kept.shown is not None and kept.shown.startswith("- Read `/repo/src/module_000.py`")
    assert cap - 60 <= await tokens(kept.shown_summary(writer)) <= cap
    saved = list((tmp_path / "tool_result").iterdir())
    assert len(saved) == 1 and saved[0].read_text(encoding="utf-8") == writer
