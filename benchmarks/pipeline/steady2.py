"""The steady pipeline step on AgentScope 2.x, through the adapter (AgentScope 2.x only).

`bench_pipeline`'s steady state, measured where a 2.x agent pays it: a real 2.x `Agent` with
agentscope_ctx's `ContextManager`, its `AgentState` holding a history of 50, 200, 800, 3200
core messages (entries: a user message, each run of assistant text and tool calls, each tool
result), `max_input_tokens` so large that nothing compacts. After one warm-up run, a step is
what the agent and the middleware do between two model calls: the agent appends a tool call
and its result to its live reply (`AgentState.append_context`), then `on_reasoning`'s work:
`refresh_parts` (the system prompt and tool schemas the agent sends) and `manager.run`
(`StateMirror.pull`, the pipeline, `StateMirror.push`). Mean and median cost per step over
~50 steps, and the ratio to the smallest history; beside them the median CPU time of the
process per step (`time.process_time`), which a shared machine's load disturbs far less than
the wall clock (the time the step waits for a core is not in it).

A 2.x reply is one message that grows by a tool call and its result per step: the mirror
converts only the new blocks of the live reply (from its last entry on) and new messages, and
writes back only the messages the pipeline changed, so a step's cost follows what the step
added, not the history or the reply's length.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentscope.agent import Agent, InjectionConfig
from agentscope.message import (
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
    UserMsg,
)
from agentscope.model import ChatResponse
from agentscope.tool import ToolBase, Toolkit

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.agentscope2._entries import to_entries
from agentscope_ctx.agentscope2._tools import function_tool
from benchmarks._table import print_table, run_and_report
from benchmarks.cost.models2 import ScriptedBase
from benchmarks.pipeline.step import ENCODING, HISTORY_SIZES, STEPS, _prose, _tool_output

NAME = "agent"


class _Idle(ScriptedBase):
    """A model that is never called here (the steps stop before the model call)."""

    async def answer(
        self, formatted: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> ChatResponse:
        raise AssertionError("the steady benchmark makes no model call")


def run_shell(command: str) -> str:
    """Run a shell command.

    Args:
        command (str): The command line.
    """
    raise NotImplementedError


def view_file(file_path: str, start_line: int = 1) -> str:
    """Read a text file.

    Args:
        file_path (str): The file to read.
        start_line (int): The first line to return.
    """
    raise NotImplementedError


def tool_round(rng: random.Random) -> list[Any]:
    """A round of the live reply: a text, a tool call and its result (2.x blocks)."""
    call_id = f"call_{rng.getrandbits(64):016x}"
    tool = rng.choice(["run_shell", "view_file"])
    arguments: dict[str, Any] = (
        {"command": f"pytest tests/test_{rng.randrange(99)}.py -x"}
        if tool == "run_shell"
        else {"file_path": f"src/m{rng.randrange(99)}.py", "start_line": 1}
    )
    output = _tool_output(rng, "read_file" if tool == "view_file" else tool)
    return [
        TextBlock(text=_prose(rng, 12)),
        ToolCallBlock(
            id=call_id, name=tool, input=json.dumps(arguments), state=ToolCallState("finished")
        ),
        ToolResultBlock(
            id=call_id, name=tool, output=[TextBlock(text=output)], state=ToolResultState("success")
        ),
    ]


def build_state(n_entries: int, seed: int = 0) -> list[Msg]:
    """A deterministic 2.x context of about `n_entries` core messages: user requests, each
    followed by the agent's reply (tool rounds, some commentary)."""
    rng = random.Random(seed)
    context: list[Msg] = []
    done = 0  # the entries of the finished messages
    entries = 0
    while entries < n_entries:
        if not context or rng.random() < 0.08:
            done = entries
            context.append(UserMsg(name="user", content=_prose(rng, rng.randint(10, 80))))
            context.append(Msg(name=NAME, role="assistant", content=[]))
        reply = context[-1]
        if rng.random() < 0.09:
            reply.content.append(TextBlock(text=_prose(rng, rng.randint(20, 120))))
        else:
            reply.content.extend(tool_round(rng))
        entries = done + 1 + len(to_entries(reply))
    return context


async def _steady(n: int, root: Path, steps: int) -> dict[str, Any]:
    config = ContextConfig.model_validate(
        {
            "working_dir": str(root),
            "max_input_tokens": 10_000_000,
            "token_counter": ENCODING,
            "summarizer": {"enabled": False},
        }
    )
    manager = ContextManager(config)
    tools: list[ToolBase] = [function_tool(f, read_only=True) for f in (run_shell, view_file)]
    agent = Agent(
        name=NAME,
        system_prompt="You are a careful coding assistant. " * 20,
        model=_Idle("idle", context_size=100_000_000),
        toolkit=Toolkit(tools=tools),
        injection_config=InjectionConfig(inject_runtime_state=False),
        middlewares=[manager.middleware()],
    )
    state = agent.state
    state.context = build_state(n, seed=n)
    state.reply_context.reply_id = state.context[-1].id  # the live reply
    binding = manager.bind(agent)

    async def step() -> Any:
        await manager.refresh_parts(agent, binding)
        report = await manager.run(binding)
        binding.take_notices()
        return report

    start = time.perf_counter()
    warm = await step()
    warm_s = time.perf_counter() - start
    messages = len(binding.memory.messages())

    rng = random.Random(n + 1)
    rounds = [tool_round(rng) for _ in range(steps)]  # built outside the timing
    times, cpu, truncated = [], [], 0
    for blocks in rounds:
        start, start_cpu = time.perf_counter(), time.process_time()
        state.append_context(NAME, blocks)
        report = await step()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        truncated += report.truncated
        assert report.compacted == 0, "steady state must not compact"
    await manager.close()
    return {
        "messages": messages,
        "tokens": warm.tokens_after,
        "warm_run_ms": warm_s * 1e3,
        "steps": steps,
        "step_mean_us": statistics.fmean(times) * 1e6,
        "step_median_us": statistics.median(times) * 1e6,
        "step_cpu_median_us": statistics.median(cpu) * 1e6,
        "truncated_per_step": truncated / steps,
    }


async def _run(history_sizes: Sequence[int], steps: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="bench_steady2_"))
    try:
        steady: dict[str, Any] = {}
        for n in history_sizes:
            steady[str(n)] = await _steady(n, root / f"steady_{n}", steps)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    first = steady[str(history_sizes[0])]
    for row in steady.values():
        row["ratio_vs_smallest"] = row["step_mean_us"] / first["step_mean_us"]
        row["median_ratio_vs_smallest"] = row["step_median_us"] / first["step_median_us"]
        row["cpu_ratio_vs_smallest"] = row["step_cpu_median_us"] / max(
            first["step_cpu_median_us"], 1e-3
        )
    return {"encoding": ENCODING, "steady": steady}


def report(result: dict[str, Any]) -> None:
    """Print the table for `result`."""
    print(
        "steady state on AgentScope 2.x: append a tool call + result to the live reply, then "
        f"refresh_parts + manager.run (pull, pipeline, push); nothing compacts ({result['encoding']})"
    )
    header = (
        f"{'messages':>8} {'tokens':>10} {'warm run ms':>11} {'steps':>5} {'mean us':>9}"
        f" {'median us':>9} {'mean vs 1st':>11} {'median vs 1st':>13} {'cpu us':>7}"
        f" {'cpu vs 1st':>10} {'cuts/step':>9}"
    )
    print_table(
        header,
        (
            f"{row['messages']:>8} {row['tokens']:>10,} {row['warm_run_ms']:11.1f}"
            f" {row['steps']:>5} {row['step_mean_us']:9.0f} {row['step_median_us']:9.0f}"
            f" {row['ratio_vs_smallest']:10.2f}x {row['median_ratio_vs_smallest']:12.2f}x"
            f" {row['step_cpu_median_us']:7.0f} {row['cpu_ratio_vs_smallest']:9.2f}x"
            f" {row['truncated_per_step']:9.2f}"
            for row in result["steady"].values()
        ),
    )


def main(history_sizes: Sequence[int] = HISTORY_SIZES, steps: int = STEPS) -> dict[str, Any]:
    """Run the benchmark, print a report and return the numbers."""
    return run_and_report(_run(history_sizes, steps), report)


if __name__ == "__main__":
    main()
