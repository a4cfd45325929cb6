"""Cost benchmark (issue 12, item 7): what holding the budget costs, with a prompt cache.

Scripted sessions through a real AgentScope 1.x `ReActAgent` that views real files with
AgentScope's `view_text_file` tool (see `cost.session`; `cost.line2` runs the same sessions
on AgentScope 2.x):

- stress: budget 24k tokens, 6 turns x 8 tool calls, outputs of 30 KB to 1.3 MB;
- everyday: the default budget 128k, 10 turns x 10 calls, outputs of 1.5 to 40 KB and a few
  of 200 KB;
- everyday-json: everyday with a quarter of the outputs JSON records with Chinese fields.

Each runs twice, side by side: with agentscope_ctx attached (defaults but the budget; its
compactor and Summarizer on their own scripted model), and with AgentScope's built-in
`ReActAgent.CompressionConfig` (trigger at 75% of the budget, `keep_recent=3`, its summary on
the same kind of scripted model). Only the agent's model and the helpers' models are scripted.

Per run: agent calls, peak prompt (the manager's token counter, the unit of the budget), calls
over budget, tokens sent, prefix reuse against the append-only bound, cost units (cached 0.1,
new 1.25, per 1k tokens; see `cost.meter`), compactions (times the summary was rewritten),
the helpers' calls and prompt tokens as a share of the agent's, and the checks: nothing lost
(dialog + memory hold every message once), every notice's file exists and its chain gives
back the original output (followed with the manager's `read_file`). Then one PASS/FAIL line
per target of the issue ("Done when") for agentscope_ctx.

Runs are seeded, yet token totals differ by about 0.1% between runs, and a compaction may come
one call earlier or later: the saved outputs' file names (`tool_result/{uuid}.txt`) and the
temporary directory's name appear in the prompts, and tokenize differently each time.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg
from agentscope.tool import Toolkit, view_text_file

from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
from benchmarks.cost import checks as cost_checks
from benchmarks.cost import meter as cost_meter
from benchmarks.cost import providers as cost_providers
from benchmarks.cost import report as cost_report
from benchmarks.cost.models1 import AgentScript, HelperModel
from benchmarks.cost.session import (
    SYS_PROMPT,
    Scenario,
    Step,
    user_task,
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
    row = cost_report.row(
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
    return cost_report.row(
        scenario,
        meter,
        {"compression": calls},
        compactions=len(calls),  # each call succeeds: the scripted model always answers
        lost=cost_checks.check_messages(everything, plan),
        reach=reach,
    )


def main(
    scenarios: Sequence[Scenario] | None = None,
    provider: str | None = None,
    sessions: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Run the scenarios (`cost.report.main`), print the tables, return the numbers; with a
    `provider`, the sessions on that provider's simulator instead (`cost.providers`)."""
    if provider is not None:
        return cost_providers.main(provider=provider, sessions=sessions)
    return cost_report.main(scenarios, [("agentscope_ctx", run_ours), ("builtin", run_builtin)])


def options(argv: Sequence[str]) -> dict[str, Any]:
    """`main`'s keyword arguments from ``python -m benchmarks cost [--provider NAME]
    [--sessions A,B]`` (`cost.providers`)."""
    return cost_providers.options(argv)


if __name__ == "__main__":
    main(**options(sys.argv[1:]))
