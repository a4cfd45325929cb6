"""The cost benchmark on AgentScope 2.x: agentscope_ctx beside 2.x's own context management.

The sessions of `cost.line1` (`cost.session`: the same files, the same script) through a real
2.x `Agent` that views them with a `view_text_file` tool (the twin of 1.x's: the whole file
with line numbers). Only the model is scripted (`cost.models2.Provider`), and it enforces its
window: the model's `context_size` is the scenario's budget, and a prompt over it (counted
with tiktoken on what the model received) is rejected with a context-length error (HTTP 400),
as a provider would. Each scenario runs twice:

- agentscope_ctx: `Agent(..., middlewares=[manager.middleware()])`, defaults but the budget
  (`max_input_tokens`; it also takes the model's `context_size`), its compactor and
  Summarizer on their own scripted model;
- builtin: the agent alone, with its own `ContextConfig`: compression when its bytes / 4
  estimate passes `trigger_ratio` x `context_size` (0.75, agentscope_ctx's trigger, for both),
  the summary by the same model (a structured-output call, answered), `reserve_ratio` 0.1,
  `tool_result_limit` = our `recent_max_bytes` / 4 (the same bytes kept of a new output: the
  default, 50,000, is twice the stress budget), no offloader (AgentScope's default: what it
  cuts or compresses is gone).

Both run without the runtime-state injection (`inject_runtime_state=False`: a time stamp in
every prompt would make the runs differ; the built-in compression does not use it). A reply
the provider's error ends (after agentscope_ctx's one retry, or at once for the built-in)
counts as a failed turn; the session goes on with the next task, as a user would. `fail`
counts the rejected agent calls (metered like the others: they were sent); the built-in's
rejected compression calls are counted in its helper calls.

Checks as in `cost.line1`: nothing lost (agentscope_ctx: dialog + memory hold every message
once; builtin: what its state still holds) and every output reachable.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.agent import ContextConfig as AgentContextConfig
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
from agentscope_ctx.agentscope2._entries import to_entries
from agentscope_ctx.agentscope2._tools import function_tool
from agentscope_ctx.models._guard import is_context_overflow
from benchmarks.cost import checks as cost_checks
from benchmarks.cost import meter as cost_meter
from benchmarks.cost import providers as cost_providers
from benchmarks.cost import report as cost_report
from benchmarks.cost.models2 import Helper, Provider
from benchmarks.cost.session import SYS_PROMPT, Scenario, Step, user_task

TRIGGER_RATIO = 0.75
"""agentscope_ctx's default `compact_trigger_ratio`, used for both systems."""

logger = logging.getLogger(__name__)


def view_text_file(file_path: str) -> str:
    """View a text file, with line numbers.

    Args:
        file_path (str): The target file path.
    """
    with open(file_path, encoding="utf-8") as file:
        numbered = "".join(f"{i + 1}: {line}" for i, line in enumerate(file))
    return f"The content of {file_path}:\n```\n{numbered}```"


def _agent(model: Provider, calls: int, **kwargs: Any) -> Agent:
    toolkit = Toolkit(tools=[function_tool(view_text_file, read_only=True)])
    return Agent(
        name="worker",
        system_prompt=SYS_PROMPT,
        model=model,
        toolkit=toolkit,
        react_config=ReActConfig(max_iters=calls + 2),
        injection_config=InjectionConfig(inject_runtime_state=False),
        **kwargs,
    )


def _meters() -> tuple[TokenCounter, Any]:
    return TokenCounter("cl100k_base"), cost_meter.encoding()


async def _session(model: Provider, agent: Agent, plan: list[list[Step]]) -> str:
    """Every turn of the script; how the session ended."""
    failed: list[str] = []
    for turn, steps in enumerate(plan):
        model.turn = turn
        try:
            await agent.reply(UserMsg(name="user", content=user_task(turn, steps)))
        except Exception as exc:  # the provider's error ends the reply, not the session
            why = (
                "the provider's context-length error"
                if is_context_overflow(exc)
                else f"{type(exc).__name__}: {str(exc)[:100]}"
            )
            failed.append(f"turn {turn + 1} ({why})")
    if not failed:
        return "completed"
    return f"{len(failed)} of {len(plan)} turns failed, first {failed[0]}"


def _originals(plan: Sequence[Sequence[Step]], issued: set[str]) -> dict[str, str]:
    """What each tool call the model made returned (the tool is deterministic)."""
    return {
        s.call_id: view_text_file(s.file_path)
        for steps in plan
        for s in steps
        if s.call_id in issued
    }


async def run_ours(scenario: Scenario, plan: list[list[Step]], work: Path) -> dict[str, Any]:
    """The session with agentscope_ctx's middleware."""
    counter, encoder = _meters()
    meter = cost_meter.PromptMeter(counter, encoder)
    model = Provider(plan, meter, cost_meter.PromptMeter(counter, encoder), window=scenario.budget)
    helper = Helper(lambda: cost_meter.PromptMeter(counter, encoder))
    config = ContextConfig(
        working_dir=work / "ctx", max_input_tokens=scenario.budget, token_counter="cl100k_base"
    )
    manager = ContextManager(config, model=helper)
    agent = _agent(model, scenario.calls, middlewares=[manager.middleware()])
    memory = manager.bind(agent).memory
    summaries = [memory.compact_summary]

    def probe() -> None:
        if memory.compact_summary != summaries[-1]:
            summaries.append(memory.compact_summary)

    model.probe = probe
    ended = await _session(model, agent, plan)
    await manager.context_usage(agent)  # brings the memory in step with the final state
    await manager.close()  # the Summarizer runs in the background
    probe()
    stored, _ = manager.dialog.read()
    live = memory.messages()
    reach = await cost_checks.check_reachable(
        [*stored, *live], _originals(plan, model.issued), manager.reader.read_file
    )
    row = cost_report.row(
        scenario,
        meter,
        {kind: helper.meters[kind].calls for kind in ("compactor", "summarizer")},
        compactions=len(summaries) - 1,
        lost=cost_checks.check_messages([*stored, *live], plan, model.issued, model.answers),
        reach=reach,
        failed=len(model.rejected),
        ended=ended,
    )
    summary = memory.compact_summary
    row["summary_by_model"] = (summary == helper.last_summary) if summary else None
    return row


async def run_builtin(scenario: Scenario, plan: list[list[Step]], work: Path) -> dict[str, Any]:
    """The session with AgentScope 2.x's own context management."""
    counter, encoder = _meters()
    meter, compression = (cost_meter.PromptMeter(counter, encoder) for _ in range(2))
    model = Provider(plan, meter, compression, window=scenario.budget)
    context = AgentContextConfig(
        trigger_ratio=TRIGGER_RATIO,
        tool_result_limit=ContextConfig().tool_result.recent_max_bytes // 4,
    )
    agent = _agent(model, scenario.calls, context_config=context)
    ended = await _session(model, agent, plan)
    entries = [entry for msg in agent.state.context for entry, _ in to_entries(msg)]
    reach = await cost_checks.check_reachable(entries, _originals(plan, model.issued), None)
    return cost_report.row(
        scenario,
        meter,
        {"compression": compression.calls},
        compactions=len(compression.calls) - len(model.rejected_compression),
        lost=cost_checks.check_messages(entries, plan, model.issued, model.answers),
        reach=reach,
        failed=len(model.rejected),
        ended=ended,
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
