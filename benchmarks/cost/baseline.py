"""agentscope_ctx vs AgentScope's built-in `ReActAgent.CompressionConfig`, on one scripted session.

Both runs use the same ReActAgent setup, the same tools (large outputs) and the same scripted
tool calls; only the context management differs:

- baseline: `compression_config=ReActAgent.CompressionConfig(enable=True, ...)`; its summary call
  (`structured_model=SummarySchema`) is answered by the scripted model with the schema fields
  in `ChatResponse.metadata`;
- ours: the same agent without compression, with `agentscope_ctx.ContextManager` attached
  (extractive summaries, `model=None`).

Tokens are counted with `TokenCounter("cl100k_base").count(messages, tools=tools)` on what the
model actually received. "Reachable" tool output is what the agent can still get at: for the
baseline, the outputs in messages it still sees (compressed messages stay in its memory object
but are never shown to the model again, and it has no tool to read them); for ours, every
output found whole in memory, or saved in `tool_result/` (and, for messages that left the
context, in `dialog/`).
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolUseBlock
from agentscope.model import ChatResponse
from agentscope.tool import Toolkit, ToolResponse

from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
from agentscope_ctx.core.truncation._truncation import parse_notice
from agentscope_ctx.demo._line1 import OfflineModel
from agentscope_ctx.demo._scripted import Prompt, Schemas

BUDGET = 32_000
TURNS = 3
STEPS = 20


class ScriptedModel(OfflineModel):
    """Answers reasoning calls from a fixed script (by call number), and structured calls
    (the baseline's summary) with the `SummarySchema` fields in `metadata`."""

    def __init__(self, turns: int, steps: int) -> None:
        super().__init__("scripted")
        self.turns, self.steps = turns, steps
        self.step = 0
        self.calls: list[dict[str, Any]] = []  # reasoning calls
        self.summary_calls: list[dict[str, Any]] = []  # structured (compression) calls

    async def answer(self, messages: Prompt, tools: Schemas, structured: Any) -> ChatResponse:
        if structured is not None:
            self.summary_calls.append({"messages": messages, "tools": tools})
            fields = {name: f"{name}: scripted summary" for name in structured.model_fields}
            return ChatResponse(content=[TextBlock(type="text", text="summary")], metadata=fields)
        self.calls.append({"messages": messages, "tools": tools})
        n = self.step
        self.step += 1
        turn, i = divmod(n, self.steps + 1)
        if i == self.steps:
            return ChatResponse(content=[TextBlock(type="text", text=f"turn {turn} done")])
        name, args = (
            ("fetch_page", {"url": f"http://127.0.0.1/page/{n}"})
            if n % 2 == 0
            else ("run_shell", {"command": f"grep -rn error logs/{n}"})
        )
        return ChatResponse(
            content=[
                ToolUseBlock(type="tool_use", id=f"call{n}", name=name, input=args, raw_input="")
            ]
        )


def make_toolkit(outputs: dict[str, str]) -> Toolkit:
    """Two tools with large outputs (recorded in `outputs` by their first line)."""
    toolkit = Toolkit()

    def fetch_page(url: str) -> ToolResponse:
        """Fetch a web page.

        Args:
            url (str): the address.
        """
        n = int(url.rsplit("/", 1)[-1])
        body = "".join(
            f"<p id='{n}-{i}'>paragraph {i} of page {n}: 中文 😀 text</p>\n" for i in range(700)
        )
        text = f"<html page={n}>\n{body}</html>\n"
        outputs[f"page {n}"] = text
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    def run_shell(command: str) -> ToolResponse:
        """Run a shell command.

        Args:
            command (str): the command line.
        """
        text = f"$ {command}\n" + "".join(
            f"logs/app.py:{i}: ERROR request {i} failed: timeout after 30s\n" for i in range(900)
        )
        outputs[command] = text
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    toolkit.register_tool_function(fetch_page)
    toolkit.register_tool_function(run_shell)
    return toolkit


def _output_text(block: dict[str, Any]) -> str:
    output = block.get("output")
    if isinstance(output, str):
        return output
    return "".join(b.get("text", "") for b in output or [] if isinstance(b, dict))


async def _prompt_stats(counter: TokenCounter, calls: list[dict[str, Any]]) -> list[int]:
    return [await counter.count(c["messages"], tools=c["tools"]) for c in calls]


def _agent(model: ScriptedModel, outputs: dict[str, str], **options: Any) -> ReActAgent:
    """The session's `ReActAgent` (its tools record their outputs in `outputs`)."""
    agent = ReActAgent(
        name="worker",
        sys_prompt="You are a careful assistant.",
        model=model,
        formatter=OpenAIChatFormatter(),
        toolkit=make_toolkit(outputs),
        max_iters=STEPS + 5,
        **options,
    )
    agent.set_console_output_enabled(False)
    return agent


async def run_baseline(workdir: Path, counter: TokenCounter) -> dict[str, Any]:
    outputs: dict[str, str] = {}
    model = ScriptedModel(TURNS, STEPS)
    compression = ReActAgent.CompressionConfig(
        enable=True,
        agent_token_counter=counter,
        trigger_threshold=int(0.75 * BUDGET),
        keep_recent=3,
    )
    agent = _agent(model, outputs, compression_config=compression)
    for turn in range(TURNS):
        await agent(Msg("user", f"task {turn}: look around", "user"))
    visible = await agent.memory.get_memory(exclude_mark="compressed", prepend_summary=False)
    everything = await agent.memory.get_memory(prepend_summary=False)

    def tool_bytes(msgs: list[Msg]) -> int:
        return sum(
            len(_output_text(b).encode("utf-8"))
            for m in msgs
            for b in m.get_content_blocks("tool_result")
        )

    return {
        "model": model,
        "outputs": outputs,
        "reachable_bytes": tool_bytes(visible),
        "held_hidden_bytes": tool_bytes(everything) - tool_bytes(visible),
    }


async def run_ours(workdir: Path, counter: TokenCounter) -> dict[str, Any]:
    outputs: dict[str, str] = {}
    model = ScriptedModel(TURNS, STEPS)
    agent = _agent(model, outputs)
    config = ContextConfig(
        working_dir=workdir,
        max_input_tokens=BUDGET,
        token_counter="cl100k_base",
        tool_result={"recent_max_bytes": 16_384, "old_max_bytes": 2_048, "recent_n": 3},
        summarizer={"enabled": False},
    )
    manager = ContextManager(config, model=None, token_counter=counter)
    memory = manager.attach(agent)
    for turn in range(TURNS):
        await agent(Msg("user", f"task {turn}: look around", "user"))
    stored, _ = manager.dialog.read()
    originals = set(outputs.values())
    reachable = 0
    seen: set[str] = set()
    for msg in [*stored, *memory.messages()]:
        for block in msg.get_content_blocks("tool_result"):
            if str(block.get("id")) in seen:
                continue
            text = _output_text(block)
            parsed = parse_notice(text)
            if parsed is None:
                full = text
            else:
                path = Path(parsed[1].file_path)
                full = path.read_text(encoding="utf-8") if path.exists() else ""
            if full in originals:
                reachable += len(full.encode("utf-8"))
                seen.add(str(block.get("id")))
    return {
        "model": model,
        "outputs": outputs,
        "reachable_bytes": reachable,
        "held_hidden_bytes": 0,
    }


async def _measure(name: str, run: Any, counter: TokenCounter) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = await run(Path(tmp) / "ctx", counter)
        seconds = time.perf_counter() - start
    model: ScriptedModel = result["model"]
    prompts = await _prompt_stats(counter, model.calls)
    summaries = await _prompt_stats(counter, model.summary_calls)
    produced = sum(len(t.encode("utf-8")) for t in result["outputs"].values())
    return {
        "run": name,
        "steps": len(prompts),
        "prompt_min": min(prompts),
        "prompt_median": int(statistics.median(prompts)),
        "prompt_mean": int(statistics.fmean(prompts)),
        "prompt_max": max(prompts),
        "total_tokens_sent": sum(prompts) + sum(summaries),
        "step_tokens_sent": sum(prompts),
        "summary_calls": len(summaries),
        "summary_tokens_sent": sum(summaries),
        "peak_prompt": max(prompts + summaries),
        "calls_over_budget": sum(1 for t in prompts + summaries if t > BUDGET),
        "tool_output_bytes": produced,
        "reachable_bytes": result["reachable_bytes"],
        "reachable_share": round(result["reachable_bytes"] / produced, 4) if produced else 1.0,
        "held_hidden_bytes": result["held_hidden_bytes"],
        "seconds": round(seconds, 2),
    }


def main() -> dict[str, Any]:
    """Run both sessions, print a table, return the numbers."""
    counter = TokenCounter("cl100k_base")
    agentscope_log = logging.getLogger("as")  # AgentScope logs every compression at INFO
    level = agentscope_log.level
    agentscope_log.setLevel(logging.WARNING)
    try:
        rows = [
            asyncio.run(_measure("builtin CompressionConfig", run_baseline, counter)),
            asyncio.run(_measure("agentscope_ctx", run_ours, counter)),
        ]
    finally:
        agentscope_log.setLevel(level)
    print(
        f"one scripted session: {TURNS} turns x {STEPS} tool calls (~45-55 KB each), "
        f"budget {BUDGET:,} tokens, counter {counter.backend}"
    )
    print(
        "baseline: trigger_threshold=0.75*budget, keep_recent=3; ours: ContextManager, "
        "model=None (extractive), recent/old 16 KB / 2 KB"
    )
    header = (
        f"{'run':<26}{'steps':>6}{'min':>8}{'median':>8}{'mean':>8}{'max':>8}"
        f"{'sent':>11}{'sum calls':>10}{'peak':>8}{'over':>6}{'reach MB':>10}{'of MB':>7}{'share':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['run']:<26}{r['steps']:>6}{r['prompt_min']:>8,}{r['prompt_median']:>8,}"
            f"{r['prompt_mean']:>8,}{r['prompt_max']:>8,}{r['total_tokens_sent']:>11,}"
            f"{r['summary_calls']:>10}{r['peak_prompt']:>8,}{r['calls_over_budget']:>6}"
            f"{r['reachable_bytes'] / 1e6:>10.2f}{r['tool_output_bytes'] / 1e6:>7.2f}"
            f"{r['reachable_share']:>7.0%}"
        )
    print(
        "min/median/mean/max: prompt tokens per reasoning step; sent: all tokens sent (steps + "
        "summary calls); peak and over: over all model calls (budget "
        f"{BUDGET:,}); reach: tool output the agent can still read"
    )
    hidden = rows[0]["held_hidden_bytes"]
    print(
        f"(baseline: {hidden / 1e6:.2f} MB more stay in its memory object marked 'compressed', "
        "never shown to the model again)"
    )
    return {"budget": BUDGET, "turns": TURNS, "steps_per_turn": STEPS, "runs": rows}


if __name__ == "__main__":
    main()
