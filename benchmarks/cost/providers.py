"""What a session costs on the providers' own rules, through AgentScope's real model classes
(issue 45): ``python -m benchmarks cost --provider anthropic|dashscope|openai
[--sessions stress,everyday,small,thinking]`` (or ``python -m benchmarks.cost.providers``).

Each session runs against an offline simulator of the provider's HTTP API written from its
documentation (`tests/support/anthropic_sim.py`; `tests/support/chat_sim.py` with the
``dashscope`` and ``openai`` profiles): requests are validated, the prompt cache is accounted
as the provider bills it (breakpoints, the 20-block lookback, TTLs; OpenAI's automatic
prefixes in 128-token steps), costs at the model's list prices (Claude Sonnet 4.5; Qwen-Plus
on Model Studio; gpt-5 on OpenAI). The simulator's clock is virtual (`VirtualClock`), 5 s a
call: no entry expires, as in a session that does not pause, but in ``paced``, where the user
takes 6 minutes before each task, past the 5-minute TTL (the package reads the same clock).
Only the model's answers are scripted.

Sessions (`benchmarks/cost/session.py`: the same files and script as the cost benchmark):

- ``stress``: 6 turns of 8 `view_text_file` calls, outputs of 30 KB-1.3 MB, budget 24,000;
- ``everyday``: 10 turns of 10 calls, outputs of 1.5-40 KB (every 23rd 200 KB), budget 128,000;
- ``small``: 4 turns of 6 calls, outputs of 1.5-12 KB, a 4,000-token window;
- ``paced``: ``everyday`` with 6 minutes before each task after the first (a person reading
  the answers): each task opens on a cold cache;
- ``thinking`` (Anthropic only): `tests/support/thinking_session.py`, extended thinking on, 6
  turns of 8 log reads, budget 24,000; AgentScope's own compression cannot run there (its
  structured-output call forces `tool_choice`, which thinking refuses).

Systems, on AgentScope 2.x (the 2.x `Agent`):

- ``agentscope_ctx``: the middleware, defaults but the budget; its compactor and Summarizer on
  the same provider (their calls are counted in the cost);
- ``builtin``: AgentScope's own context management (`ContextConfig(trigger_ratio=0.75,
  tool_result_limit=recent_max_bytes // 4)`), its summary by the same provider.

Printed per session and system: the agent's calls and the helpers' (compactor, Summarizer,
the built-in's summary), rejected calls, the agent's cache read ratio (cache reads / prompt
tokens) beside the append-only bound's (`benchmarks.cost.bound`: each call reading all it
can of the previous prompt from the cache, writing what the session added since), the
agent's cost in USD beside the bound's and their ratio, and the cost of every call (the
helpers' too: what the user pays).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agentscope_ctx._line import AGENTSCOPE_VERSION, IS_1X  # noqa: E402
from benchmarks.cost import bound  # noqa: E402
from benchmarks.cost import script as cost_script  # noqa: E402
from benchmarks.cost.session import (  # noqa: E402
    SYS_PROMPT,
    Scenario,
    Step,
    everyday,
    stress,
    user_task,
    write_files,
)

SECONDS_PER_CALL = 5.0
PAUSE_SECONDS = 360.0
TTL_SECONDS = 300.0
"""The cache TTL of every provider here (Anthropic's 5 minutes, the package's default)."""
PROVIDERS = ("anthropic", "dashscope", "openai")
SESSIONS = ("stress", "everyday", "small", "paced", "thinking")
MODELS = {"anthropic": "claude-sonnet-4-5", "dashscope": "qwen-plus", "openai": "gpt-5"}
WINDOWS = {"anthropic": 200_000, "dashscope": 131_072, "openai": 400_000}
"""The models' own windows: the provider refuses a prompt over it; the session's budget
(`max_input_tokens`, and the agent model's `context_size` for AgentScope's own compression)
is the scenario's."""
STRUCTURED = "generate_structured_output"
TRIGGER_RATIO = 0.75

logger = logging.getLogger(__name__)


def small(turns: int = 4, calls: int = 6, budget: int = 4_000, seed: int = 3) -> Scenario:
    """A 4,000-token window, outputs of 1.5 to 12 KB (log-uniform)."""
    import math
    import random

    rng = random.Random(seed)
    sizes = tuple(
        int(math.exp(rng.uniform(math.log(1_500), math.log(12_000)))) for _ in range(turns * calls)
    )
    return Scenario("small", budget, turns, calls, sizes, seed)


def paced() -> Scenario:
    """`everyday` with 6 minutes before each task after the first (`Scenario.pause`)."""
    import dataclasses

    return dataclasses.replace(everyday(), name="paced", pause=PAUSE_SECONDS)


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "stress": stress,
    "everyday": everyday,
    "small": small,
    "paced": paced,
}


# -- the model's answers -------------------------------------------------------------------


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [
        str(t.get("name") or t.get("function", {}).get("name")) for t in body.get("tools") or []
    ]


def _kind(body: object) -> str:
    """`kind_of` a request the simulator kept (one it could not parse: the agent's)."""
    return kind_of(body) if isinstance(body, dict) else "agent"


def kind_of(body: dict[str, Any]) -> str:
    """Who made a request: ``agent``, ``compactor``, ``summarizer`` or ``compression``."""
    names = _tool_names(body)
    if STRUCTURED in names:
        return "compression"
    if any(n.endswith("memory_file") for n in names):
        return "summarizer"
    if "You are the context compactor" in json.dumps(body, ensure_ascii=False):
        return "compactor"
    return "agent"


class Script:
    """The scripted model of one session: the agent's steps turn by turn (counted by the
    answers it gave itself: compaction takes the older calls out of the prompt), and the
    helpers' answers (`cost.script`)."""

    def __init__(self, plan: list[list[Step]], make: Callable[..., Any]) -> None:
        self.answers = cost_script.agent_answers(plan)
        self.make = make
        self.given: dict[int, int] = {}
        self.issued: set[str] = set()

    def __call__(self, body: dict[str, Any]) -> Any:
        kind = kind_of(body)
        text = cost_script.dumps(body.get("messages"))
        if kind == "compression":
            tool = next(t for t in body["tools"] if STRUCTURED in json.dumps(t))
            schema = tool.get("input_schema") or tool.get("function", {}).get("parameters", {})
            fields = cost_script.structured_summary(
                schema.get("properties", {}), *cost_script.goal_and_paths(text)
            )
            return self.make(tool_calls=[(STRUCTURED, fields)])
        if kind == "compactor":
            return self.make(text=cost_script.summary(*cost_script.goal_and_paths(text)))
        if kind == "summarizer":
            done = text.count("tool_result") + text.count('"role": "tool"')
            step = cost_script.summarizer_step(done, text)
            if step is None:
                return self.make(text="Recorded one lesson.")
            return self.make(tool_calls=[step])
        tasks = [int(n) for n in _task_numbers(text)]
        turn = (tasks[-1] - 1) if tasks else 0
        answers = self.answers[turn] if turn < len(self.answers) else []
        at = self.given.get(turn, 0)
        if at >= len(answers):
            return self.make(text="Nothing more to do.")
        self.given[turn] = at + 1
        answer = answers[at]
        if answer.step is None:
            return self.make(text=answer.text)
        self.issued.add(answer.step.call_id)
        return self.make(text=answer.text, tool_calls=[(cost_script.TOOL, answer.arguments)])


def _task_numbers(text: str) -> list[str]:
    import re

    return re.findall(r"Task (\d+): review these files", text)


# -- the providers -------------------------------------------------------------------------


class VirtualClock:
    """A session's time in seconds: `SECONDS_PER_CALL` a request (`tick`, the simulator's
    clock), and the user's pauses (`pause`); `read` tells the time without a tick (the
    package's clock, `ContextPipeline.clock`)."""

    def __init__(self) -> None:
        self.now = 0.0

    def tick(self) -> float:
        now, self.now = self.now, self.now + SECONDS_PER_CALL
        return now

    def read(self) -> float:
        return self.now

    def pause(self, seconds: float) -> None:
        self.now += seconds


@contextmanager
def provider(
    name: str,
    responder: Callable[[dict[str, Any]], Any],
    window: int,
    clock: VirtualClock | None = None,
) -> Iterator[Any]:
    """(simulator, model factory) of provider `name`; the clock virtual (see the module)."""
    clock = clock or VirtualClock()
    if name == "anthropic":
        from tests.support import anthropic_sim

        sim = anthropic_sim.AnthropicSim(responder, model_window=window, clock=clock.tick)
        with anthropic_sim.serve(sim) as url:
            yield sim, lambda: _anthropic(url)
        return
    from tests.support import chat_sim

    sim = chat_sim.ChatSim(responder, profile=name, model_window=window, clock=clock.tick)
    with chat_sim.serve(sim) as url:
        yield sim, lambda: _chat(name, url)


def _make_turn(name: str) -> Callable[..., Any]:
    if name == "anthropic":
        from tests.support.anthropic_sim import Turn
    else:
        from tests.support.chat_sim import Turn  # type: ignore[assignment]

    def make(text: str = "", tool_calls: list[tuple[str, dict[str, Any]]] | None = None) -> Any:
        return Turn(text=text, tool_calls=list(tool_calls or []))

    return make


def _anthropic(url: str) -> Any:
    from agentscope.credential import AnthropicCredential
    from agentscope.model import AnthropicChatModel

    return AnthropicChatModel(
        credential=AnthropicCredential(api_key="sk-bench", base_url=url),
        model=MODELS["anthropic"],
        parameters=AnthropicChatModel.Parameters(max_tokens=2048),
        stream=True,
        max_retries=0,
        client_kwargs={"max_retries": 0},
    )


def _chat(name: str, url: str) -> Any:
    from agentscope.credential import DashScopeCredential, OpenAICredential
    from agentscope.model import DashScopeChatModel, OpenAIChatModel

    if name == "dashscope":
        return DashScopeChatModel(
            credential=DashScopeCredential(api_key="sk-bench", base_url=url),
            model=MODELS["dashscope"],
            stream=True,
            max_retries=0,
        )
    from tests.support.chat_sim import OPENAI_URL, openai_routed

    # on OpenAI's URL, as a user's model is (the package sends it a prompt_cache_key and
    # counts its cache gone after 10 idle minutes), the requests routed to the simulator
    return OpenAIChatModel(
        credential=OpenAICredential(api_key="sk-bench", base_url=OPENAI_URL),
        model=MODELS["openai"],
        stream=True,
        max_retries=0,
        client_kwargs=openai_routed(url),
    )


# -- one session ---------------------------------------------------------------------------


def view_text_file(file_path: str) -> str:
    """View a text file, with line numbers.

    Args:
        file_path (str): The target file path.
    """
    with open(file_path, encoding="utf-8") as file:
        numbered = "".join(f"{i + 1}: {line}" for i, line in enumerate(file))
    return f"The content of {file_path}:\n```\n{numbered}```"


async def run_system(
    system: str,
    name: str,
    scenario: Scenario,
    work: Path,
    inspect: Callable[[Any], None] | None = None,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One system on one scenario of provider `name`: its row (`inspect`, if given, is
    handed the simulator at the end: `benchmarks.cost.calls` reads its requests; `settings`
    are `ContextConfig` fields set beside the budget, for a variant)."""
    from agentscope.agent import Agent, InjectionConfig, ReActConfig
    from agentscope.agent import ContextConfig as AgentContextConfig
    from agentscope.message import UserMsg
    from agentscope.tool import Toolkit

    from agentscope_ctx import ContextConfig, ContextManager
    from agentscope_ctx.agentscope2._tools import function_tool

    plan = write_files(scenario, work / "repo")
    script = Script(plan, _make_turn(name))
    clock = VirtualClock()
    with provider(name, script, WINDOWS[name], clock) as (sim, make_model):
        model = make_model()
        model.context_size = scenario.budget
        extra: dict[str, Any] = {}
        manager = None
        if system == "agentscope_ctx":
            config = ContextConfig(
                working_dir=work / "ctx",
                max_input_tokens=scenario.budget,
                token_counter="cl100k_base",
                **(settings or {}),
            )
            manager = ContextManager(config, model=make_model())
            extra["middlewares"] = [manager.middleware()]
        else:
            extra["context_config"] = AgentContextConfig(
                trigger_ratio=TRIGGER_RATIO,
                tool_result_limit=ContextConfig().tool_result.recent_max_bytes // 4,
            )
        agent = Agent(
            name="worker",
            system_prompt=SYS_PROMPT,
            model=model,
            toolkit=Toolkit(tools=[function_tool(view_text_file, read_only=True)]),
            react_config=ReActConfig(max_iters=scenario.calls + 2),
            injection_config=InjectionConfig(inject_runtime_state=False),
            **extra,
        )
        if manager is not None:
            manager._binding(agent).pipeline.clock = clock.read  # the session's time
        failed, cold = 0, set[int]()
        for turn, steps in enumerate(plan):
            if turn and scenario.pause:
                clock.pause(scenario.pause)
                if scenario.pause > TTL_SECONDS:  # the next agent call finds no cache
                    cold.add(sum(_kind(b) == "agent" for b in sim.requests))
            try:
                await agent.reply(UserMsg(name="user", content=user_task(turn, steps)))
            except Exception as exc:  # the provider's error ends the reply, not the session
                failed += 1
                logger.info("turn %d failed: %s", turn + 1, str(exc)[:200])
        if manager is not None:
            await manager.close()
        if inspect is not None:
            inspect(sim)
    return row(sim, failed, cold)


async def run_thinking(work: Path) -> dict[str, Any]:
    """The thinking session (Anthropic; `tests.support.thinking_session`)."""
    from tests.support import anthropic_sim
    from tests.support.thinking_session import run_session

    clock = VirtualClock()
    original = anthropic_sim.AnthropicSim.__init__

    def init(self: anthropic_sim.AnthropicSim, *args: Any, **kwargs: Any) -> None:
        kwargs["clock"] = clock.tick
        original(self, *args, **kwargs)

    anthropic_sim.AnthropicSim.__init__ = init  # type: ignore[method-assign]
    try:
        sim, _ = await run_session(
            work, budget=24_000, turns=6, steps=8, lines=300, window=WINDOWS["anthropic"]
        )
    finally:
        anthropic_sim.AnthropicSim.__init__ = original  # type: ignore[method-assign]
    return row(sim, 0)


def row(sim: Any, failed_turns: int, cold: Collection[int] = ()) -> dict[str, Any]:
    """The figures of one run from its simulator's calls (see the module docstring); `cold`:
    the agent calls (indexes) made after a pause past the cache's TTL (`bound.reads`)."""
    kinds = [_kind(body) for body in sim.requests]
    calls = list(sim.calls)
    agent = [c for c, k in zip(calls, kinds, strict=True) if k == "agent"]
    bodies = [b if isinstance(b, dict) else None for b in sim.requests]
    prompts = [_prompt_tokens(c) for c in agent]
    read = sum(_read_tokens(c) for c in agent)
    agent_bodies = [b for b, k in zip(bodies, kinds, strict=True) if k == "agent"]
    bound_reads = bound.reads(prompts, bound.added_tokens(agent_bodies, prompts), cold)
    totals = sim.summary()
    bound_usd = append_only_bound(agent, sim, bound_reads)
    agent_cost = sum(c.cost_usd for c in agent)
    return {
        "agent_calls": len(agent),
        "helper_calls": len(calls) - len(agent),
        "rejected": totals["rejected"],
        "failed_turns": failed_turns,
        "read_ratio": round(read / sum(prompts), 3) if sum(prompts) else 0.0,
        "bound_read_ratio": round(sum(bound_reads) / sum(prompts), 3) if sum(prompts) else 0.0,
        "agent_cost_usd": round(agent_cost, 4),
        "cost_usd": round(totals["cost_usd"], 4),
        "bound_usd": round(bound_usd, 4),
        "cost_over_bound": round(agent_cost / bound_usd, 2) if bound_usd else None,
        "cold_calls": sorted(cold),
    }


def append_only_bound(calls: list[Any], sim: Any, reads: list[int]) -> float:
    """USD of the agent's prompts at the append-only bound (`bound`: each call reading
    `reads`, all it can of the previous prompt, and writing the rest, at the provider's
    write price: 1.25x on Anthropic and Model Studio, 1x on OpenAI's automatic cache), the
    answers at the output price."""
    total = 0.0
    for call, read in zip(calls, reads, strict=True):
        prompt = _prompt_tokens(call)
        if prompt:
            total += _price(sim, call, read, prompt - read)
    return total


def _read_tokens(call: Any) -> int:
    return int(getattr(call, "cache_read_input_tokens", getattr(call, "cached_tokens", 0)) or 0)


def _prompt_tokens(call: Any) -> int:
    return int(getattr(call, "prompt_tokens", 0) or 0)


def _price(sim: Any, call: Any, read: int, written: int) -> float:
    from tests.support import anthropic_sim

    if isinstance(sim, anthropic_sim.AnthropicSim):
        price = anthropic_sim.spec_of(call.model or MODELS["anthropic"]).price
        units = (read * price.read + written * price.write_5m) * price.input
        return (units + call.output_tokens * price.output) / 1_000_000
    from tests.support import chat_sim

    price = chat_sim.price_for(sim.profile, call.model)
    write = 1.25 if sim.profile == "dashscope" else 1.0
    units = (read * price.cache_read + written * write) * price.input
    return (units + call.completion_tokens * price.output) / 1_000_000


# -- the command ---------------------------------------------------------------------------


def options(argv: Sequence[str]) -> dict[str, Any]:
    """`main`'s keyword arguments from the command line (this module's, and those after
    ``cost`` in ``python -m benchmarks cost --provider NAME``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=PROVIDERS, default="anthropic")
    parser.add_argument("--sessions", default=",".join(SESSIONS))
    args = parser.parse_args(list(argv))
    sessions = [s.strip() for s in args.sessions.split(",") if s.strip()]
    unknown = sorted(set(sessions) - set(SESSIONS))
    if unknown:
        parser.error(f"unknown session(s) {unknown}; expected some of {', '.join(SESSIONS)}")
    return {"provider": args.provider, "sessions": sessions}


def main(provider: str = "anthropic", sessions: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the sessions on `provider`'s simulator, print the table, return the numbers."""
    if IS_1X:
        print(f"skipped: the 2.x Agent (AgentScope {AGENTSCOPE_VERSION} is installed)")
        return {}
    loggers = [logging.getLogger(name) for name in ("as", "agentscope", "agentscope_ctx")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:  # both log every compaction at INFO/WARNING
        lg.setLevel(logging.CRITICAL)
    try:
        return _run(provider, list(sessions or SESSIONS))
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _run(provider: str, sessions: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    print(f"provider {provider} ({MODELS[provider]}), AgentScope {AGENTSCOPE_VERSION}")
    header = (
        f"{'session':<10}{'system':<16}{'calls':>6}{'helper':>7}{'rejected':>9}{'read':>7}"
        f"{'bound':>7}{'agent $':>9}{'bound $':>9}{'x bound':>8}{'all $':>8}"
    )
    print(header)
    for session in sessions:
        if session == "thinking" and provider != "anthropic":
            continue
        systems = ["agentscope_ctx"] if session == "thinking" else ["agentscope_ctx", "builtin"]
        for system in systems:
            with tempfile.TemporaryDirectory(prefix="providers-") as tmp:
                if session == "thinking":
                    figures = asyncio.run(run_thinking(Path(tmp)))
                else:
                    scenario = SCENARIOS[session]()
                    figures = asyncio.run(run_system(system, provider, scenario, Path(tmp)))
            results[f"{session}/{system}"] = figures
            f = figures
            print(
                f"{session:<10}{system:<16}{f['agent_calls']:>6}{f['helper_calls']:>7}"
                f"{f['rejected']:>9}{f['read_ratio']:>7.3f}{f['bound_read_ratio']:>7.3f}"
                f"{f['agent_cost_usd']:>9.3f}{f['bound_usd']:>9.3f}"
                f"{f['cost_over_bound'] or 0:>8.2f}{f['cost_usd']:>8.3f}",
                flush=True,
            )
    return {"provider": provider, "model": MODELS[provider], "sessions": results}


if __name__ == "__main__":
    main(**options(sys.argv[1:]))
