"""The agent's last prompt, kept for the Compactor's prefix request (`compactor.request`;
issue 22 item 5, "Cheap compaction calls" in the README).

The adapter tells the `PromptKeeper` of its pipeline's `Compaction` when the agent's next model
call sends the memory as it is now (`expect`, right after the pipeline ran before a reasoning
call) and then what that call sent (`keep`: the messages as sent, the tools, the
`tool_choice`, the model). With ``prefix``, or ``auto`` once the provider reported cache reads,
and while the kept prompt still matches the memory (the same summary, none of its messages gone
or hidden), a compaction gives it to the compactor (`Prefix`), so that the request can start
with that prompt; the compaction that removes messages drops it (`drop`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._entry import Msg
    from ..config._config import ContextConfig
    from ..context._memory import ContextMemory
    from ..tokens._calibration import CacheStats

__all__ = ["LastPrompt", "Prefix", "PromptKeeper", "model_key"]


def model_key(model: object) -> str:
    """Which model a call goes to, for telling whether two calls share a prompt cache: the
    client's class, the model's name and the endpoint where the client states one (1.x:
    `client.base_url`; 2.x: `credential.base_url`); a wrapper, such as 1.x's guard, counts
    as its `inner` model."""
    inner = getattr(model, "inner", None) or model
    name = getattr(inner, "model_name", None) or getattr(inner, "model", None)
    where = getattr(getattr(inner, "client", None), "base_url", None)
    where = where or getattr(getattr(inner, "credential", None), "base_url", None)
    return f"{type(inner).__module__}.{type(inner).__qualname__}:{name}@{where or ''}"


@dataclass(frozen=True)
class LastPrompt:
    """The agent's last prompt, as its model was called (the adapter keeps it until the next
    call, or until a compaction makes it stale).

    Attributes:
        messages: What the model was given: on 1.x the formatted messages, on 2.x the
            messages (the model formats them).
        tools: The tool schemas sent with them (`None`: none).
        tool_choice: The `tool_choice` sent with them.
        model: `model_key` of the agent's model.
        shown: Ids of the memory's messages in the prompt.
        summary: The memory's summary when the prompt was made (a changed summary means a
            compaction since: the prompt no longer matches the memory).
        cache: What the call applied for the provider's prompt cache (the adapter's own: the
            marks' plan and the ``prompt_cache_key``), which the prefix request applies too
            (`PrefixedCall.cache`): without it, Anthropic and Model Studio read nothing of
            the cached prompt (no mark) and OpenAI routes the request to another cache (no
            key). `None` in either place: nothing applied.
    """

    messages: Sequence[Any]
    tools: list[dict[str, Any]] | None
    tool_choice: Any
    model: str
    shown: frozenset[str]
    summary: str
    cache: tuple[Any, str | None] = (None, None)


@dataclass(frozen=True)
class Prefix:
    """What a prefix request needs besides the messages to replace.

    Attributes:
        prompt: The agent's last prompt.
        unseen: The messages to replace that `prompt` does not show (newer ones), oldest first.
        anchor: The first message that stays and that `prompt` shows (`None`: the whole
            conversation shown is folded in).
    """

    prompt: LastPrompt
    unseen: Sequence[Msg]
    anchor: Msg | None


class PromptKeeper:
    """The agent's last prompt while it matches `memory` (see the module docstring)."""

    def __init__(
        self, config: ContextConfig, memory: ContextMemory, cache: CacheStats | None
    ) -> None:
        """`cache` is what the provider reported of its prompt cache (``auto`` makes prefix
        requests once it reported reads)."""
        self.config = config
        self.memory = memory
        self.cache = cache
        self.last: LastPrompt | None = None
        """The agent's last prompt, as the adapter saw its model called (`None`: not kept)."""
        self._expected: tuple[frozenset[str], str] | None = None

    def expect(self) -> None:
        """The agent's next model call sends the memory as it is now: the adapter says so
        right after the pipeline ran before a reasoning call (other calls of the model, e.g.
        a query rewrite, are not the agent's context and are not kept)."""
        compactor = self.config.compactor
        if compactor.request == "plain" or not compactor.enabled:
            self._expected = self.last = None
            return
        hidden = self.memory.hidden
        shown = frozenset(m.id for m in self.memory.messages() if m.id not in hidden)
        self._expected = (shown, self.memory.compact_summary)

    def keep(
        self,
        messages: Sequence[Any] | None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        model: object = None,
        cache: tuple[Any, str | None] = (None, None),
    ) -> None:
        """The agent's model was called with `messages` (as sent), `tools` and `tool_choice`,
        under `cache` (`LastPrompt.cache`; `messages=None`: the call failed). Kept as `last`
        when the call was the one `expect` announced; the previous one is dropped either
        way."""
        expected, self._expected = self._expected, None
        if expected is None or messages is None:
            return
        self.last = LastPrompt(
            messages, tools, tool_choice, model_key(model), *expected, cache=cache
        )

    def drop(self) -> None:
        """Messages leave the memory: no request can start with the kept prompt any more."""
        self.last = None

    def prefix(self, msgs: Sequence[Msg], split: int, older: Sequence[Msg]) -> Prefix | None:
        """The agent's last prompt for the compactor, while it still matches the memory
        (`msgs`; `older`, from `msgs[:split]`, are to be replaced); `None`: the plain request."""
        last = self.last
        request = self.config.compactor.request
        if last is None or request == "plain":
            return None
        if request == "auto" and not (self.cache is not None and self.cache.cached_tokens > 0):
            return None  # no sign that the provider caches: the plain request is cheaper
        ids = {m.id for m in msgs}
        if last.summary != self.memory.compact_summary or not last.shown <= ids:
            self.last = None  # made before a compaction or an edit of the memory
            return None
        if last.shown & set(self.memory.hidden):
            return None
        unseen = [m for m in older if m.id not in last.shown]
        anchor = next((m for m in msgs[split:] if m.id in last.shown), None)
        return Prefix(last, unseen, anchor)
