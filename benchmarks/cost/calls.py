"""Where a session's cache reads go, call by call (issue 45): ``python -m benchmarks.cost.calls
--provider anthropic|dashscope|openai --session stress|everyday|small``.

Runs the package (defaults but the budget) on one session of `benchmarks.cost.providers` and
prints, for each of the agent's calls: its messages, prompt tokens, the tokens the provider
read from its cache and wrote to it, the append-only bound's read (all of the previous
prompt, at most this one), what this call lost against it, the first message that differs
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.cost import providers  # noqa: E402


def _plain(value: Any) -> Any:
    """`value` without its ``cache_control`` marks (what a cache hashes)."""
    if isinstance(value, dict):
        content = value.get("content")
        if (
            isinstance(content, list)
            and len(content) == 1
            and isinstance(content[0], dict)
            and content[0].get("type") == "text"
        ):  # one text part: a string content a mark made a list (chat), or one that was
            value = {**value, "content": content[0].get("text")}
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def messages_of(body: dict[str, Any]) -> list[Any]:
    """The request's prompt as a list: the system prompt (Anthropic's ``system``) first."""
    system = body.get("system")
    return ([{"role": "system", "content": system}] if system else []) + list(body["messages"])


def _head(message: Any, size: int = 48) -> str:
    text = json.dumps(_plain(message), ensure_ascii=False)
    return text[:size].replace("\n", " ")


def _size(messages: list[Any]) -> int:
    from tests.support.chat_sim import encode

    return sum(len(encode(json.dumps(m, ensure_ascii=False, sort_keys=True))) for m in messages)


def _marked(messages: list[Any]) -> list[int]:
    return [i for i, m in enumerate(messages) if "cache_control" in json.dumps(m)]


def rows(sim: Any) -> list[dict[str, Any]]:
    """One row per agent call of the simulator's session (see the module)."""
    out: list[dict[str, Any]] = []
    before: list[Any] = []
    previous = 0
    for body, call in zip(sim.requests, sim.calls, strict=True):
        if not isinstance(body, dict) or providers.kind_of(body) != "agent":
            continue
        messages = messages_of(body)
        plain = [_plain(m) for m in messages]
        prompt = providers._prompt_tokens(call)
        read = providers._read_tokens(call)
        created = int(
            getattr(call, "cache_creation_input_tokens", getattr(call, "cache_creation_tokens", 0))
        )
        differs = next(
            (i for i, (a, b) in enumerate(zip(before, plain, strict=False)) if a != b),
            None if len(plain) >= len(before) else len(plain),
        )
        bound = min(previous, prompt)
        # what this call appended (the messages past the previous request's), in the
        # provider's tokens pro rata: a call must write these, whatever the ladder does
        new = len(plain) - len(before) if len(plain) > len(before) else 1
        appended = round(prompt * _size(plain[-new:]) / max(_size(plain), 1))
        out.append(
            {
                "n": len(out) + 1,
                "messages": len(messages),
                "prompt": prompt,
                "read": read,
                "created": created,
                "bound": bound,
                "appended": appended,
                "fair": min(previous, prompt - appended),
                "lost": bound - read,
                "differs": differs,
                "was": "" if differs is None or differs >= len(before) else _head(before[differs]),
                "marks": _marked(messages),
            }
        )
        before, previous = plain, prompt
    return out


def main(provider: str = "anthropic", session: str = "stress") -> list[dict[str, Any]]:
    """Run `session` on `provider`'s simulator; print and return its rows."""
    kept: list[Any] = []
    scenario = providers.SCENARIOS[session]()
    with tempfile.TemporaryDirectory(prefix="calls-") as tmp:
        figures = asyncio.run(
            providers.run_system("agentscope_ctx", provider, scenario, Path(tmp), kept.append)
        )
    table = rows(kept[0])
    print(
        f"{'n':>3}{'msgs':>5}{'prompt':>8}{'read':>8}{'created':>8}{'bound':>8}{'lost':>7}"
        f"{'fair':>8}{'ratio':>6}  differs  marks"
    )
    for r in table:
        where = "-" if r["differs"] is None else f"{r['differs']} {r['was']}"
        print(
            f"{r['n']:>3}{r['messages']:>5}{r['prompt']:>8}{r['read']:>8}{r['created']:>8}"
            f"{r['bound']:>8}{r['lost']:>7}{r['fair']:>8}{r['read'] / max(r['prompt'], 1):>6.2f}  "
            f"{where[:60]:<60}  {r['marks']}"
        )
    rewrote = [r for r in table if r["differs"] is not None]
    appended = [r for r in table if r["differs"] is None]
    prompt = sum(r["prompt"] for r in table) or 1
    fair = sum(r["fair"] for r in table) / prompt
    ceiling = _ceiling(table)

    def units(read: str) -> float:  # input at the explicit caches' prices (0.1x, 1.25x)
        return sum(0.1 * r[read] + 1.25 * (r["prompt"] - r[read]) for r in table)

    print(
        f"read {figures['read_ratio']} (bound {figures['bound_read_ratio']}, {fair:.3f} "
        f"writing each call's new messages, {ceiling:.3f} with every prompt as large as the "
        "largest sent); lost against "
        f"the bound: {sum(r['lost'] for r in rewrote) / prompt:.3f} of the prompt tokens on "
        f"{len(rewrote)} calls that rewrote, {sum(r['lost'] for r in appended) / prompt:.3f} "
        f"on {len(appended)} that only appended; input cost {units('read') / units('bound'):.2f}x "
        f"the bound's ({units('fair') / units('bound'):.2f}x writing each call's new messages)"
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
        appended = r["prompt"] if previous == 0 else r["appended"]
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
    args = parser.parse_args(list(argv))
    return {"provider": args.provider, "session": args.session}


if __name__ == "__main__":
    main(**options(sys.argv[1:]))
