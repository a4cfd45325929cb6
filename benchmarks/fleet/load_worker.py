"""One worker process of the fleet load benchmark (`benchmarks.fleet.load`).

It serves its share of the sessions at once on one event loop (``--in-flight`` at most), as a
service does, each session hand-wired (`load_agents`): a `ContextManager` of its own on the
PostgreSQL store and a real agent of the installed line with a toolkit (the ``cat`` tool) and
a scripted model. A session's four turns: three logs read (each output about 4 KB, cut to 2 KB
and saved), then a `search_history` for the word in the middle of the first log, which only
its saved output holds; the budget (`BUDGET`) makes the session compact, so its dialog records
are written. Then the manager is closed and the session dropped, as a service drops a finished
one.

It writes one JSON result (``--out``): the time the package's hooks took per reply (2.x:
`benchmarks.fleet.timed`), the prompts over the budget (each counted with tiktoken as the
provider gets it), the probes that found their output, the engine pool's peak, the package's
warnings, the RSS before, at peak and after (``gc.collect`` and ``malloc_trim``, once every
manager is gone: how long that took), and what the package still holds then (live managers,
pipelines, step recorders, usage records).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import logging
import os
import resource
import time
from pathlib import Path
from typing import Any

from agentscope_ctx._line import IS_1X

BUDGET = 1_600 if IS_1X else 2_000
"""max_input_tokens: each session compacts (at least once; three times on 2.x, whose prompt
carries more tool schemas)."""
TURNS = 4
LINES = 110


def log(n: int, marker: str | None) -> str:
    """Log `n`: about 4 KB of lines; with `marker`, a failed job in its middle holds it."""
    lines = [
        f"10:{i % 60:02d} worker-{n} job={i} status=ok elapsed={i * 7 % 90}ms" for i in range(LINES)
    ]
    if marker is not None:
        lines[LINES // 2] = f"10:55 worker-{n} job=55 status=failed code={marker}"
    return "\n".join(lines) + "\n"


def rss_bytes() -> int:
    """This process's resident set now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _config(args: argparse.Namespace, session: str) -> Any:
    from agentscope_ctx import ContextConfig

    return ContextConfig.model_validate(
        {
            "working_dir": args.working_dir,
            "max_input_tokens": BUDGET,
            "tool_result": {"recent_max_bytes": 2_000, "old_max_bytes": 1_200},
            "summarizer": {"enabled": False},
            "recall": {"session": session},
            "store": {
                "kind": "postgres",
                "dsn": args.dsn,
                "password_env": args.password_env,
                "schema_name": args.schema,
                "max_connections": args.max_connections,
            },
        }
    )


class Figures:
    """What the sessions of this worker measured."""

    def __init__(self) -> None:
        from agentscope_ctx import TokenCounter

        self.counter = TokenCounter("o200k_base")
        self.reply_seconds: list[float] = []
        self.turn_seconds: list[float] = []
        self.model_calls = 0
        self.over_budget: list[int] = []
        self.probes = 0
        self.found = 0
        self.compactions = 0
        self.errors: list[str] = []


async def session(args: argparse.Namespace, index: int, figures: Figures) -> None:
    """One session, start to end (see the module docstring)."""
    from agentscope_ctx.testing import ScriptedChatModel, ToolCall

    from .load_agents import wire

    marker = f"zq{args.worker}x{index}v"

    def answer_probe(prompt: list[dict[str, Any]]) -> str:
        said = str(prompt[-1].get("content"))  # the search's result
        figures.probes += 1
        figures.found += marker in said and "pg-output:" in said
        return "Job 55 failed."

    model = ScriptedChatModel(
        [
            *(item for n in (1, 2, 3) for item in (ToolCall("cat", {"n": n}), f"Read log {n}.")),
            ToolCall("search_history", {"query": marker}),
            answer_probe,
        ]
    )
    helper = ScriptedChatModel()  # the compactor's: summaries
    config = _config(args, f"w{args.worker}-s{index}")
    manager, agent = wire(config, model, helper, lambda n: log(n, marker if n == 1 else None))
    asks = ["Read log 1.", "Read log 2.", "Read log 3.", "Which job failed in log 1?"]
    try:
        for words in asks:
            start = time.perf_counter()
            await agent.say(words)
            figures.turn_seconds.append(time.perf_counter() - start)
    except Exception as exc:  # counted, the others go on
        figures.errors.append(f"{type(exc).__name__}: {exc}"[:300])
    finally:
        await manager.close()
    figures.reply_seconds += agent.replies
    figures.compactions += len(helper.calls)
    for call in model.calls:
        figures.model_calls += 1
        tokens = await figures.counter.count(call.messages, tools=call.tools)
        if tokens > BUDGET:
            figures.over_budget.append(tokens)


def _held() -> dict[str, int]:
    """What the package's objects still live after the sessions (gc'd)."""
    from agentscope_ctx import ContextManager
    from agentscope_ctx.core._pipeline import ContextPipeline
    from agentscope_ctx.services._steps import StepRecorder

    gc.collect()  # a manager's state is a cycle (its middleware, its closures): only gc frees it
    counts = {"managers": 0, "pipelines": 0, "step_recorders": 0}
    for obj in gc.get_objects():
        if isinstance(obj, ContextManager):
            counts["managers"] += 1
        elif isinstance(obj, ContextPipeline):
            counts["pipelines"] += 1
        elif isinstance(obj, StepRecorder):
            counts["step_recorders"] += 1
    return counts


class Warnings(logging.Handler):
    """The package's warnings and errors, counted by their first words."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        key = record.getMessage()[:120]
        self.counts[key] = self.counts.get(key, 0) + 1


async def _released(timeout: float) -> float:
    """Seconds until no manager is alive any more (the background work the sessions left,
    their outputs' indexing, done), at most `timeout`."""
    start = time.perf_counter()
    # polled: the background work a session left (its outputs' indexing) ends on its own
    while _held()["managers"] and time.perf_counter() - start < timeout:  # noqa: ASYNC110
        await asyncio.sleep(0.25)
    return time.perf_counter() - start


def _trimmed_rss() -> int:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed heap back to the system
    except OSError:
        pass
    return rss_bytes()


async def serve(args: argparse.Namespace) -> dict[str, Any]:
    """Run the worker's sessions; its figures."""
    from agentscope_ctx.stores.postgres._pool import _POOLS

    figures = Figures()
    await session(args, -1, Figures())  # warm-up: imports, the schema, the tokenizer
    await _released(60)
    warnings = Warnings()
    logging.getLogger("agentscope_ctx").addHandler(warnings)
    before = _trimmed_rss()
    blocks_before = __import__("sys").getallocatedblocks()
    gate = asyncio.Semaphore(args.in_flight or args.sessions)

    async def gated(index: int) -> None:
        async with gate:
            await session(args, index, figures)

    cpu, start = time.process_time(), time.perf_counter()
    await asyncio.gather(*(gated(args.first + i) for i in range(args.sessions)))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    held_at_end = _held()
    release = await _released(300)
    after = _trimmed_rss()
    usage = Path(args.working_dir) / "usage"
    return {
        "worker": args.worker,
        "pid": os.getpid(),
        "sessions": args.sessions,
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "reply_seconds": figures.reply_seconds,
        "turn_seconds": figures.turn_seconds,
        "model_calls": figures.model_calls,
        "over_budget": figures.over_budget,
        "probes": figures.probes,
        "found": figures.found,
        "compactions": figures.compactions,
        "errors": figures.errors,
        "pool_peak": max((pool.peak for pool in _POOLS.values()), default=0),
        "pool_open_after": sum(pool.open for pool in _POOLS.values()),
        "rss_before": before,
        "rss_peak": peak,
        "rss_after": after,
        "blocks_before": blocks_before,
        "blocks_after": __import__("sys").getallocatedblocks(),
        "held_at_end": held_at_end,
        "release_seconds": release,
        "held": _held(),
        "warnings": warnings.counts,
        "usage_records": len(list(usage.glob("*.json"))) if usage.is_dir() else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", type=int, required=True)
    parser.add_argument("--sessions", type=int, required=True)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument(
        "--in-flight", type=int, default=0, help="at most this many at once (0: all)"
    )
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--password-env", required=True)
    parser.add_argument("--schema", default="agentscope_ctx")
    parser.add_argument("--max-connections", type=int, default=8)
    parser.add_argument("--working-dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    result = asyncio.run(serve(args))
    Path(args.out).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
