"""Probes: what the agent still knows after 1, 3 and 10 compactions (issue 22, DESIGN.md §13).

``python -m benchmarks probes``. Scripted sessions of three kinds (coding with failing tests
and edits, log triage, web research) run through the real core (`ContextMemory`,
`ContextPipeline`: the ladder, compaction with its write-ahead `dialog/`, the summary with
what is carried by code) with real files and tiktoken; each round ends with a compaction.
After 1, 3 and 10 compactions the next prompt (summary + messages, as the model would get
it) is probed with ground-truth questions of four kinds:

- **fact**: a fact the session found (a root cause, a date, a port) is in the prompt;
- **trail**: every file the session read, edited or wrote is named in the prompt;
- **continuation**: the current task (the newest user instruction) and the next step the
  assistant announced are in the prompt;
- **decision**: each decision stated with its reason ("use X because Y") keeps both.

Three summary writers: the extractive fallback (no model), a **lazy** scripted model (the
five headings and generic lines, the failure the issue reports) and a **good** scripted model
(it keeps every user sentence, decision, fact line and next step it is shown, as a careful
model would). No real model is needed to see what code guarantees: the columns of the lazy
model are what the code alone keeps. A score is the share of probes answered (1.00: all).
Numbers only; nothing here asserts.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core._pipeline import ContextPipeline
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.core.context._memory import ContextMemory
from agentscope_ctx.core.summary._extractive import render_msg
from agentscope_ctx.core.tokens._tokens import TokenCounter
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._tool_results import ToolResultPolicy, ToolResultStore
from tests.support.guard_session import LAZY  # the lazy compactor: five headings, nothing kept

CHECKPOINTS = (1, 3, 10)
WRITERS = ("extractive", "lazy", "good")
KINDS = ("fact", "trail", "continuation", "decision")
BUDGET = 16_000


@dataclass
class Probes:
    """Ground truth gathered while a session is written."""

    facts: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    task: str = ""
    next_step: str = ""
    decisions: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class _Result:
    summary: str
    source: str = "model"
    reason: str | None = None


class _Writer:
    """A `CompactorLike` summary writer: extractive (the real fallback), lazy or good."""

    def __init__(self, kind: str, store: ToolResultStore) -> None:
        self.kind = kind
        self.store = store

    async def compact(
        self, previous_summary: str, messages: Sequence[Msg], *, extra_instruction: Any = None
    ) -> _Result:
        from agentscope_ctx.core.summary._extractive import extractive_summary

        if self.kind == "extractive":
            text = extractive_summary(previous_summary, messages, read_saved=self.store.read_saved)
            return _Result(text, "extractive")
        if self.kind == "lazy":
            return _Result(LAZY)
        return _Result(_good_summary(previous_summary, messages))


_KEEP = re.compile(r"\b(because|root cause|released|listens|decided|next|will|must|do not)\b", re.I)


def _good_summary(previous: str, messages: Sequence[Msg]) -> str:
    """What a careful model writes: the previous summary's items and every sentence of the
    new messages that states a fact, a decision, a constraint or a plan (bounded)."""
    old = [ln for ln in previous.splitlines() if ln.startswith("- ")]
    new = []
    for msg in messages:
        for line in render_msg(msg).splitlines():
            if _KEEP.search(line) and len(line) < 300:
                new.append(f"- {line.strip()}")
    items = list(dict.fromkeys(old + new))[-60:]
    body = "\n".join(items) or "- (none)"
    return (
        f"## Goal\n{body}\n## Constraints\n- as stated\n## Progress\n- see Goal\n"
        "## Key Decisions\n- see Goal\n## Next Steps\n- see Goal\n"
    )


# -- the sessions ----------------------------------------------------------------------


def _call(n: int, name: str, **args: Any) -> Msg:
    block = {"type": "tool_use", "id": f"c{n}", "name": name, "input": args}
    return Msg("assistant", [block], "assistant")


def _result(n: int, name: str, text: str) -> Msg:
    block = {
        "type": "tool_result",
        "id": f"c{n}",
        "name": name,
        "output": [{"type": "text", "text": text}],
    }
    return Msg("system", [block], "system")


def _round(kind: str, r: int, truth: Probes) -> list[Msg]:
    """One round of a session of `kind`: a user turn, tool calls, a decision and a plan."""
    n = r * 10
    if kind == "coding":
        task = f"Fix test_parse_{r} in src/mod{r}.py; do not modify setup.cfg."
        log = "".join(f"tests/test_m.py::t{i} PASSED\n" for i in range(300))
        log += f"E   ValueError: bad token {r} in src/mod{r}.py:{40 + r}\n[exit code 1]\n"
        msgs = [
            Msg("user", task, "user"),
            _call(n, "read_file", file_path=f"src/mod{r}.py"),
            _result(n, "read_file", "".join(f"line {i} of mod{r}\n" for i in range(200))),
            _call(n + 1, "run_shell", command=f"pytest -x tests/test_m.py::test_parse_{r}"),
            _result(n + 1, "run_shell", log),
            _call(n + 2, "edit_file", file_path=f"src/mod{r}.py", old="int(x)", new="parse(x)"),
            _result(n + 2, "edit_file", "edited"),
            Msg(
                "assistant",
                f"I decided to use parse_token_{r} because int() rejects "
                f"hex_{r} input. Next I will run test_parse_{r} again.",
                "assistant",
            ),
        ]
        truth.facts.append(f"ValueError: bad token {r}")
        truth.files += [f"src/mod{r}.py"]
        truth.decisions.append((f"parse_token_{r}", f"hex_{r}"))
        truth.next_step = f"run test_parse_{r} again"
    elif kind == "logs":
        task = f"Find why node-{r} restarts; never restart the cluster."
        lines = "".join(f"2026-12-0{1 + r % 9} 10:{i % 60:02d} node-{r} ok\n" for i in range(400))
        lines += f"2026-12-03 11:00 node-{r} root cause: disk full on /var/lib/db{r}\n"
        msgs = [
            Msg("user", task, "user"),
            _call(n, "run_shell", command=f"grep node-{r} /var/log/syslog.{r}"),
            _result(n, "run_shell", lines),
            _call(n + 1, "read_file", file_path=f"logs/node{r}.log"),
            _result(n + 1, "read_file", lines[:4_000]),
            Msg(
                "assistant",
                f"The root cause is disk full on /var/lib/db{r}. I decided to "
                f"rotate_db{r} because the volume_{r} is at 100%. Next I will "
                f"check node-{r + 1}.",
                "assistant",
            ),
        ]
        truth.facts.append(f"disk full on /var/lib/db{r}")
        truth.files += [f"logs/node{r}.log"]
        truth.decisions.append((f"rotate_db{r}", f"volume_{r}"))
        truth.next_step = f"check node-{r + 1}"
    else:
        task = f"Research library lib{r}: when was it released, and what port it listens on."
        page = "".join(f"<p>paragraph {i} about lib{r}</p>\n" for i in range(500))
        page += (
            f"<p>lib{r} was released on 2026-0{1 + r % 9}-1{r % 10}; it listens on {8000 + r}</p>\n"
        )
        msgs = [
            Msg("user", task, "user"),
            _call(n, "fetch_url", url=f"https://example.org/lib{r}"),
            _result(n, "fetch_url", page),
            _call(n + 1, "write_file", file_path=f"notes/lib{r}.md", content=f"lib{r} notes"),
            _result(n + 1, "write_file", "written"),
            Msg(
                "assistant",
                f"lib{r} listens on {8000 + r}. I decided to cite source_{r} "
                f"because mirror_{r} is stale. Next I will compare lib{r + 1}.",
                "assistant",
            ),
        ]
        truth.facts.append(f"listens on {8000 + r}")
        truth.files += [f"notes/lib{r}.md"]
        truth.decisions.append((f"source_{r}", f"mirror_{r}"))
        truth.next_step = f"compare lib{r + 1}"
    truth.task = task
    return msgs


def _score(prompt: str, truth: Probes) -> dict[str, float]:
    def share(items: list[bool]) -> float:
        return sum(items) / len(items) if items else 1.0

    return {
        "fact": share([fact in prompt for fact in truth.facts]),
        "trail": share([path in prompt for path in dict.fromkeys(truth.files)]),
        "continuation": share([truth.task in prompt, truth.next_step in prompt]),
        "decision": share([a in prompt and b in prompt for a, b in truth.decisions]),
    }


async def _session(kind: str, writer: str, folder: Path) -> dict[int, dict[str, float]]:
    config = ContextConfig(
        working_dir=folder,
        max_input_tokens=BUDGET,
        keep_recent_ratio=0.05,
        token_counter="cl100k_base",
        tool_result={"recent_n": 2, "recent_max_bytes": 4_000, "old_max_bytes": 1_100},
    )
    store = ToolResultStore(folder, 7)
    memory = ContextMemory(folder)
    pipe = ContextPipeline(
        config,
        memory,
        counter=TokenCounter("cl100k_base"),
        store=store,
        policy=ToolResultPolicy(config.tool_result),
        dialog=DialogStore(folder),
        compactor=_Writer(writer, store),
    )
    truth = Probes()
    scores: dict[int, dict[str, float]] = {}
    for r in range(1, max(CHECKPOINTS) + 1):
        await memory.add(_round(kind, r, truth))
        await pipe.run(force=True)
        if r in CHECKPOINTS:
            # the next prompt: the newest user instruction arrives, then the model is asked
            await memory.add(Msg("user", truth.task, "user"))
            await pipe.run()
            prompt = (
                memory.compact_summary + "\n" + "\n".join(render_msg(m) for m in memory.messages())
            )
            scores[r] = _score(prompt, truth)
            await memory.delete([memory.messages()[-1].id])
    return scores


def main() -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("coding", "logs", "web"):
            for writer in WRITERS:
                folder = Path(tmp) / f"{kind}-{writer}"
                results[f"{kind}/{writer}"] = asyncio.run(_session(kind, writer, folder))
    head = f"{'session/writer':<20}" + "".join(
        f"{k[:5]:>6}@{c:<3}" for c in CHECKPOINTS for k in KINDS
    )
    print(f"probes: share answered from the next prompt, after N compactions (budget {BUDGET:,})")
    print(head)
    for name, by_n in results.items():
        cells = "".join(f"{by_n[c][k]:>10.2f}" for c in CHECKPOINTS for k in KINDS)
        print(f"{name:<20}{cells}")
    return {"budget": BUDGET, "checkpoints": list(CHECKPOINTS), "scores": results}


if __name__ == "__main__":
    main()
