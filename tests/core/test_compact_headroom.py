"""The small-window policy (issue 45; by default below an 8,000-token budget): after a
compaction the summary as shown is held to `summary_max_share` of the budget and fewer of the
newest messages are kept where `keep_recent_ratio` would leave less than `compact_headroom`
fresh outputs of room under the trigger. At a 4,000-token window a whole summary (~1,200 tokens) and the kept quarter left
the prompt over the trigger again at the next call: a compaction, and a rewrite of the cached
prompt from the summary on, at every call. On both AgentScope lines."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from agentscope_ctx.core.context._memory import ContextMemory
from agentscope_ctx.core.truncation._truncation import parse_notice
from tests.core.test_pipeline import Agent, Result, pipeline, run, turn

BUDGET = 4_000
STEPS = 40
SYSTEM = "You are a reviewer. " + "Keep exact file paths and error messages. " * 45
"""About 400 tokens, as the cost benchmark's system prompt and tool schemas take."""


class WordyCompactor:
    """A compactor whose summary lists every file seen, as the scripted one of the cost
    benchmark does: about 1,200 tokens after a few compactions."""

    def __init__(self) -> None:
        self.calls = 0
        self.seen = 0

    async def compact(self, previous_summary: str, messages: Any, **kwargs: Any) -> Result:
        self.calls += 1
        self.seen += len(messages)
        done = "".join(f"- Viewed `/repo/src/module_{k:03d}.py`.\n" for k in range(self.seen))
        return Result(f"## Goal\n- Review the files\n## Progress\n### Done\n{done}")


async def _session(tmp_path: Path, **policy: Any) -> tuple[list[int], list[bool], ContextMemory]:
    """Twenty-four tool steps of ~900-token outputs (cut to 600, `recent_max_share`) at a
    4,000-token window, the other settings the defaults: the tokens after each run and
    whether it compacted."""
    pipe, memory, _ = pipeline(
        tmp_path,
        max_input_tokens=BUDGET,
        compact_trigger_ratio=0.75,
        keep_recent_ratio=0.25,
        clear_at_least=None,
        tool_result={"mask_after": 10},
        **policy,
    )
    compactor = WordyCompactor()
    pipe.compaction.compactor = compactor
    agent = Agent()
    agent.sys_prompt = SYSTEM
    after: list[int] = []
    compacted: list[bool] = []
    for i in range(STEPS):
        await memory.add(turn(i, size=150))
        report = await run(pipe, agent)
        after.append(report.tokens_after)
        compacted.append(report.compacted > 0)
    return after, compacted, memory


def _consecutive(compacted: list[bool]) -> int:
    return sum(a and b for a, b in itertools.pairwise(compacted))


async def test_compaction_no_longer_fires_at_consecutive_calls(tmp_path: Path) -> None:
    """With the defaults (0.15 and 2 below 8,000 tokens)."""
    after, compacted, memory = await _session(tmp_path / "policy")
    assert max(after) <= BUDGET
    assert sum(compacted) >= 3 and _consecutive(compacted) == 0, compacted
    # the writer's text shown cut, its whole saved and readable; the carried block and the
    # eviction index whole (`cap_writer`)
    shown, whole_msg = memory.summary_message(), memory.whole_summary_message()
    assert shown is not None and whole_msg is not None
    assert len(str(shown.content)) < len(str(whole_msg.content)) - 1_000
    assert memory.kept is not None and str(shown.content).endswith(
        memory.kept.tail + "\n</compact_summary>"
    )
    saved = re.search(r"file_path=(\S+)", str(shown.content))
    assert saved is not None
    assert "module_000.py" in Path(saved[1]).read_text(encoding="utf-8")
    assert "module_000.py" in memory.summary_text()  # what is stored is whole
    # nothing lost: each output is in dialog/ or in memory, cut with a notice whose saved
    # file holds it whole
    work = tmp_path / "policy"
    dialog = "".join(p.read_text(encoding="utf-8") for p in (work / "dialog").rglob("*.jsonl"))
    kept = {m.id: m for m in memory.messages()}
    for i in range(STEPS):
        results = [
            b
            for m in kept.values()
            for b in m.get_content_blocks("tool_result")
            if b.get("id") == f"call{i}"
        ]
        if not results:
            assert f'"call{i}"' in dialog, i
            continue
        cut = parse_notice(results[0]["output"][0]["text"])  # type: ignore[index]
        assert cut is not None, i
        whole = Path(cut[1].file_path)
        whole = whole if whole.is_absolute() else work / whole
        assert whole.read_text(encoding="utf-8").endswith(f"file_{i}_149.txt\n"), i


async def test_without_the_policy_it_compacts_at_every_call(tmp_path: Path) -> None:
    """The contrast (the policy off: `summary_max_share` 1, `compact_headroom` 0): the whole
    summary and the kept quarter leave the prompt over the trigger at the next call."""
    after, compacted, _ = await _session(tmp_path, summary_max_share=1, compact_headroom=0)
    assert max(after) <= BUDGET
    assert _consecutive(compacted) >= 3, compacted
