"""The pre-reasoning pipeline: split integrity, write-ahead save, failures, idempotency."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_ctx.core._errors import PersistenceError
from agentscope_ctx.core._pipeline import ContextPipeline, PipelineReport, PromptParts, split_point
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.core.context._memory import ContextMemory
from agentscope_ctx.core.tokens._tokens import TokenCounter
from agentscope_ctx.core.truncation._truncation import parse_notice
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._tool_results import ToolResultPolicy, ToolResultStore
from tests.support.lines import Msg, TextBlock, ToolResultBlock, ToolUseBlock


@dataclass
class Result:
    summary: str
    source: str = "model"
    reason: str | None = None


class RecordingCompactor:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], str | None]] = []

    async def compact(
        self,
        previous_summary: str,
        messages: Sequence[Msg],
        *,
        extra_instruction: str | None = None,
    ) -> Result:
        self.calls.append((previous_summary, [m.id for m in messages], extra_instruction))
        return Result(f"## Goal\nsummary #{len(self.calls)} of {len(messages)} messages")


class Agent:
    """What an adapter reads of an agent: its system prompt and tool schemas (none here);
    what it prints."""

    def __init__(self) -> None:
        self.sys_prompt = "You are a test agent."
        self.tool_schemas: list[dict[str, Any]] = []
        self.printed: list[str] = []

    def parts(self) -> PromptParts:
        return PromptParts(self.sys_prompt, self.tool_schemas)

    async def note(self, text: str) -> None:
        self.printed.append(text)


def attach(pipe: ContextPipeline, agent: Agent) -> Agent:
    """Wire the pipeline as an adapter does: the accountant reads the agent's system prompt
    and tool schemas, the agent hears what happened."""
    pipe.accountant.prompt_parts, pipe.notify = agent.parts, agent.note
    return agent


async def run(pipe: ContextPipeline, agent: Agent, **kwargs: Any) -> PipelineReport:
    """Run the pipeline for `agent`, wired as an adapter wires it (`attach`)."""
    attach(pipe, agent)
    return await pipe.run(**kwargs)


def pipeline(
    tmp_path: Path, **overrides: Any
) -> tuple[ContextPipeline, ContextMemory, RecordingCompactor]:
    fields: dict[str, Any] = {
        "working_dir": tmp_path,
        "max_input_tokens": 4_000,
        "compact_trigger_ratio": 0.6,
        "keep_recent_ratio": 0.2,
        "token_counter": "cl100k_base",
        "tool_result": {"recent_n": 2, "recent_max_bytes": 3_000, "old_max_bytes": 1_100},
        # These tests are about compaction and the second truncation themselves: each cut as
        # soon as it is due, no masking (the ladder has tests of its own, test_ladder.py).
        "clear_at_least": 0,
    }
    fields.update(overrides)
    if "mask_after" not in fields["tool_result"]:
        fields["tool_result"] = {**fields["tool_result"], "mask_after": None}
    config = ContextConfig(**fields)
    memory = ContextMemory(tmp_path)
    compactor = RecordingCompactor()
    pipe = ContextPipeline(
        config,
        memory,
        counter=TokenCounter("cl100k_base"),
        store=ToolResultStore(tmp_path, 7),
        policy=ToolResultPolicy(config.tool_result),
        dialog=DialogStore(tmp_path),
        compactor=compactor,
    )
    return pipe, memory, compactor


def turn(i: int, size: int = 200) -> list[Msg]:
    use = ToolUseBlock(type="tool_use", id=f"call{i}", name="shell", input={"cmd": f"ls {i}"})
    out = "".join(f"file_{i}_{k}.txt\n" for k in range(size))
    result = ToolResultBlock(
        type="tool_result", id=f"call{i}", name="shell", output=[TextBlock(type="text", text=out)]
    )
    return [Msg("bot", [use], "assistant"), Msg("system", [result], "system")]


# -- split integrity ------------------------------------------------------------------

kinds = st.lists(st.sampled_from(["user", "call", "call2", "answer"]), min_size=1, max_size=30)


def build(kinds_: list[str]) -> list[Msg]:
    out: list[Msg] = []
    for i, kind in enumerate(kinds_):
        if kind == "user":
            out.append(Msg("user", f"u{i}", "user"))
        elif kind == "answer":
            out.append(Msg("bot", f"a{i}", "assistant"))
        else:
            n = 1 if kind == "call" else 2
            uses = [
                ToolUseBlock(type="tool_use", id=f"{i}-{k}", name="t", input={}) for k in range(n)
            ]
            out.append(Msg("bot", uses, "assistant"))
            for k in range(n):
                res = ToolResultBlock(type="tool_result", id=f"{i}-{k}", name="t", output="ok")
                out.append(Msg("system", [res], "system"))
    return out


async def test_run_counts_the_agents_system_prompt(tmp_path: Path) -> None:
    """`run` wires the agent's fixed parts into the pipeline's count, as an adapter does (it
    once set an attribute nothing reads: the tests' prompts had no system prompt)."""
    pipe, memory, _ = pipeline(tmp_path)
    agent = Agent()
    await memory.add(Msg("user", "hello", "user"))
    bare = await run(pipe, agent)
    agent.sys_prompt = "Follow the house rules. " * 100
    longer = await run(pipe, agent)
    assert longer.tokens_before >= bare.tokens_before + 400


@settings(max_examples=300, deadline=None)
@given(
    kinds_=kinds,
    sizes=st.lists(st.integers(1, 50), min_size=80, max_size=80),
    keep=st.integers(0, 400),
)
def test_split_never_separates_a_tool_use_from_its_result(
    kinds_: list[str], sizes: list[int], keep: int
) -> None:
    msgs = build(kinds_)
    counts = sizes[: len(msgs)]
    cut = split_point(msgs, counts, keep)
    assert 0 <= cut < len(msgs)
    older_uses = {b["id"] for m in msgs[:cut] for b in m.get_content_blocks("tool_use")}
    kept_results = {b["id"] for m in msgs[cut:] for b in m.get_content_blocks("tool_result")}
    assert not older_uses & kept_results
    valid = [
        j
        for j in range(1, len(msgs))
        if not {b["id"] for m in msgs[:j] for b in m.get_content_blocks("tool_use")}
        & {b["id"] for m in msgs[j:] for b in m.get_content_blocks("tool_result")}
    ]
    fitting = [j for j in valid if sum(counts[j:]) <= keep]
    # keep as much as fits in the budget; when nothing fits, the smallest valid suffix
    assert cut == (min(fitting) if fitting else max(valid, default=0))


# -- pipeline -------------------------------------------------------------------------


async def test_compaction_saves_before_removing_and_loses_nothing(tmp_path: Path) -> None:
    pipe, memory, compactor = pipeline(tmp_path)
    agent = Agent()
    every: list[str] = []
    for i in range(12):
        batch = turn(i)
        every += [m.id for m in batch]
        await memory.add(batch)
        await run(pipe, agent)
    assert compactor.calls, "compaction should have triggered"
    stored, _ = DialogStore(tmp_path).read()
    assert [m.id for m in stored] + [m.id for m in memory.messages()] == every
    assert memory.compact_summary.startswith("## Goal")
    assert any("compacted" in p and "dialog" in p for p in agent.printed)
    assert await pipe.prompt_tokens() <= 4_000


async def test_crash_between_save_and_removal_is_recovered(tmp_path: Path) -> None:
    pipe, memory, _ = pipeline(tmp_path)
    agent = Agent()
    batches = [turn(i) for i in range(8)]
    every = [m.id for b in batches for m in b]
    for b in batches:
        await memory.add(b)
    real_delete = memory.delete

    async def crash(ids: list[str], **kwargs: Any) -> int:
        raise RuntimeError("killed between save and removal")

    memory.delete = crash  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        await run(pipe, agent)
    saved_once = [m.id for m in DialogStore(tmp_path).read()[0]]
    assert saved_once and [m.id for m in memory.messages()] == every  # nothing removed yet

    memory.delete = real_delete  # type: ignore[method-assign]
    await run(pipe, agent)  # the retry: same split, dialog append is idempotent
    stored = [m.id for m in DialogStore(tmp_path).read()[0]]
    assert stored + [m.id for m in memory.messages()] == every
    assert len(set(stored)) == len(stored)


async def test_dialog_failure_keeps_every_message(tmp_path: Path, caplog: Any) -> None:
    pipe, memory, _ = pipeline(tmp_path)
    agent = Agent()

    async def broken(msgs: Sequence[Msg]) -> int:
        raise PersistenceError("disk full")

    pipe.dialog.append = broken  # type: ignore[method-assign]
    batches = [m for i in range(10) for m in turn(i)]
    await memory.add(batches)
    with caplog.at_level(logging.ERROR, logger="agentscope_ctx"):
        report = await run(pipe, agent)
    assert report.compacted == 0 and "nothing removed" in (report.note or "")
    assert [m.id for m in memory.messages()] == [m.id for m in batches]
    assert memory.compact_summary == ""
    assert "disk full" in caplog.text


async def test_second_truncation_beyond_recent_n_and_idempotent(tmp_path: Path) -> None:
    pipe, memory, _ = pipeline(tmp_path, max_input_tokens=1_000_000)
    agent = Agent()
    for i in range(5):
        await memory.add(turn(i, size=400))
    await run(pipe, agent)
    results = [m for m in memory.messages() if m.has_content_blocks("tool_result")]
    sizes = [len(r.content[0]["output"][0]["text"].encode()) for r in results]
    assert all(s <= 1_100 for s in sizes[:3]) and all(1_100 < s <= 3_000 for s in sizes[3:])
    for r in results:
        assert parse_notice(r.content[0]["output"][0]["text"]) is not None
    before = memory.state_dict()
    report = await run(pipe, agent)
    assert report.truncated == 0 and memory.state_dict() == before


async def test_manual_compaction_passes_instruction_and_keeps_recent(tmp_path: Path) -> None:
    pipe, memory, compactor = pipeline(tmp_path, max_input_tokens=1_000_000)
    agent = Agent()
    for i in range(4):  # turns big enough that a summary (and what it carries) pays
        await memory.add(turn(i, size=200))
    report = await run(pipe, agent, force=True, extra_instruction="focus on the failing test")
    assert compactor.calls[-1][2] == "focus on the failing test"
    assert report.compacted > 0 and memory.messages()


async def test_loop_guard_stops_useless_compaction(tmp_path: Path) -> None:
    pipe, memory, compactor = pipeline(tmp_path)
    agent = Agent()

    async def bloated(previous_summary: str, messages: Sequence[Msg], **kw: Any) -> Result:
        compactor.calls.append(("", [], None))
        return Result("## Goal\n" + "word " * 5_000)

    compactor.compact = bloated  # type: ignore[method-assign]
    await memory.add([m for i in range(10) for m in turn(i)])
    await run(pipe, agent)
    n = len(compactor.calls)
    await run(pipe, agent)
    await run(pipe, agent)
    assert len(compactor.calls) == n


async def test_huge_newest_message_is_cut_not_sent(tmp_path: Path) -> None:
    pipe, memory, _ = pipeline(tmp_path)
    agent = Agent()
    paste = "".join(f"pasted line {i}\n" for i in range(20_000))
    await memory.add(Msg("user", paste, "user"))
    await run(pipe, agent)
    assert await pipe.prompt_tokens() <= 4_000
    text = memory.messages()[0].get_text_content() or ""
    excerpt, notice = parse_notice(text)  # type: ignore[misc]
    assert Path(notice.file_path).read_text() == paste


async def test_eviction_index_goes_with_the_summary_not_to_the_compactor(tmp_path: Path) -> None:
    """Issue 13, item 4: after each compaction the summary ends with a bounded index of what
    was compacted away (user's first words, tools and key arguments); the compactor sees
    only its own previous summary."""
    pipe, memory, compactor = pipeline(tmp_path)
    agent = Agent()
    for i in range(16):
        await memory.add(Msg("user", f"please list directory number {i} now", "user"))
        await memory.add(turn(i))
        await run(pipe, agent)
    assert len(compactor.calls) >= 2
    assert all("Compacted away" not in previous for previous, _, _ in compactor.calls)
    summary = memory.compact_summary
    body, index = summary.split("\n\nCompacted away (find details with search_history):\n")
    assert body.startswith("## Goal")
    assert "please list directory number 0" in index or "earlier:" in index
    assert 'shell(cmd="ls' in index
    assert len(index) <= 1_200


# -- issue 31 item 5: a compaction that moves nothing says why ---------------------------------


async def test_i31_a_compaction_that_moves_nothing_says_why(tmp_path: Path) -> None:
    """Before: one user turn compacted on demand reported "compacted 0 messages" with the note
    "the newest messages form one unit", which was not the reason."""
    pipe, memory, compactor = pipeline(tmp_path, max_input_tokens=1_000_000)
    agent = Agent()
    report = await run(pipe, agent, force=True)
    assert (report.compacted, report.note) == (
        0,
        "nothing to compact: the context holds no messages",
    )
    question = Msg("user", "which files mention TODO?", "user")
    await memory.add([question, *turn(1), Msg("bot", "notes.txt", "assistant")])
    report = await run(pipe, agent, force=True)  # one turn: a question and its answer
    assert report.compacted == 0 and compactor.calls == []
    assert report.note == (
        "nothing to compact: of the 1 older message(s), 1 belong to the current user turn, "
        "which never leaves the prompt"
    )
    await memory.add([Msg("user", "and README?", "user")])  # a new turn: the first may go
    report = await run(pipe, agent, force=True)  # (its question alone: a summary costs more)
    assert report.compacted == 0
    assert str(report.note).startswith("not made: it would not make the prompt smaller")
