"""Benchmark the pre-reasoning pipeline (DESIGN.md §3): steady-state step cost and compaction.

Run ``python benchmarks/pipeline/step.py`` (or ``python -m benchmarks.pipeline.step``);
`main()` returns the numbers as a dict. It measures the line-neutral core (a `ContextMemory`
of the core's entries), so it runs on AgentScope 1.x and 2.x alike; the 2.x adapter's own
step (state → memory → state around the same pipeline) is `pipeline.steady2`.

1. Steady state: a history of 50, 200, 800, 3200 messages (user requests, assistant tool
   calls, tool results of a few KB) in a `ContextMemory`, `max_input_tokens` so large that
   nothing compacts. After one warm-up run, a step is: append a tool_use and its tool_result,
   then `await pipeline.run()`. Mean cost per step over ~50 steps, and its ratio to the
   50-message history (target: flat, within 2x from 50 to 800). With the default settings the
   tool result that slides out of the newest `recent_n` is not cut under the trigger (cuts wait
   for the trigger or a batch worth `clear_at_least`, for prompt caches), as in a real agent.
2. One compaction (extractive summary, no model) of 100, 400, 1600 messages:
   `run(force=True)` with a small `max_input_tokens`; the time, the messages compacted and the
   bytes written to `dialog/`.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core._pipeline import ContextPipeline, PromptParts
from agentscope_ctx.core.compaction._compactor import Compactor
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.core.context._memory import ContextMemory
from agentscope_ctx.core.tokens._tokens import TokenCounter
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._tool_results import ToolResultPolicy, ToolResultStore
from benchmarks._table import human, print_table

HISTORY_SIZES = (50, 200, 800, 3200)
COMPACT_SIZES = (100, 400, 1600)
STEPS = 50
TARGET_STEP_RATIO = 2.0  # 800 vs 50 messages
ENCODING = "cl100k_base"

_WORDS = (
    "the agent reads the config file then runs the failing test again because the parser "
    "raised an error on line twelve and the user asked to keep the fix small and exact"
).split()
_NAMES = ["config", "parser", "result", "items", "path", "buffer", "retry", "token"]


# -- a minimal agent ---------------------------------------------------------------------


def _schema(name: str, description: str, params: dict[str, Any], required: list[str]) -> Any:
    parameters = {"properties": params, "required": required, "type": "object"}
    function = {"name": name, "parameters": parameters, "description": description}
    return {"type": "function", "function": function}


def _make_parts() -> PromptParts:
    """The fixed parts of the prompt an adapter would read off the agent: a system prompt and
    the schemas of two tools (as AgentScope 1.x's `Toolkit` writes them)."""
    shell = _schema(
        "run_shell",
        "Run a shell command.",
        {"command": {"description": "The command line.", "type": "string"}},
        ["command"],
    )
    read = _schema(
        "read_file",
        "Read a text file.",
        {
            "file_path": {"description": "The file to read.", "type": "string"},
            "start_line": {
                "default": 1,
                "description": "The first line to return.",
                "type": "integer",
            },
        },
        ["file_path"],
    )
    return PromptParts("You are a careful coding assistant. " * 20, [shell, read])


_PARTS = _make_parts()


def _parts() -> PromptParts:
    return _PARTS


# -- histories -----------------------------------------------------------------------------


def _prose(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words)).capitalize() + "."


def _tool_output(rng: random.Random, tool: str) -> str:
    """1.5-6 KB of code or log lines (some over `old_max_bytes`, so they get cut later)."""
    target = rng.randint(1_500, 6_000)
    lines: list[str] = []
    size = 0
    while size < target:
        if tool == "read_file":
            a, b = rng.choice(_NAMES), rng.choice(_NAMES)
            line = f"    {a}_{len(lines)} = {b}.get({rng.randint(0, 999)!r}, default=None)  # {a}"
        else:
            line = (
                f"2026-01-{rng.randint(1, 28):02d} 12:{rng.randint(0, 59):02d} "
                f"{rng.choice(['INFO', 'DEBUG', 'ERROR'])} {rng.choice(_NAMES)} "
                f"id={rng.getrandbits(40):010x} took {rng.random() * 900:.1f}ms"
            )
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def tool_pair(rng: random.Random) -> list[Msg]:
    """An assistant tool_use and its tool_result, as a ReActAgent stores them."""
    call_id = f"call_{rng.getrandbits(64):016x}"
    tool = rng.choice(["run_shell", "read_file"])
    arguments: dict[str, Any] = (
        {"command": f"pytest tests/test_{rng.choice(_NAMES)}.py -x"}
        if tool == "run_shell"
        else {"file_path": f"src/{rng.choice(_NAMES)}.py", "start_line": 1}
    )
    use = {"type": "tool_use", "id": call_id, "name": tool, "input": arguments}
    result = {
        "type": "tool_result",
        "id": call_id,
        "name": tool,
        "output": [{"type": "text", "text": _tool_output(rng, tool)}],
    }
    return [
        Msg("agent", [{"type": "text", "text": _prose(rng, 12)}, use], "assistant"),
        Msg("system", [result], "system"),
    ]


def build_history(n_messages: int, seed: int = 0) -> list[Msg]:
    """A deterministic history: a user request, then tool calls and results, with some
    assistant commentary and follow-up requests in between."""
    rng = random.Random(seed)
    msgs: list[Msg] = [Msg("user", _prose(rng, 40), "user")]
    while len(msgs) < n_messages:
        r = rng.random()
        if r < 0.08:
            msgs.append(Msg("user", _prose(rng, rng.randint(10, 80)), "user"))
        elif r < 0.16:
            msgs.append(Msg("agent", _prose(rng, rng.randint(20, 120)), "assistant"))
        else:
            msgs.extend(tool_pair(rng))
    # Never end on a tool_use without its result.
    cut = n_messages
    if cut < len(msgs) and msgs[cut].role == "system":
        cut += 1
    return msgs[:cut]


def _make_pipeline(
    root: Path, max_input_tokens: int, counter: TokenCounter, memory: ContextMemory | None = None
) -> tuple[ContextPipeline, ContextMemory]:
    config = ContextConfig(working_dir=root, max_input_tokens=max_input_tokens)
    memory = ContextMemory(root) if memory is None else memory
    compactor = Compactor(
        config.compactor,
        model=None,
        formatter=None,
        counter=counter,
        max_input_tokens=max_input_tokens,
    )
    pipeline = ContextPipeline(
        config,
        memory,
        counter=counter,
        store=ToolResultStore(root, config.tool_result.retention_days),
        policy=ToolResultPolicy(config.tool_result),
        dialog=DialogStore(root),
        compactor=compactor,
        prompt_parts=_parts,
    )
    return pipeline, memory


# -- 1. steady state -------------------------------------------------------------------------


async def _steady(n: int, root: Path, steps: int) -> dict[str, Any]:
    counter = TokenCounter(ENCODING)
    pipeline, memory = _make_pipeline(root, 10_000_000, counter)
    await memory.add(build_history(n, seed=n))
    start = time.perf_counter()
    warm = await pipeline.run()
    warm_s = time.perf_counter() - start

    rng = random.Random(n + 1)
    pairs = [tool_pair(rng) for _ in range(steps)]  # built outside the timing
    times, truncated = [], 0
    for pair in pairs:
        start = time.perf_counter()
        await memory.add(pair)
        report = await pipeline.run()
        times.append(time.perf_counter() - start)
        truncated += report.truncated
        assert report.compacted == 0, "steady state must not compact"
    return {
        "messages": n,
        "tokens": warm.tokens_after,
        "warm_run_ms": warm_s * 1e3,
        "steps": steps,
        "step_mean_us": statistics.fmean(times) * 1e6,
        "step_median_us": statistics.median(times) * 1e6,
        "truncated_per_step": truncated / steps,
    }


# -- 2. compaction ---------------------------------------------------------------------------


async def _compaction(n: int, root: Path) -> dict[str, Any]:
    counter = TokenCounter(ENCODING)
    # Keep ~20 messages (keep_recent_ratio 0.25 of 40K tokens); compact the rest.
    max_input_tokens = 40_000
    # Warm, with an unbounded budget: count tokens and do the cuts first, so that the timing
    # is the compaction's.
    warm, memory = _make_pipeline(root, 10_000_000, counter)
    history = build_history(n + 20, seed=7 * n)
    await memory.add(history)
    await counter.count_msgs(memory.messages())
    await warm.run(force=False)
    pipeline, _ = _make_pipeline(root, max_input_tokens, counter, memory)
    tokens_before = await pipeline.prompt_tokens()

    start = time.perf_counter()
    report = await pipeline.run(force=True)
    total_s = time.perf_counter() - start

    dialog_bytes = sum(p.stat().st_size for p in pipeline.dialog.dialog_dir.glob("*.jsonl"))
    summary = memory.compact_summary
    return {
        "history": len(history),
        "compacted": report.compacted,
        "kept": len(memory.messages()),
        "tokens_before": tokens_before,
        "tokens_after": report.tokens_after,
        "summary_source": report.summary_source,
        "summary_chars": len(summary),
        "ms": total_s * 1e3,
        "us_per_msg": total_s / max(report.compacted, 1) * 1e6,
        "dialog_bytes": dialog_bytes,
    }


async def _run(
    history_sizes: Sequence[int], compact_sizes: Sequence[int], steps: int
) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="bench_pipeline_"))
    try:
        steady: dict[str, Any] = {}
        for n in history_sizes:
            steady[str(n)] = await _steady(n, root / f"steady_{n}", steps)
        first = steady[str(history_sizes[0])]
        for row in steady.values():
            row["ratio_vs_smallest"] = row["step_mean_us"] / first["step_mean_us"]
            row["median_ratio_vs_smallest"] = row["step_median_us"] / first["step_median_us"]
        compaction: dict[str, Any] = {}
        for n in compact_sizes:
            compaction[str(n)] = await _compaction(n, root / f"compact_{n}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    check = steady.get("800")
    return {
        "encoding": ENCODING,
        "target_step_ratio_800_vs_50": TARGET_STEP_RATIO,
        "steady": steady,
        "meets_step_target": (
            None
            if check is None or "50" not in steady
            else check["ratio_vs_smallest"] <= TARGET_STEP_RATIO
        ),
        "compaction": compaction,
    }


def print_steady(rows: Iterable[dict[str, Any]]) -> None:
    """The steady-state table: per history size, the warm run and the step's time."""
    print_table(
        f"{'messages':>8} {'tokens':>10} {'warm run ms':>11} {'steps':>5} {'mean us':>9}"
        f" {'median us':>9} {'mean vs 1st':>11} {'median vs 1st':>13} {'cuts/step':>9}",
        (
            f"{row['messages']:>8} {row['tokens']:>10,} {row['warm_run_ms']:11.1f}"
            f" {row['steps']:>5} {row['step_mean_us']:9.0f} {row['step_median_us']:9.0f}"
            f" {row['ratio_vs_smallest']:10.2f}x {row['median_ratio_vs_smallest']:12.2f}x"
            f" {row['truncated_per_step']:9.2f}"
            for row in rows
        ),
    )


def report(result: dict[str, Any]) -> None:
    """Print the tables for `result` (as returned by `run`)."""
    print(
        "steady state: append tool_use + tool_result, then pipeline.run(); "
        f"nothing compacts (token counter {result['encoding']})"
    )
    print_steady(result["steady"].values())
    meets = result["meets_step_target"]
    if meets is not None:
        row = result["steady"]["800"]
        print(
            f"target: 800 vs 50 messages within {result['target_step_ratio_800_vs_50']:.0f}x:"
            f" mean {row['ratio_vs_smallest']:.2f}x -> {'yes' if meets else 'NO'}"
            f" (median {row['median_ratio_vs_smallest']:.2f}x; under the trigger nothing older"
            " is cut, so a step pays no fsync; what varies is mostly garbage collection)"
        )
    print()
    print("one compaction: run(force=True), extractive summary (no model call)")
    print_table(
        f"{'history':>7} {'compacted':>9} {'kept':>5} {'tokens before':>13} {'after':>7}"
        f" {'ms':>8} {'us/msg':>7} {'dialog bytes':>12} {'summary':>8}",
        (
            f"{row['history']:>7} {row['compacted']:>9} {row['kept']:>5}"
            f" {row['tokens_before']:>13,} {row['tokens_after']:>7,} {row['ms']:8.1f}"
            f" {row['us_per_msg']:7.0f} {human(row['dialog_bytes']):>12}"
            f" {row['summary_chars']:>7}c"
            for row in result["compaction"].values()
        ),
    )


def run(
    history_sizes: Sequence[int] = HISTORY_SIZES,
    compact_sizes: Sequence[int] = COMPACT_SIZES,
    steps: int = STEPS,
) -> dict[str, Any]:
    """Measure without printing."""
    return asyncio.run(_run(history_sizes, compact_sizes, steps))


def main(
    history_sizes: Sequence[int] = HISTORY_SIZES,
    compact_sizes: Sequence[int] = COMPACT_SIZES,
    steps: int = STEPS,
) -> dict[str, Any]:
    """Run the benchmark, print a report and return the numbers."""
    result = run(history_sizes, compact_sizes, steps)
    report(result)
    return result


if __name__ == "__main__":
    main()
