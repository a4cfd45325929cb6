"""Cost benchmark (issue 12, item 7): what holding the budget costs, with a prompt cache.

Two scripted sessions through a real `ReActAgent` that views real files with AgentScope's
`view_text_file` tool (see `cost_session`):

- stress: budget 24k tokens, 6 turns x 8 tool calls, outputs of 30 KB to 1.3 MB;
- everyday: the default budget 128k, 10 turns x 10 calls, outputs of 1.5 to 40 KB and a few
  of 200 KB.

Each runs twice, side by side: with agentscope_ctx attached (defaults but the budget; its
compactor and Summarizer on their own scripted model), and with AgentScope's built-in
`ReActAgent.CompressionConfig` (trigger at 75% of the budget, `keep_recent=3`, its summary on
the same kind of scripted model). Only the agent's model and the helpers' models are scripted.

Per run: agent calls, peak prompt (the manager's token counter, the unit of the budget), calls
over budget, tokens sent, prefix reuse against the append-only bound, cost units (cached 0.1,
new 1.25, per 1k tokens; see `cost_meter`), compactions (times the summary was rewritten),
the helpers' calls and prompt tokens as a share of the agent's, and the checks: nothing lost
(dialog + memory hold every message once), every notice's file exists and its chain gives
back the original output (followed with the manager's `read_file`). Then one PASS/FAIL line
per target of the issue ("Done when") for agentscope_ctx.

Runs are seeded, yet token totals differ by about 0.1% between runs, and a compaction may come
one call earlier or later: the saved outputs' file names (`tool_result/{uuid}.txt`) and the
temporary directory's name appear in the prompts, and tokenize differently each time.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg
from agentscope.tool import Toolkit, view_text_file

from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
from benchmarks import cost_checks, cost_meter
from benchmarks.cost_models import AgentScript, HelperModel
from benchmarks.cost_session import (
    SYS_PROMPT,
    Scenario,
    Step,
    everyday,
    stress,
    user_task,
    write_files,
)

TRIGGER_RATIO = 0.75  # agentscope_ctx's default `compact_trigger_ratio`, used for both systems


def _toolkit() -> Toolkit:
    toolkit = Toolkit()
    toolkit.register_tool_function(view_text_file)
    return toolkit


def _agent(model: AgentScript, calls: int, **kwargs: Any) -> ReActAgent:
    agent = ReActAgent(
        name="worker",
        sys_prompt=SYS_PROMPT,
        model=model,
        formatter=OpenAIChatFormatter(),
        toolkit=_toolkit(),
        max_iters=calls + 2,
        **kwargs,
    )
    agent.set_console_output_enabled(False)
    return agent


async def _originals(plan: Sequence[Sequence[Step]]) -> dict[str, str]:
    """What each scripted call's tool returned (the tool is deterministic: call it again)."""
    result: dict[str, str] = {}
    for steps in plan:
        for step in steps:
            response = await view_text_file(step.file_path)
            result[step.call_id] = "".join(str(b.get("text", "")) for b in response.content)
    return result


async def run_ours(scenario: Scenario, plan: list[list[Step]], work: Path) -> dict[str, Any]:
    """The session with agentscope_ctx attached."""
    counter, encoder = TokenCounter("cl100k_base"), cost_meter.encoding()
    meter = cost_meter.PromptMeter(counter, encoder)
    helper = HelperModel(lambda: cost_meter.PromptMeter(counter, encoder))
    model = AgentScript(plan, meter)
    agent = _agent(model, scenario.calls)
    config = ContextConfig(
        working_dir=work / "ctx", max_input_tokens=scenario.budget, token_counter="cl100k_base"
    )
    manager = ContextManager(config, model=helper, formatter=OpenAIChatFormatter())
    memory = manager.attach(agent)
    summaries = [memory.compact_summary]

    def probe() -> None:
        if memory.compact_summary != summaries[-1]:
            summaries.append(memory.compact_summary)

    model.probe = probe
    for turn, steps in enumerate(plan):
        await agent(Msg("user", user_task(turn, steps), "user"))
    await manager.close()  # the Summarizer runs in the background
    probe()
    stored, _ = manager.dialog.read()
    live = await memory.get_memory(prepend_summary=False)
    reach = await cost_checks.check_reachable(
        [*stored, *live], await _originals(plan), manager.reader.read_file
    )
    row = _row(
        scenario,
        meter,
        {kind: helper.meters[kind].calls for kind in ("compactor", "summarizer")},
        compactions=len(summaries) - 1,
        lost=cost_checks.check_messages([*stored, *live], plan),
        reach=reach,
    )
    # Whether the summary in use is the compactor model's (not the extractive fallback).
    summary = memory.compact_summary
    row["summary_by_model"] = (summary == helper.last_summary) if summary else None
    return row


async def run_builtin(scenario: Scenario, plan: list[list[Step]], work: Path) -> dict[str, Any]:
    """The session with AgentScope's built-in compression."""
    counter, encoder = TokenCounter("cl100k_base"), cost_meter.encoding()
    meter = cost_meter.PromptMeter(counter, encoder)
    helper = HelperModel(lambda: cost_meter.PromptMeter(counter, encoder))
    compression = ReActAgent.CompressionConfig(
        enable=True,
        agent_token_counter=counter,
        trigger_threshold=int(TRIGGER_RATIO * scenario.budget),
        keep_recent=3,
        compression_model=helper,
        compression_formatter=OpenAIChatFormatter(),
    )
    model = AgentScript(plan, meter)
    agent = _agent(model, scenario.calls, compression_config=compression)
    for turn, steps in enumerate(plan):
        await agent(Msg("user", user_task(turn, steps), "user"))
    everything = await agent.memory.get_memory(prepend_summary=False)
    visible = await agent.memory.get_memory(exclude_mark="compressed", prepend_summary=False)
    reach = await cost_checks.check_reachable(visible, await _originals(plan), None)
    calls = helper.meters["compression"].calls
    return _row(
        scenario,
        meter,
        {"compression": calls},
        compactions=len(calls),  # each call succeeds: the scripted model always answers
        lost=cost_checks.check_messages(everything, plan),
        reach=reach,
    )


def _row(
    scenario: Scenario,
    meter: cost_meter.PromptMeter,
    helpers: dict[str, list[cost_meter.Call]],
    *,
    compactions: int,
    lost: dict[str, Any],
    reach: dict[str, Any],
) -> dict[str, Any]:
    agent = cost_meter.summarise(meter.calls, scenario.budget)
    helper_calls = [c for calls in helpers.values() for c in calls]
    helper = cost_meter.summarise(helper_calls)
    by_kind = {kind: cost_meter.summarise(calls) for kind, calls in helpers.items()}
    return {
        "agent": agent,
        "helper": {
            **helper,
            "by_kind": {k: (v["calls"], v["tokens_sent"]) for k, v in by_kind.items()},
        },
        "helper_share": round(helper["tokens_sent"] / agent["tokens_sent"], 4),
        "total_cost_units": round(agent["cost_units"] + helper["cost_units"], 2),
        "compactions": compactions,
        "nothing_lost": lost,
        "reachable": reach,
        "per_call": cost_meter.per_call(meter.calls),
    }


async def run_scenario(scenario: Scenario) -> dict[str, Any]:
    """Both systems on one scenario, on the same files."""
    with tempfile.TemporaryDirectory(prefix="costbench-") as tmp:
        root = Path(tmp)
        plan = write_files(scenario, root / "repo")
        rows: dict[str, Any] = {}
        for system, run in (("agentscope_ctx", run_ours), ("builtin", run_builtin)):
            start = time.perf_counter()
            rows[system] = await run(scenario, plan, root / system)
            rows[system]["seconds"] = round(time.perf_counter() - start, 2)
    sizes = scenario.sizes
    return {
        "budget": scenario.budget,
        "turns": scenario.turns,
        "calls_per_turn": scenario.calls,
        "output_bytes": {"min": min(sizes), "max": max(sizes), "total": sum(sizes)},
        "systems": rows,
    }


def targets(name: str, row: dict[str, Any]) -> list[tuple[str, bool]]:
    """The issue's "Done when" targets for one scenario of agentscope_ctx."""
    agent = row["agent"]
    checks = [
        ("every prompt within budget", agent["over_budget"] == 0),
        ("nothing lost (dialog + memory hold every message once)", row["nothing_lost"]["ok"]),
        ("every byte reachable through notices", row["reachable"]["ok"]),
    ]
    if name == "everyday":
        checks.insert(0, ("prefix reuse >= 0.90", agent["reuse"] >= 0.90))
    if name == "stress":
        checks[:0] = [
            ("manager's own model tokens <= 25% of the agent's", row["helper_share"] <= 0.25),
            ("<= 10 compactions", row["compactions"] <= 10),
            ("prefix reuse >= 0.60", agent["reuse"] >= 0.60),
        ]
    return checks


def report(name: str, result: dict[str, Any]) -> None:
    """Print one scenario's table and its targets."""
    out = result["output_bytes"]
    print(
        f"{name}: budget {result['budget']:,}, {result['turns']} turns x "
        f"{result['calls_per_turn']} calls, outputs {out['min'] / 1e3:,.1f} KB-"
        f"{out['max'] / 1e3:,.0f} KB ({out['total'] / 1e6:.1f} MB)"
    )
    header = (
        f"{'system':<15}{'calls':>6}{'peak':>9}{'over':>5}{'sent':>11}{'reuse':>7}{'bound':>7}"
        f"{'>1/2':>5}{'cost':>9}{'c@bnd':>8}{'cmp':>5}{'h.calls':>8}{'h.sent':>11}{'share':>7}{'+cost':>8}"
        f"{'lost':>5}{'reach':>7}{'s':>6}"
    )
    print(header)
    print("-" * len(header))
    for system, r in result["systems"].items():
        a, h = r["agent"], r["helper"]
        print(
            f"{system:<15}{a['calls']:>6}{a['peak_budget_tokens']:>9,}{a['over_budget']:>5}"
            f"{a['tokens_sent']:>11,}{a['reuse']:>7.2f}{a['bound_reuse']:>7.2f}"
            f"{a['rewrites_over_half']:>5}{a['cost_units']:>9,.0f}{a['cost_units_at_bound']:>8,.0f}"
            f"{r['compactions']:>5}{h['calls']:>8}{h['tokens_sent']:>11,}"
            f"{r['helper_share']:>7.0%}{h['cost_units']:>8,.0f}"
            f"{'no' if r['nothing_lost']['ok'] else 'YES':>5}"
            f"{r['reachable']['reachable_share']:>7.0%}{r['seconds']:>6.1f}"
        )
    for system, r in result["systems"].items():
        kinds = ", ".join(
            f"{k} {n} calls {t:,} tokens" for k, (n, t) in r["helper"]["by_kind"].items()
        )
        notes = [f"helpers: {kinds}", f"notices in the outputs: {r['reachable']['notices']}"]
        if "summary_by_model" in r:
            by_model = {True: "yes", False: "no", None: "-"}[r["summary_by_model"]]
            notes.append(f"summary in use written by the model: {by_model}")
        notes += r["reachable"]["problems"]
        print(f"  {system}: " + "; ".join(notes))
    for label, ok in targets(name, result["systems"]["agentscope_ctx"]):
        print(f"  {'PASS' if ok else 'FAIL'}  {name}: {label}")


LEGEND = (
    "peak/over: agent prompt tokens by the manager's counter vs the budget; sent: serialised "
    "prompt tokens (tiktoken cl100k) over all agent calls; reuse: share of them in the prefix "
    "shared with the previous call; bound: the same for an append-only prompt of the same "
    "sizes; >1/2: calls that rewrote more than half of the previous prompt; cost: cached x0.1 "
    "+ new x1.25 per 1k tokens (c@bnd: at the bound); cmp: compactions; h.calls, h.sent: "
    "the calls and prompt tokens of the compactor + Summarizer (or the built-in compression), "
    "share: of the agent's tokens, +cost: their cost units; lost: any message missing or repeated; "
    "reach: tool output bytes still reachable (builtin: in messages the model still sees)"
)


def main(scenarios: Sequence[Scenario] | None = None) -> dict[str, Any]:
    """Run the scenarios (stress and everyday by default), print the tables, return numbers."""
    scenarios = list(scenarios) if scenarios is not None else [stress(), everyday()]
    loggers = [logging.getLogger(name) for name in ("as", "agentscope_ctx")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:  # both log every compaction at INFO/WARNING
        lg.setLevel(logging.ERROR)
    results: dict[str, Any] = {}
    try:
        for scenario in scenarios:
            results[scenario.name] = asyncio.run(run_scenario(scenario))
            report(scenario.name, results[scenario.name])
            print()
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
    print(textwrap.fill(LEGEND, 100))
    return {
        "scenarios": results,
        "targets": {
            name: {label: ok for label, ok in targets(name, r["systems"]["agentscope_ctx"])}
            for name, r in results.items()
        },
    }


if __name__ == "__main__":
    main()
