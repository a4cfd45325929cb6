"""What a thinking session costs on Anthropic's rules, with the package's cache marks and
without (issue 45): ``python -m benchmarks.cost.providers [--budget N] [--turns N]
[--steps N] [--lines N]``.

The session is `tests.support.thinking_session`: a real agent on the installed AgentScope line
(2.x `Agent` or 1.x `ReActAgent`) through AgentScope's real `AnthropicChatModel`, streaming,
extended thinking on, against the offline Anthropic simulator (`tests.support.anthropic_sim`:
validation, signed thinking, breakpoints with the 20-block lookback, TTLs, Sonnet 4.5's list
prices). Each user turn is a tool loop of `steps` log reads; the context manager (defaults but
the budget, extractive summaries: no helper calls) holds the budget. The simulator's clock is
virtual, 5 seconds a call: every entry lives within its 5-minute TTL, as in a session that does
not pause. Printed per `cache.mode`: calls, rejected, the cache read ratio (reads / prompt
tokens), the cost in USD at list prices, and the append-only bound (what the same prompt sizes
would cost if each call read the whole previous prompt from the cache and wrote the rest).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import anthropic_sim  # noqa: E402
from tests.support.thinking_session import MODEL, run_session  # noqa: E402

SECONDS_PER_CALL = 5.0


def append_only_bound(calls: list[anthropic_sim.Call]) -> float:
    """USD of the same prompts if each read all of the previous one and wrote the rest."""
    price = anthropic_sim.spec_of(MODEL).price
    total, previous = 0.0, 0
    for call in calls:
        read = min(previous, call.prompt_tokens)
        units = (
            read * price.read + (call.prompt_tokens - read) * price.write_5m
        ) * price.input + call.output_tokens * price.output
        total += units / 1_000_000
        previous = call.prompt_tokens
    return total


async def measure(mode: str, **session: Any) -> dict[str, Any]:
    ticks = itertools.count()
    original = anthropic_sim.AnthropicSim.__init__

    def init(self: anthropic_sim.AnthropicSim, *args: Any, **kwargs: Any) -> None:
        kwargs["clock"] = lambda: next(ticks) * SECONDS_PER_CALL
        original(self, *args, **kwargs)

    anthropic_sim.AnthropicSim.__init__ = init  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory(prefix="providers-") as tmp:
            sim, _ = await run_session(Path(tmp), cache={"mode": mode}, **session)
    finally:
        anthropic_sim.AnthropicSim.__init__ = original  # type: ignore[method-assign]
    totals = sim.summary()
    return {
        "mode": mode,
        "calls": totals["calls"],
        "rejected": totals["rejected"],
        "read_ratio": round(totals["read_ratio"], 3),
        "cost_usd": round(totals["cost_usd"], 4),
        "bound_usd": round(append_only_bound(sim.calls), 4),
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=24_000)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--lines", type=int, default=300)
    args = parser.parse_args(argv)
    session = {"budget": args.budget, "turns": args.turns, "steps": args.steps, "lines": args.lines}
    rows = [asyncio.run(measure(mode, **session)) for mode in ("auto", "off")]
    print(f"thinking session on Anthropic's rules ({MODEL}), {session}")
    print(f"{'cache.mode':<12}{'calls':>6}{'rejected':>10}{'read':>8}{'cost $':>10}{'bound $':>10}")
    for row in rows:
        print(
            f"{row['mode']:<12}{row['calls']:>6}{row['rejected']:>10}{row['read_ratio']:>8.3f}"
            f"{row['cost_usd']:>10.4f}{row['bound_usd']:>10.4f}"
        )
    return rows


if __name__ == "__main__":
    main()
