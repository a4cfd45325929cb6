"""`Calibration`: how a provider counts our prompts, learned from what it says about them.

Our token estimate is tiktoken's; the provider counts with its own tokenizer, adds hidden
prompts, and may not count everything we send. Two numbers per model correct for that,
kept in the agent's memory state (`ContextMemory.calibration`, so they survive a reload):

- the **factor** from our estimate to the provider's count, learned from the prompt size
  each response reports (`ChatResponse.usage`);
- the provider's **window**, when a context-length error states it: the effective budget
  (`budget`) is then the smaller of `max_input_tokens` and that window minus a margin.

Beside them, the time of the model's last call (`called`, seconds since the epoch): how old
the provider's prompt cache is (`ContextPipeline.cold`), on whichever worker the session's
next turn runs.

The rules, safety first (overestimating costs an earlier compaction, underestimating an
overflow):

- Prior: the factor is 1.0 until the provider has reported usage, and it goes below 1.0
  only after `MIN_EVIDENCE` *complete* reports on prompts of at least `EVIDENCE_SHARE`
  of the budget; a stored factor below 1.0 without that evidence reads as 1.0.
- Steps: one report moves the factor up by at most `STEP_UP` times, down by at most
  `1 - STEP_DOWN`; it always stays within `BOUNDS`.
- Coverage: a report is *complete* when the usage object AgentScope passes on
  (`ChatUsage.metadata`) shows it counts the whole prompt: OpenAI's `prompt_tokens` and the
  Responses API's / DashScope's `input_tokens` include the cached tokens; an Anthropic-style
  usage (`input_tokens` without `cache_read_input_tokens` and `cache_creation_input_tokens`)
  is completed by adding them. Any other report may cover only part of the prompt:
  AgentScope passes Anthropic's `input_tokens` (uncached tokens only) and Ollama's
  `prompt_eval_count` (not counting a reused KV cache) without the raw usage, and a provider
  may leave the tool schemas uncounted. Such a report is only a lower bound of the
  provider's count: it raises the factor when it exceeds it and is otherwise ignored, so it
  never lowers the factor (and never below 1.0).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "CacheStats",
    "Calibration",
    "PromptUsage",
    "StatedLimits",
    "prompt_usage",
    "stated_limits",
]

logger = logging.getLogger("agentscope_ctx")

MARGIN = 0.03
"""Safety margin on top of the calibrated estimate."""
BOUNDS = (0.5, 4.0)
"""The factor never leaves this range, whatever a provider reports."""
STEP_UP = 2.0
"""One report multiplies the factor by at most this."""
STEP_DOWN = 0.9
"""One report multiplies the factor by at least this."""
MIN_EVIDENCE = 3
"""Complete reports (on prompts of `EVIDENCE_SHARE` of the budget) before the factor may go
below 1.0. Small prompts are mostly system prompt and tool schemas, which a provider may
count quite differently from the messages that fill the window later."""
EVIDENCE_SHARE = 0.25
"""Share of the budget a prompt must have for its report to count as evidence."""
WINDOW_MARGIN = 0.05
"""Share of a provider-stated window left free (the estimate is not exact)."""
OVERFLOW_RAISE = 1.2
"""Factor increase after an overflow whose error states no numbers."""

_REPORTS = "#reports"
_WINDOW = "#window"
_CALLED = "#called"


@dataclass(frozen=True)
class PromptUsage:
    """The provider's count of a prompt, as read from a response's usage."""

    tokens: int
    complete: bool
    """Whether the count is known to cover the whole prompt (see the module docstring)."""
    cached: int | None = None
    """The part of `tokens` the provider read from its prompt cache, where it says so
    (OpenAI and DashScope: ``prompt_tokens_details.cached_tokens``; Anthropic:
    ``cache_read_input_tokens``); `None`: not said."""
    created: int | None = None
    """The part of `tokens` the provider wrote to its prompt cache, where it says so
    (Anthropic: ``cache_creation_input_tokens``; Alibaba Model Studio's explicit cache:
    ``prompt_tokens_details.cache_creation_input_tokens``); `None`: not said (OpenAI's
    automatic cache has no such figure)."""

    @property
    def prompt(self) -> int | None:
        """The provider's count of the whole prompt (cache reads and writes included), or
        `None` when the report may cover only part of it."""
        return self.tokens if self.complete else None


def _field(obj: object, name: str) -> object:
    if isinstance(obj, Mapping):
        return obj.get(name)
    try:
        return getattr(obj, name, None)
    except Exception:  # AgentScope's and DashScope's DictMixin raise KeyError
        return None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def prompt_usage(usage: object) -> PromptUsage | None:
    """The prompt size a response's `ChatUsage` reports, or `None` when it reports none."""
    tokens = _int(_field(usage, "input_tokens"))
    if tokens is None or tokens < 0:
        return None
    raw = _field(usage, "metadata")
    if raw is None:
        return PromptUsage(tokens, complete=False) if tokens else None
    read = _int(_field(raw, "cache_read_input_tokens"))
    created = _int(_field(raw, "cache_creation_input_tokens"))
    if read is not None or created is not None:  # Anthropic: input_tokens excludes both
        base = _int(_field(raw, "input_tokens")) or tokens
        total = base + (read or 0) + (created or 0)  # (input_tokens is 0 when all was cached)
        return PromptUsage(total, complete=True, cached=read, created=created) if total else None
    details = _field(raw, "prompt_tokens_details") or _field(raw, "input_tokens_details")
    cached = _int(_field(details, "cached_tokens")) if details is not None else None
    created = _int(_field(details, "cache_creation_input_tokens")) if details is not None else None
    for name in ("prompt_tokens", "input_tokens"):  # OpenAI, Responses API, DashScope
        whole = _int(_field(raw, name))
        if whole is not None and whole > 0:
            return PromptUsage(whole, complete=True, cached=cached, created=created)
    return PromptUsage(tokens, complete=False) if tokens else None


@dataclass
class CacheStats:
    """What the provider said about its prompt cache over a session (where it said it)."""

    reports: int = 0
    """Usage reports that gave a cache-read count."""
    prompt_tokens: int = 0
    """The provider's prompt tokens over those reports."""
    cached_tokens: int = 0
    """The part of them read from the cache (billed at about a tenth)."""
    creation_reports: int = 0
    """Usage reports that gave a cache-write count."""
    created_tokens: int = 0
    """The prompt tokens written to the cache over those reports (billed above the input
    price: 1.25x on Anthropic and Model Studio)."""
    calls: int = 0
    """Usage reports of any kind: one per model call whose response reported usage."""
    last: PromptUsage | None = None

    def observe(self, usage: PromptUsage) -> None:
        self.last = usage
        self.calls += 1
        if usage.cached is not None:
            self.reports += 1
            self.prompt_tokens += usage.tokens
            self.cached_tokens += usage.cached
        if usage.created is not None:
            self.creation_reports += 1
            self.created_tokens += usage.created

    @property
    def reuse(self) -> float | None:
        """Share of the reported prompt tokens that were read from the cache."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None


@dataclass(frozen=True)
class StatedLimits:
    """What a context-length error says in numbers (`None`: it does not say)."""

    window: int | None = None
    """Input tokens the provider accepts (any stated output reservation subtracted)."""
    prompt: int | None = None
    """The provider's count of the rejected prompt."""


# How each provider states the numbers (see `_guard` for how it says "too long"):
#  OpenAI / vLLM: "This model's maximum context length is 8192 tokens. However, your messages
#    resulted in 9120 tokens" or "... you requested 9120 tokens (5024 in the messages, 4096 in
#    the completion)"
#  Anthropic: "prompt is too long: 210345 tokens > 200000 maximum", "input length and
#    `max_tokens` exceed context limit: 188240 + 21333 > 200000"
#  DashScope: "Range of input length should be [1, 30720]"
#  llama.cpp server: body {"n_prompt_tokens": 9120, "n_ctx": 8192}
_WINDOW_RE = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    re.compile(r"tokens? > (\d+) maximum", re.IGNORECASE),
    re.compile(r"range of input length should be \[\d+,\s*(\d+)\]", re.IGNORECASE),
    re.compile(r"""['"]n_ctx['"]:\s*(\d+)"""),
)
_PROMPT_RE = (
    re.compile(r"messages resulted in (\d+) tokens", re.IGNORECASE),
    re.compile(r"\((\d+) in the messages", re.IGNORECASE),
    re.compile(r"request has (\d+) input tokens", re.IGNORECASE),
    re.compile(r"prompt is too long: (\d+) tokens", re.IGNORECASE),
    re.compile(r"""['"]n_prompt_tokens['"]:\s*(\d+)"""),
)
_RESERVED_RE = re.compile(r"(\d+) in the completion", re.IGNORECASE)
_SUM_RE = re.compile(r"context limit: (\d+) \+ (\d+) > (\d+)", re.IGNORECASE)


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


def stated_limits(error: BaseException) -> StatedLimits:
    """The window and prompt size a provider's context-length error states."""
    text = " ".join(
        [str(error), repr(getattr(error, "body", "") or ""), str(getattr(error, "message", ""))]
    )
    total = _SUM_RE.search(text)
    if total:
        prompt, output, limit = (int(g) for g in total.groups())
        return StatedLimits(window=max(limit - output, 1), prompt=prompt)
    window = _first(_WINDOW_RE, text)
    reserved = _RESERVED_RE.search(text)
    if window is not None and reserved:
        window = max(window - int(reserved.group(1)), 1)
    return StatedLimits(window=window, prompt=_first(_PROMPT_RE, text))


class _Holder(Protocol):
    calibration: dict[str, float]


class Calibration:
    """The calibration of one model's prompts, stored in `holder.calibration`.

    Args:
        holder: the object whose `calibration` dict is persisted (the `ContextMemory`); read
            at every use, since loading a state replaces the dict.
        key: the model's name; the factor is stored under it, the evidence count, the
            learned budget and the last call's time under `key#reports`, `key#window` and
            `key#called`.
        max_input_tokens: the configured budget.
    """

    def __init__(self, holder: _Holder, key: str, max_input_tokens: int) -> None:
        self.holder = holder
        self.key = key
        self.max_input_tokens = max_input_tokens

    @property
    def factor(self) -> float:
        """Provider tokens per estimated token, the prior (1.0) applied."""
        store = self.holder.calibration
        stored = store.get(self.key)
        if stored is None:
            return 1.0
        if store.get(self.key + _REPORTS, 0.0) < MIN_EVIDENCE:
            return max(stored, 1.0)
        return stored

    @property
    def scale(self) -> float:
        """What our estimates are multiplied by: the factor plus the safety margin."""
        return self.factor * (1 + MARGIN)

    @property
    def budget(self) -> int:
        """The effective `max_input_tokens`: the configured one, or less when the provider
        stated a smaller window."""
        window = self.holder.calibration.get(self.key + _WINDOW)
        return self.max_input_tokens if window is None else min(self.max_input_tokens, int(window))

    @property
    def called(self) -> float | None:
        """When the model's usage of the last call came (`note_call`), in the clock's
        seconds; `None`: no call noted in this session."""
        return self.holder.calibration.get(self.key + _CALLED)

    def note_call(self, now: float) -> None:
        """The model answered a call at `now` (saved with the session, like the factor)."""
        self.holder.calibration[self.key + _CALLED] = now

    def observe(self, reported: int, estimate: int, *, complete: bool = False) -> float | None:
        """Fold a provider's count of a prompt into the factor; returns the new factor.

        Args:
            reported: the provider's count (cache fields already added).
            estimate: our raw estimate of the same prompt.
            complete: whether `reported` is known to cover the whole prompt; if not, it is
                only a lower bound (it may raise the factor, never lower it).
        """
        if estimate <= 0 or reported <= 0:
            return None
        store = self.holder.calibration
        ratio = reported / estimate
        old = self.factor
        if complete:
            big = estimate >= EVIDENCE_SHARE * self.budget
            evidence = store.get(self.key + _REPORTS, 0.0) + big
            store[self.key + _REPORTS] = evidence
            target = max(ratio, BOUNDS[0] if big and evidence >= MIN_EVIDENCE else min(1.0, old))
        else:
            target = max(ratio, old)
        new = min(max(target, old * STEP_DOWN), old * STEP_UP)
        new = min(max(new, BOUNDS[0]), BOUNDS[1])
        store[self.key] = new
        return new

    def on_overflow(self, error: BaseException, estimate: int) -> None:
        """Learn from a context-length error on a prompt we estimated at `estimate` tokens.

        A stated window lowers the budget for the rest of the session (persisted with the
        factor). A stated prompt size is a complete report; a stated window alone is a lower
        bound of the prompt's size. An error without numbers raises the factor by
        `OVERFLOW_RAISE` unless a learned window already explains it.
        """
        stated = stated_limits(error)
        if stated.window is not None:
            budget = max(math.floor(stated.window * (1 - WINDOW_MARGIN)), 1)
            if budget < self.budget:
                self.holder.calibration[self.key + _WINDOW] = float(budget)
                logger.warning(
                    "agentscope_ctx: %s accepts %d input tokens; using a budget of %d for this "
                    "session (max_input_tokens is %d)",
                    self.key,
                    stated.window,
                    budget,
                    self.max_input_tokens,
                )
        if stated.prompt is not None and estimate > 0:
            self.observe(stated.prompt, estimate, complete=True)
        elif stated.window is not None and estimate > 0:
            self.observe(stated.window + 1, estimate)
        elif estimate <= 0 or math.ceil(estimate * self.scale) <= self.budget:
            raised = min(self.factor * OVERFLOW_RAISE, BOUNDS[1])
            self.holder.calibration[self.key] = raised
