"""Where a session's cache reads go, call by call (issue 45): ``python -m benchmarks.cost.calls
--provider anthropic|dashscope|openai --session stress|everyday|small [--set FIELD=JSON ...]``.

Runs the package (defaults but the budget and the `ContextConfig` fields `--set` gives, e.g.
``--set summary_max_share=1``) on one session of `benchmarks.cost.providers` and
prints, for each of the agent's calls: its messages, prompt tokens, the tokens the provider
read from its cache and wrote to it, the append-only bound's read (`cost.bound`: all it can
of the previous prompt, writing what the session added since), what this call lost against
it, what it added (in the provider's tokens), the first message that differs
from the previous request (its index, and the head of what it was: a rewrite starts there;
``-`` when the call only appended), and the messages carrying a cache mark. Last, the
totals: the loss on the calls that rewrote an earlier message and on those that only
appended (a loss there is a mark placed where the cache cannot find it). Numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.cost import bound as cost_bound  # noqa: E402
from benchmarks.cost import providers  # noqa: E402
from benchmarks.cost.bound import messages_of  # noqa: E402


def _head(message: Any, size: int = 48) -> str:
    text = json.dumps(cost_bound.plain(message), ensure_ascii=False)
    return text[:size].replace("\n", " ")


def _marked(messages: list[Any]) -> list[int]:
    return [i for i, m in enumerate(messages) if "cache_control" in json.dumps(m)]


def rows(sim: Any, cold: Collection[int] = ()) -> list[dict[str, Any]]:
    """One row per agent call of the simulator's session (see the module); `cold`: the
    calls after a pause past the cache's TTL (`bound.reads`)."""
    agent = [
        (body, call)
        for body, call in zip(sim.requests, sim.calls, strict=True)
        if isinstance(body, dict) and providers.kind_of(body) == "agent"
    ]
    prompts = [providers._prompt_tokens(call) for _, call in agent]
    added = cost_bound.added_tokens([body for body, _ in agent], prompts)
    bounds = cost_bound.reads(prompts, added, cold)
    out: list[dict[str, Any]] = []
    before: list[Any] = []
    for (body, call), prompt, bound, new in zip(agent, prompts, bounds, added, strict=True):
        messages = messages_of(body)
        plain = [cost_bound.plain(m) for m in messages]
        read = providers._read_tokens(call)
        created = int(
            getattr(call, "cache_creation_input_tokens", getattr(call, "cache_creation_tokens", 0))
        )
        differs = next(
            (i for i, (a, b) in enumerate(zip(before, plain, strict=False)) if a != b),
            None if len(plain) >= len(before) else len(plain),
        )
        out.append(
            {
                "n": len(out) + 1,
                "messages": len(messages),
                "prompt": prompt,
                "read": read,
                "created": created,
                "bound": bound,
                "added": new,
                "lost": bound - read,
                "differs": differs,
                "was": "" if differs is None or differs >= len(before) else _head(before[differs]),
                "marks": _marked(messages),
            }
        )
        before = plain
    return out


def main(
    provider: str = "anthropic", session: str = "stress", settings: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Run `session` on `provider`'s simulator (`settings`: `ContextConfig` fields of a
    variant); print and return its rows."""
    kept: list[Any] = []
    scenario = providers.SCENARIOS[session]()
    with tempfile.TemporaryDirectory(prefix="calls-") as tmp:
        figures = asyncio.run(
            providers.run_system(
                "agentscope_ctx", provider, scenario, Path(tmp), kept.append, settings
            )
        )
    table = rows(kept[0], figures["cold_calls"])
    print(
        f"{'n':>3}{'msgs':>5}{'prompt':>8}{'read':>8}{'created':>8}{'bound':>8}{'lost':>7}"
        f"{'added':>8}{'ratio':>6}  differs  marks"
    )
    for r in table:
        where = "-" if r["differs"] is None else f"{r['differs']} {r['was']}"
        print(
            f"{r['n']:>3}{r['messages']:>5}{r['prompt']:>8}{r['read']:>8}{r['created']:>8}"
            f"{r['bound']:>8}{r['lost']:>7}{r['added']:>8}{r['read'] / max(r['prompt'], 1):>6.2f}  "
            f"{where[:60]:<60}  {r['marks']}"
        )
    rewrote = [r for r in table if r["differs"] is not None]
    appended = [r for r in table if r["differs"] is None]
    prompt = sum(r["prompt"] for r in table) or 1
    ceiling = _ceiling(table)

    def units(read: str) -> float:  # input at the explicit caches' prices (0.1x, 1.25x)
        return sum(0.1 * r[read] + 1.25 * (r["prompt"] - r[read]) for r in table)

    print(
        f"read {figures['read_ratio']} (bound {figures['bound_read_ratio']}, {ceiling:.3f} "
        "with every prompt as large as the largest sent); lost against "
        f"the bound: {sum(r['lost'] for r in rewrote) / prompt:.3f} of the prompt tokens on "
        f"{len(rewrote)} calls that rewrote, {sum(r['lost'] for r in appended) / prompt:.3f} "
        f"on {len(appended)} that only appended; input cost {units('read') / units('bound'):.2f}x "
        "the bound's"
    )
    print(
        f"agent ${figures['agent_cost_usd']:.3f} ({figures['cost_over_bound']}x the bound's "
        f"${figures['bound_usd']:.3f}); with the helpers' {figures['helper_calls']} calls "
        f"${figures['cost_usd']:.3f}; rejected {figures['rejected']}"
    )
    return table


def _ceiling(table: list[dict[str, Any]]) -> float:
    """The read ratio of the same calls if each prompt were as large as it can be: all it has
    appended so far, up to the largest prompt the run sent (where the ladder holds it), each
    call reading the previous prompt and writing what it appends."""
    largest = max((r["prompt"] for r in table), default=0)
    grown = previous = read = sent = 0
    for r in table:
        appended = r["prompt"] if previous == 0 else r["added"]
        grown += appended
        now = min(grown, largest)
        read += max(min(previous, now - appended), 0)
        sent += now
        previous = now
    return read / sent if sent else 0.0


def options(argv: Sequence[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=providers.PROVIDERS, default="anthropic")
    parser.add_argument("--session", choices=sorted(providers.SCENARIOS), default="stress")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=JSON",
        help="a ContextConfig field of a variant, e.g. summary_max_share=0.15 (repeatable)",
    )
    args = parser.parse_args(list(argv))
    settings = {k: json.loads(v) for k, _, v in (s.partition("=") for s in args.set)}
    return {"provider": args.provider, "session": args.session, "settings": settings}


if __name__ == "__main__":
    main(**options(sys.argv[1:]))
