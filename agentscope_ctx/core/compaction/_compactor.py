"""`Compactor`: writes the sectioned summary that replaces the older part of the context.

The summary is written by an AgentScope agent (`_runner.run_agent`: tool-less, one
iteration, fresh memory per call; a `ReActAgent` on 1.x, an `Agent` on 2.x) on the configured
model, from the previous summary and a compact transcript of the older messages. It answers in
plain text: no structured output, no tools, no `response_format`, so providers that reject
those serve it too; a missing section is a validation error like any other (retry, then the
extractive fallback), never an exception. When the transcript does not fit the compactor's own
input budget, it is summarised in chunks, oldest first, each folding into the running summary.

Every model answer is validated (`validate_summary`; in tokens, not longer than the messages
and previous summary it replaces, with a 256-token floor, nor than a quarter of the budget); an
invalid answer is retried once with the error in the prompt; a second failure, a model exception
or a timeout (`timeout_seconds`, per model call) falls back to the deterministic
`extractive_summary` for the rest. `Compactor.compact` therefore never raises (except
`asyncio.CancelledError`). A manual compaction's extra instruction goes into every chunk's
prompt. Section headings stay English in every language (see `_extractive`).

Two forms of request (`compactor.request`). ``plain``: the compactor's own system prompt and
a transcript of the older messages, as above. ``prefix`` (with ``auto``, the default, once the
provider has reported cache reads; see `Compaction`): the agent's last prompt exactly as its
model was called (`LastPrompt`, kept by the adapter until the next
call: the same system prompt, messages, tool schemas, and a `tool_choice` that does not force
a call), then one user message with the rules, the headings and the part to fold in (the
older messages the last prompt did not show, as a transcript). Providers that cache prompt
prefixes serve all but that message from the cache (a tenth of the price at Anthropic and
OpenAI's current models, a fifth at DashScope): see README, "Cheap compaction calls". It is
used only when the compactor's model is the agent's (`model_key`: class, model name,
endpoint) and the request fits the compactor's input budget (the answer's room is the
provider's output allowance beyond `max_input_tokens`, as for the agent's own calls);
otherwise, or when the provider rejects it as too long, the plain form is used. One call, no
chunks; the answer is cleaned and validated as in the plain form, retried once in the same
form, then the extractive fallback. The words of both forms: `_compactor_prompts`; the kept
prompt: `_prefix`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .._entry import Msg
from .._overflow import is_context_overflow
from .._runner import call_prefixed, format_prefixed, format_prompt, has_model, run_agent
from ..config._config import CompactorConfig
from ..summary._extractive import extractive_summary, render_msg, validate_summary
from ..summary._outcome import ReadSaved
from ..tokens._tokens import TokenCounter
from ._compactor_prompts import (
    SYSTEM,
    Ask,
    clean_answer,
    cut_to_tokens,
    plain_prompt,
    prefix_instruction,
)
from ._prefix import Prefix, model_key

if TYPE_CHECKING:
    from agentscope.formatter import FormatterBase
    from agentscope.model import ChatModelBase

__all__ = ["CompactionResult", "Compactor", "run_agent"]

logger = logging.getLogger("agentscope_ctx")

_MIN_CHUNK_TOKENS = 128


class _ModelFailure(Exception):
    """The model call raised or timed out."""


@dataclass(frozen=True)
class CompactionResult:
    """What `Compactor.compact` produced.

    Attributes:
        summary: The sectioned Markdown summary, without any wrapper.
        source: `"model"`, `"model_retry"` (an answer was rejected once, then accepted) or
            `"extractive"` (the deterministic fallback wrote at least part of it).
        reason: Why it retried or fell back, for the log and the user; `None` when all went well.
        chunks: How many chunks the model was asked to summarise (0 when it was not used).
    """

    summary: str
    source: Literal["model", "model_retry", "extractive"]
    reason: str | None
    chunks: int


class Compactor:
    """Turns the previous summary and the older messages into the new summary."""

    def __init__(
        self,
        config: CompactorConfig,
        *,
        model: ChatModelBase | None,
        formatter: FormatterBase | None,
        counter: TokenCounter,
        max_input_tokens: int,
        read_saved: ReadSaved | None = None,
    ) -> None:
        """Initialize the compactor.

        Args:
            config: The compactor settings.
            model: The model that writes summaries; `None` means extractive summaries only.
            formatter: The formatter of `model`: required on AgentScope 1.x (without it, the
                summaries are extractive); on 2.x ignored, the model owns its formatter.
            counter: Counts tokens for budgets and validation.
            max_input_tokens: The main input budget, used when `config.max_input_tokens` is
                `None`.
            read_saved: Reads a saved output back (bounded), so that the extractive fallback
                judges a run whose output was cut or masked from the whole output.
        """
        self.config = config
        self._model = model
        self._formatter = formatter
        self._counter = counter
        self._read_saved = read_saved
        self.budget = config.max_input_tokens or max_input_tokens
        """The compactor's own input budget, in tokens."""
        self.max_summary_tokens = max(256, min(self.budget, max_input_tokens) // 4)
        """The longest summary accepted from the model, in tokens: a quarter of the main
        budget (or of the compactor's own, when smaller); a larger compactor window gives
        larger chunks, not a larger summary."""

    def use_model(self, model: ChatModelBase | None) -> None:
        """Write summaries with `model` from now on (`None`: extractive only)."""
        self._model = model

    async def compact(
        self,
        previous_summary: str,
        messages: Sequence[Msg],
        *,
        extra_instruction: str | None = None,
        prefix: Prefix | None = None,
    ) -> CompactionResult:
        """Write the summary that replaces `messages`. Never raises, except on cancellation.

        Args:
            previous_summary: The current summary (empty string if there is none), raw: without
                the guide the memory adds when presenting it.
            messages: The messages to replace, oldest first.
            extra_instruction: The user's instruction for a manual compaction.
            prefix: The agent's last prompt and how `messages` relate to it: with
                `compactor.request: prefix`, the request starts with that prompt (see the
                module docstring).

        Returns:
            The summary and how it was obtained.
        """
        try:
            if not has_model(self._model, self._formatter) or not self.config.enabled:
                why = "compactor disabled" if not self.config.enabled else "no model configured"
                return await self._fallback(previous_summary, messages, why, 0)
            if not messages:
                reason = "no messages to compact"
                if previous_summary.strip() and validate_summary(previous_summary) is None:
                    return CompactionResult(previous_summary, "extractive", reason, 0)
                return await self._fallback(previous_summary, messages, reason, 0)
            if prefix is not None and self.config.request != "plain":
                result = await self._prefixed(
                    previous_summary, list(messages), extra_instruction, prefix
                )
                if result is not None:
                    return result
            return await self._with_model(previous_summary, list(messages), extra_instruction)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug here must not cost the agent its reply
            logger.exception("Compactor failed unexpectedly; using the extractive summary.")
            return await self._fallback(previous_summary, messages, f"internal error: {exc!r}", 0)

    async def _with_model(
        self, summary: str, messages: list[Msg], extra: str | None
    ) -> CompactionResult:
        if await self._counter.count_text(summary) > self.max_summary_tokens:
            logger.info("Compactor: the previous summary is over budget; condensing it first.")
            summary = (await self._fallback(summary, [], "", 0)).summary
        rendered = [render_msg(msg) for msg in messages]
        sizes = [await self._counter.count_text(text) + 2 for text in rendered]
        start, chunks, retried = 0, 0, None
        while start < len(messages):
            room = self.budget - await self._prompt_tokens(summary, extra)
            room = max(room - 32 - self.budget // 100, _MIN_CHUNK_TOKENS)
            end, used = start + 1, sizes[start]
            while end < len(messages) and used + sizes[end] <= room:
                used += sizes[end]
                end += 1
            texts = rendered[start:end]
            if sizes[start] > room:
                texts = [await cut_to_tokens(self._counter, texts[0], room)]
            chunks += 1
            part = chunks if chunks > 1 or end < len(messages) else None
            replaced = await self._counter.count_msgs(messages[start:end])
            replaced += await self._counter.count_text(summary)
            ask = Ask(summary, "\n\n".join(texts), extra, part, end < len(messages), replaced)
            try:
                answer, error, again = await self._answer(ask, f"chunk {chunks}: ")
                retried = again or retried
            except _ModelFailure as exc:
                error = str(exc)
            if error is not None:
                reason = f"chunk {chunks}: {error}"
                return await self._fallback(summary, messages[start:], reason, chunks)
            summary, start = answer, end
        return CompactionResult(summary, "model_retry" if retried else "model", retried, chunks)

    async def _answer(self, ask: Ask, label: str = "") -> tuple[str, str | None, str | None]:
        """The model's answer to `ask`, asked once more when it is rejected: the answer, what
        is still wrong with it, and why it was asked again (`None`: taken at once; `label`,
        e.g. ``"chunk 2: "``, starts it).

        Raises:
            _ModelFailure: a call raised or timed out (not worth a retry).
        """
        answer, error = await self._attempt(ask)
        if error is None:
            return answer, None, None
        retried = f"{label}first answer rejected: {error}"
        logger.info("Compactor %s; retrying once.", retried)
        answer, error = await self._attempt(ask, error=error)
        return answer, error and f"answer rejected twice: {error}", retried

    async def _attempt(self, ask: Ask, *, error: str | None = None) -> tuple[str, str | None]:
        """One model call; returns the cleaned answer and what is wrong with it, if anything.

        Raises:
            _ModelFailure: the call raised or timed out (not worth a retry).
        """
        assert self._model is not None
        if ask.prefix is not None:
            last = ask.prefix.prompt
            call = call_prefixed(
                self._model,
                self._formatter,
                last.messages,
                tools=last.tools,
                tool_choice=last.tool_choice,
                instruction=prefix_instruction(ask, error, self.config.language),
                cache=last.cache,
            )
        else:
            call = run_agent(
                self._model,
                self._formatter,
                name="compactor",
                sys_prompt=SYSTEM[self.config.language],
                prompt=plain_prompt(ask, error, self.config.language),
            )
        try:
            answer = await asyncio.wait_for(call, timeout=self.config.timeout_seconds)
        except asyncio.TimeoutError:
            raise _ModelFailure(
                f"model timed out after {self.config.timeout_seconds:g} s"
            ) from None
        except Exception as exc:
            logger.warning("Compactor model call failed: %r", exc)
            raise _ModelFailure(f"model call failed: {exc!r}") from exc
        answer = clean_answer(answer)
        problem = validate_summary(answer)
        return answer, problem or await self._check_size(answer, ask.replaced)

    async def _check_size(self, answer: str, replaced: int) -> str | None:
        tokens = await self._counter.count_text(answer)
        limit = min(max(replaced, 256), self.max_summary_tokens)
        if tokens > limit:
            return f"the summary has {tokens} tokens, more than the {limit} allowed"
        return None

    async def _prefixed(
        self, summary: str, messages: list[Msg], extra: str | None, prefix: Prefix
    ) -> CompactionResult | None:
        """The compaction as one prefix request; `None` when that form does not apply (another
        model, or the request would not fit the compactor's input budget, or the provider
        said it is too long)."""
        assert self._model is not None
        if prefix.prompt.model != model_key(self._model):
            logger.debug("Compactor: the agent's model is not the compactor's; plain request.")
            return None
        transcript = "\n\n".join(render_msg(msg) for msg in prefix.unseen)
        replaced = await self._counter.count_msgs(messages) + await self._counter.count_text(
            summary
        )
        ask = Ask(summary, transcript, extra, None, False, replaced, prefix)
        last = prefix.prompt
        request = await format_prefixed(
            self._model,
            self._formatter,
            last.messages,
            prefix_instruction(ask, "x" * 200, self.config.language),
        )
        tokens = await self._counter.count(request, tools=last.tools)
        if tokens + 32 + self.budget // 100 > self.budget:
            logger.info(
                "Compactor: the prefix request (%d tokens) would not fit the input budget (%d); "
                "plain request.",
                tokens,
                self.budget,
            )
            return None
        del request
        try:
            answer, error, retried = await self._answer(ask)
        except _ModelFailure as exc:
            if exc.__cause__ is not None and is_context_overflow(exc.__cause__):
                logger.info(
                    "Compactor: the provider rejected the prefix request as too long; "
                    "plain request."
                )
                return None  # the plain request is smaller: it may fit
            error = str(exc)
        if error is not None:
            return await self._fallback(summary, messages, f"prefix request: {error}", 1)
        return CompactionResult(answer, "model_retry" if retried else "model", retried, 1)

    async def _prompt_tokens(self, summary: str, extra: str | None) -> int:
        """Tokens of the formatted prompt without the transcript (a retry note included)."""
        assert self._model is not None
        prompt = plain_prompt(
            Ask(summary, "", extra, 999, True, 0), "x" * 200, self.config.language
        )
        formatted = await format_prompt(
            self._model, self._formatter, sys_prompt=SYSTEM[self.config.language], prompt=prompt
        )
        return await self._counter.count(formatted)

    async def _fallback(
        self, summary: str, messages: Sequence[Msg], reason: str, chunks: int
    ) -> CompactionResult:
        """The extractive summary, shrunk until it fits `max_summary_tokens` (or cannot shrink)."""
        if chunks or reason.startswith("internal"):
            logger.warning("Compactor fell back to the extractive summary: %s", reason)
        max_chars = 12_000
        while True:
            text = extractive_summary(
                summary,
                messages,
                language=self.config.language,
                max_chars=max_chars,
                read_saved=self._read_saved,
            )
            if (
                max_chars <= 1_000
                or await self._counter.count_text(text) <= self.max_summary_tokens
            ):
                break
            max_chars //= 2
        return CompactionResult(text, "extractive", reason, chunks)
