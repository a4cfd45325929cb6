"""What a compaction request costs with a prompt cache: the prefix form against the plain form
(issue 22, item 5; `compactor.request`).

The cost benchmark's sessions (`cost.session`), longer, so that they compact: stress (budget
24k) over 30 turns, and everyday (budget 128k) over 20 turns with masking off (with it,
masking alone holds that session under the trigger), through a real agent (1.x `ReActAgent` or 2.x `Agent`, whichever line is installed), with
agentscope_ctx attached and the compactor on the agent's own model (one scripted model
answers both: a provider's cache is per model), each run twice: ``request: plain`` and
``request: prefix``. The Summarizer is off (its calls do not depend on the form).

Per compaction request: its tokens (the prompt serialised as `cost.meter` does, tool schemas
first, then each message; tiktoken cl100k) and its cached part: the longest prefix it shares
with an earlier prompt on the same model still in a provider's cache, the agent's last call
or the previous compaction request (a prompt cache keeps both for minutes; a scripted session
runs in seconds). "prefix, no tools" is the prefix request with its tool schemas left out
(metered, not sent): tools come first in the prompt, so without them nothing is cached.

Prices (`Pricing`, in units of the provider's price of 1,000 uncached input tokens): a cached
token costs `read`, an uncached one `write` (1.25 where the provider bills writing the cache,
as Anthropic's 5-minute cache and DashScope's explicit cache do, and every call is cached;
1.0 where writing is free), and nothing is cached below `min_tokens` (the provider's
shortest cacheable prefix). Presets, from the providers' pages: Anthropic (read 0.1, write
1.25, 1,024), OpenAI (read 0.1 for the GPT-5 family, 0.5 for GPT-4o; write 1.0; 1,024),
DashScope implicit cache (read 0.2, write 1.0, 256) and explicit cache (read 0.1, write 1.25,
1,024). Other prices: ``--price name=read,write,min_tokens`` (repeatable). Output tokens are
left out: the summary is the same size in both forms.

Run: ``python -m benchmarks compaction_cost`` (or ``python -m benchmarks.cost.compaction
[--price ...] [--scenario stress|everyday|everyday-json]``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys
import tempfile
import time
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
from agentscope_ctx._line import AGENTSCOPE_VERSION, IS_1X
from agentscope_ctx.demo._scripted import Prompt, Schemas
from benchmarks.cost import meter as cost_meter
from benchmarks.cost import script as cost_script
from benchmarks.cost.session import Scenario, Step, everyday, everyday_json, stress, write_files

MARK = "[agentscope_ctx: context compaction."
"""The first words of the prefix request's instruction."""
PLAIN_MARK = "You are the context compactor"
"""The first words of the plain request's system prompt."""
FORMS = ("plain", "prefix")


@dataclass(frozen=True)
class Pricing:
    """A provider's prompt-cache prices, in units of its price of an uncached input token."""

    name: str
    read: float
    """A token read from the cache."""
    write: float
    """A token not read from the cache (1.25 where writing the cache is billed)."""
    min_tokens: int
    """The shortest prefix the provider caches; a shorter shared prefix is not cached."""

    def cost(self, tokens: int, cached: int) -> float:
        """Cost units (per 1,000 tokens) of a request of `tokens`, `cached` of them shared."""
        cached = cached if cached >= self.min_tokens else 0
        return (self.read * cached + self.write * (tokens - cached)) / 1000


PRICES = (
    Pricing("anthropic", 0.1, 1.25, 1024),
    Pricing("openai", 0.1, 1.0, 1024),
    Pricing("openai-4o", 0.5, 1.0, 1024),
    Pricing("dashscope", 0.2, 1.0, 256),
    Pricing("dashscope-explicit", 0.1, 1.25, 1024),
)
"""Anthropic (5-minute cache), OpenAI (GPT-5 family; GPT-4o), DashScope (implicit cache, the
default; explicit cache)."""


@dataclass
class Request:
    """One compaction request, metered."""

    tokens: int
    cached: int
    """Tokens shared with the agent's last prompt or the previous request, whichever is more."""
    cached_without_tools: int
    """The same with the request's tool schemas left out."""


@dataclass
class Recorder:
    """Sees every prompt of the shared model; meters the compaction requests."""

    encoder: Any
    requests: list[Request] = field(default_factory=list)
    last_summary: str = ""
    _agent: list[str] | None = None
    _compactor: list[str] | None = None

    def agent(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> None:
        self._agent = cost_meter.serialise(messages, tools)

    def compaction(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> str:
        """Meter one request; the summary the scripted model answers."""
        pieces = cost_meter.serialise(messages, tools)
        bare = cost_meter.serialise(messages, None)
        memo: dict[str, array[int]] = {}
        tokens = sum(len(self._tokens(p, memo)) for p in pieces)
        earlier = [p for p in (self._agent, self._compactor) if p is not None]
        cached = max((self._shared(pieces, e, memo) for e in earlier), default=0)
        bare_cached = max((self._shared(bare, e, memo) for e in earlier), default=0)
        self.requests.append(Request(tokens, cached, bare_cached))
        self._compactor = pieces
        text = cost_script.dumps(list(messages))
        self.last_summary = cost_script.summary(*cost_script.goal_and_paths(text))
        return self.last_summary

    def _tokens(self, piece: str, memo: dict[str, array[int]]) -> array[int]:
        if piece not in memo:
            memo[piece] = array("I", self.encoder.encode_ordinary(piece))
        return memo[piece]

    def _shared(self, pieces: list[str], earlier: list[str], memo: dict[str, array[int]]) -> int:
        shared = 0
        for old, new in zip(earlier, pieces, strict=False):
            if old == new:
                shared += len(self._tokens(new, memo))
                continue
            return shared + cost_meter.common_prefix(
                self._tokens(old, memo), self._tokens(new, memo)
            )
        return shared


def is_compaction(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a prompt is a compaction request (either form)."""
    if not messages:
        return False
    return MARK in cost_script.dumps(messages[-1]) or PLAIN_MARK in cost_script.dumps(messages[0])


MASKING_OFF = {"tool_result": {"mask_after": None}}
"""Masking off: without it the 128k session reaches compaction (with it, masking holds it)."""


def _config(scenario: Scenario, work: Path, form: str) -> ContextConfig:
    return ContextConfig.model_validate(
        {
            "working_dir": str(work / "ctx"),
            "max_input_tokens": scenario.budget,
            "token_counter": "cl100k_base",
            "summarizer": {"enabled": False},
            "compactor": {"request": form},
            **(MASKING_OFF if scenario.name.endswith("no masking") else {}),
        }
    )


async def _run_1x(scenario: Scenario, plan: list[list[Step]], work: Path, form: str) -> Recorder:
    from agentscope.formatter import OpenAIChatFormatter
    from agentscope.message import Msg, TextBlock
    from agentscope.model import ChatResponse

    from benchmarks.cost.line1 import _agent
    from benchmarks.cost.models1 import AgentScript
    from benchmarks.cost.session import user_task

    counter, encoder = TokenCounter("cl100k_base"), cost_meter.encoding()
    recorder = Recorder(encoder)

    class Shared(AgentScript):
        async def answer(self, messages: Prompt, tools: Schemas, structured: Any) -> ChatResponse:
            if is_compaction(messages):
                text = recorder.compaction(messages, tools)
                return ChatResponse(content=[TextBlock(type="text", text=text)])
            recorder.agent(messages, tools)
            return await super().answer(messages, tools, structured)

    model = Shared(plan, cost_meter.PromptMeter(counter, encoder))
    agent = _agent(model, scenario.calls)
    manager = ContextManager(
        _config(scenario, work, form), model=model, formatter=OpenAIChatFormatter()
    )
    manager.attach(agent)
    for turn, steps in enumerate(plan):
        await agent(Msg("user", user_task(turn, steps), "user"))
    await manager.close()
    return recorder


async def _run_2x(scenario: Scenario, plan: list[list[Step]], work: Path, form: str) -> Recorder:
    from agentscope.model import ChatResponse

    from benchmarks.cost.line2 import _agent, _session
    from benchmarks.cost.models2 import Provider, _reply

    counter, encoder = TokenCounter("cl100k_base"), cost_meter.encoding()
    recorder = Recorder(encoder)

    class Shared(Provider):
        async def answer(self, formatted: Prompt, tools: Schemas) -> ChatResponse:
            if is_compaction(formatted):
                tokens = await counter.count(formatted, tools=tools)
                if tokens > self.window:  # the provider's window holds for it too
                    raise RuntimeError(f"maximum context length is {self.window} tokens")
                return _reply(recorder.compaction(formatted, tools), None, tokens)
            recorder.agent(formatted, tools)
            return await super().answer(formatted, tools)

    meter = cost_meter.PromptMeter(counter, encoder)
    model = Shared(plan, meter, cost_meter.PromptMeter(counter, encoder), window=scenario.budget)
    manager = ContextManager(_config(scenario, work, form), model=model)
    agent = _agent(model, scenario.calls, middlewares=[manager.middleware()])
    await _session(model, agent, plan)
    await manager.close()
    return recorder


async def run_scenario(scenario: Scenario) -> dict[str, Any]:
    """Both forms on one scenario, on the same files; the requests of each."""
    run = _run_1x if IS_1X else _run_2x
    out: dict[str, Any] = {"budget": scenario.budget, "forms": {}}
    with tempfile.TemporaryDirectory(prefix="compaction-cost-") as tmp:
        root = Path(tmp)
        plan = write_files(scenario, root / "repo")
        for form in FORMS:
            start = time.perf_counter()
            recorder = await run(scenario, plan, root / form, form)
            out["forms"][form] = {
                "requests": [vars(r) for r in recorder.requests],
                "seconds": round(time.perf_counter() - start, 1),
            }
    return out


def rows(result: dict[str, Any], prices: Sequence[Pricing]) -> list[dict[str, Any]]:
    """The table's rows for one scenario: plain, prefix, and prefix without tools."""
    out = []
    variants = [("plain", "plain", "cached"), ("prefix", "prefix", "cached")]
    variants.append(("prefix, no tools", "prefix", "cached_without_tools"))
    for label, form, key in variants:
        requests = result["forms"][form]["requests"]
        n = len(requests)
        sent = sum(r["tokens"] for r in requests)
        cached = sum(r[key] for r in requests)
        costs = {p.name: sum(p.cost(r["tokens"], r[key]) for r in requests) for p in prices}
        out.append(
            {
                "form": label,
                "requests": n,
                "tokens_sent": sent,
                "cached_share": round(cached / sent, 4) if sent else 0.0,
                "cost_per_session": {k: round(v, 2) for k, v in costs.items()},
                "cost_per_compaction": {k: round(v / n, 2) if n else 0.0 for k, v in costs.items()},
            }
        )
    return out


def report(name: str, result: dict[str, Any], prices: Sequence[Pricing]) -> list[dict[str, Any]]:
    """Print one scenario's table; return its rows."""
    table = rows(result, prices)
    print(f"{name}: budget {result['budget']:,}, AgentScope {AGENTSCOPE_VERSION}")
    head = f"{'request':<18}{'calls':>6}{'sent':>11}{'cached':>8}"
    head += "".join(f"{p.name[:18]:>20}" for p in prices)
    print(head)
    print(" " * 43 + "".join(f"{'/compaction /session':>20}" for _ in prices))
    print("-" * len(head))
    for r in table:
        line = f"{r['form']:<18}{r['requests']:>6}{r['tokens_sent']:>11,}{r['cached_share']:>8.0%}"
        for p in prices:
            line += (
                f"{r['cost_per_compaction'][p.name]:>11.2f}{r['cost_per_session'][p.name]:>9.2f}"
            )
        print(line)
    plain, prefix = table[0], table[1]
    for p in prices:
        a, b = plain["cost_per_session"][p.name], prefix["cost_per_session"][p.name]
        better = "prefix" if b < a else "plain"
        print(
            f"  {p.name} (read {p.read:g}, write {p.write:g}, min {p.min_tokens}): {better} "
            f"is cheaper per session ({b:.2f} vs {a:.2f})"
        )
    return table


def long_stress() -> Scenario:
    """`stress` over 30 turns: masking holds its 6 turns without a compaction."""
    return dataclasses.replace(stress(turns=30), name="stress, 30 turns")


def everyday_unmasked() -> Scenario:
    """`everyday` over 20 turns with masking off (`MASKING_OFF`): compactions at 128k."""
    return dataclasses.replace(everyday(turns=20), name="everyday, 20 turns, no masking")


SCENARIOS = {
    "stress": long_stress,
    "everyday": everyday_unmasked,
    "everyday-json": everyday_json,
}


def main(
    scenarios: Sequence[Scenario] | None = None, prices: Sequence[Pricing] = PRICES
) -> dict[str, Any]:
    """Run the scenarios (`long_stress`, `everyday_unmasked` by default), print the tables,
    return the numbers."""
    chosen = list(scenarios) if scenarios is not None else [long_stress(), everyday_unmasked()]
    loggers = [logging.getLogger(name) for name in ("as", "agentscope", "agentscope_ctx")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    results: dict[str, Any] = {}
    try:
        for scenario in chosen:
            result = asyncio.run(run_scenario(scenario))
            result["table"] = report(scenario.name, result, prices)
            results[scenario.name] = result
            print()
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
    print(
        "sent: prompt tokens of the compaction requests (tiktoken cl100k, tool schemas "
        "first); cached: their share in a prefix shared with the agent's last prompt or the "
        "previous request; costs in units of 1,000 uncached input tokens at each provider's "
        "cache prices (read, write, shortest cached prefix)."
    )
    return {
        "agentscope": AGENTSCOPE_VERSION,
        "prices": [vars(p) for p in prices],
        "scenarios": results,
    }


def _pricing(text: str) -> Pricing:
    name, _, values = text.partition("=")
    try:
        read, write, least = values.split(",")
        return Pricing(name, float(read), float(write), int(least))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--price got {text!r}; expected name=read,write,min_tokens (e.g. x=0.1,1.25,1024)"
        ) from None


def options(argv: Sequence[str]) -> dict[str, Any]:
    """`main`'s keyword arguments from the command line's options (this module's, and those
    after ``compaction_cost`` in ``python -m benchmarks compaction_cost ...``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--price", type=_pricing, action="append", help="name=read,write,min")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    args = parser.parse_args(argv)
    picked = [SCENARIOS[name]() for name in args.scenario] if args.scenario else None
    return {"scenarios": picked, "prices": args.price or PRICES}


if __name__ == "__main__":
    main(**options(sys.argv[1:]))
