"""`PromptStats` (the demos' report, both lines): which truncations the prompts show.

An output is known by its tool call: cut harder, it is a second truncation whichever file its
notice names. A `read_file` output of a workspace file that is cut harder is first saved as a
snapshot in `tool_result/` (issue 19.1), so its new notice names the snapshot; an output that
entered whole (a SKILL.md under the Markdown limit) gets its first notice when it is cut on
aging. Counted by the notice's file alone, both looked like first truncations (the 1.x skills
demo reported "11 first, 0 second" beside four second-truncation reliefs).
"""

from __future__ import annotations

from typing import Any

from agentscope_ctx.core.tokens._tokens import TokenCounter
from agentscope_ctx.core.truncation._truncation import excerpt_with_notice, retruncate
from agentscope_ctx.demo._stats import PromptStats

RUNBOOK = "".join(f"step {i}: check the replica and the backup\n" for i in range(400))
SKILL = "".join(f"{i}. Verify the schema before the window.\n" for i in range(60))


def _prompt(results: dict[str, tuple[str, str]]) -> list[dict[str, Any]]:
    """A formatted (OpenAI) prompt: one call and its result for each id."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "plan the migration"}]
    for call_id, (tool, text) in results.items():
        call = {"id": call_id, "type": "function", "function": {"name": tool, "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return messages


async def test_outputs_cut_harder_under_a_new_file_are_second_truncations() -> None:
    stats = PromptStats(TokenCounter("cl100k_base"))
    read = excerpt_with_notice(RUNBOOK, max_bytes=6_000, file_path="/w/docs/runbook.md")
    shown = {"call_001": ("read_file", read), "call_002": ("read_file", SKILL)}
    await stats.observe(_prompt(shown), None)
    assert (stats.first_truncations, stats.second_truncations) == (1, 0)

    # aged: the runbook's excerpt saved as a snapshot and cut from there, the skill cut
    snapshot = excerpt_with_notice(read, max_bytes=1_500, file_path="/w/tool_result/a.txt")
    skill = excerpt_with_notice(SKILL, max_bytes=1_500, file_path="/w/tool_result/b.txt")
    aged = {"call_001": ("read_file", snapshot), "call_002": ("read_file", skill)}
    await stats.observe(_prompt(aged), None)
    await stats.observe(_prompt(aged), None)  # shown again: counted once
    assert (stats.first_truncations, stats.second_truncations) == (1, 2)
    assert [cut.step for cut in stats.first_cuts] == [1]


async def test_a_harder_cut_in_the_same_file_is_one_second_truncation() -> None:
    """A saved output (the notice names `tool_result/`) is cut harder from its own notice;
    a result without a call id is known by where its excerpt starts."""
    first = excerpt_with_notice(RUNBOOK, max_bytes=6_000, file_path="/w/tool_result/c.txt")
    second = retruncate(first, max_bytes=1_500)
    for call_id in ("call_001", ""):
        stats = PromptStats(TokenCounter("cl100k_base"))
        for text in (first, second, second):
            await stats.observe(_prompt({call_id: ("run_shell", text)}), None)
        assert (stats.first_truncations, stats.second_truncations) == (1, 1), call_id
