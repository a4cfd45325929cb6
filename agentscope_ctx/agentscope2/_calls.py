"""Around each model call of a 2.x agent: the model's view, calibration, overflow recovery.

The 2.x twin of 1.x's `GuardedModel`, run from `ContextMiddleware.on_model_call`:

- the messages sent are the state's with the views applied (outputs that could not be saved
  are shown cut; messages compacted but not yet saved are left out; see `StateMirror.shown`);
- the provider's usage (of the response, or of a stream's last chunk) goes to the calibration,
  so our estimate follows the provider's count (`Calibration`);
- the provider's prompt cache is told where the stable prefix ends (`cache.mode`,
  `models._cache`): `cache_control` breakpoints on the request the model's formatter makes
  (Anthropic, Alibaba Model Studio), a `prompt_cache_key` per tenant and session (OpenAI);
- in native mode (`compactor.mode`), the provider's compaction is asked for and its block
  kept in the state, to be taken into the memory before the next run (`_native`);
- a context-length error (`is_context_overflow`, any provider) teaches the calibration the
  stated window, compacts at once to half the usual kept share with the prompt fitted to 75%
  of the rejected one, and retries once with the prompt rebuilt from the state. A second
  error, or any other, goes to AgentScope's own retry and fallback.

A stream's first chunk is awaited here, so that an error raised when the request is made
(which a streaming model raises on the first chunk) is caught here too.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agentscope.message import Msg, UserMsg
from agentscope.model import AnthropicChatModel, ChatResponse

from ..core.tokens._calibration import PromptUsage
from ..models._cache import PLAN, CachePlan, KeyedModel, call_cache, marking_formatter
from ..models._guard import is_context_overflow, note_unreachable
from ..models._native_client import NATIVE
from ._native import keep_native, native_call

if TYPE_CHECKING:
    from agentscope.agent import Agent

    from ..core.compaction._compaction import Compaction
    from ._agents import AgentRuns
    from ._binding import Binding

__all__ = ["EMERGENCY_SHRINK", "guarded_call", "prompt_usage"]

logger = logging.getLogger("agentscope_ctx")

EMERGENCY_SHRINK = 0.75
"""After a context-length error, the retried prompt is at most this share of the rejected one."""

ModelResult = ChatResponse | AsyncGenerator[ChatResponse, None]


async def guarded_call(
    manager: AgentRuns,
    agent: Agent,
    binding: Binding,
    kwargs: dict[str, Any],
    next_handler: Callable[..., Awaitable[ModelResult]],
) -> ModelResult:
    """One model call of `agent` (see the module docstring)."""
    messages = binding.mirror.shown(list(kwargs["messages"]))
    model = kwargs.get("current_model")
    compaction = binding.pipeline.compaction
    plan, keyed = _cache_call(manager, agent, binding, model)
    native = native_call(manager, agent, binding, model)  # compactor.mode native (`_native`)
    token, native_token = PLAN.set(plan), NATIVE.set(native)
    try:
        try:
            result = await _started(await next_handler(messages=messages, **keyed))
        except Exception as error:
            compaction.prompts.keep(None)
            if not is_context_overflow(error):
                note_unreachable(error)
                raise
            retry = await _recover(manager, agent, binding, error, messages)
            if retry is None:
                raise
            PLAN.set(_cache_call(manager, agent, binding, model)[0])  # the ladder moved
            result = await _started(await next_handler(messages=retry, **keyed))
        else:
            key = keyed["current_model"].key if keyed else None
            _keep(compaction, messages, kwargs, model, (plan, key))
    finally:
        PLAN.reset(token)
        NATIVE.reset(native_token)
    if isinstance(result, ChatResponse):
        _observe(binding, result, model)
        keep_native(agent, native)
        return result
    return _observed(result, binding, model, lambda: keep_native(agent, native))


def _cache_call(
    manager: AgentRuns, agent: Agent, binding: Binding, model: Any
) -> tuple[CachePlan | None, dict[str, Any]]:
    """The cache marks of this call (`None`: none) and the model to call instead, if any (a
    `KeyedModel` carrying the tenant's `prompt_cache_key` on OpenAI's API)."""
    try:
        config = manager.config.cache
        plan, key = call_cache(
            model,
            config.mode,
            config.ttl,
            binding.pipeline.cache_marks,
            lambda: manager.tenant_of(str(agent.name)),
        )
        if plan is not None:
            marking_formatter(model)
        return plan, {} if key is None else {"current_model": KeyedModel(model, key)}
    except Exception:  # the cache is a saving: never fail the call for it
        logger.exception("agentscope_ctx: could not place the prompt-cache marks")
        return None, {}


def _keep(
    compaction: Compaction,
    messages: list[Msg],
    kwargs: dict[str, Any],
    model: Any,
    cache: tuple[CachePlan | None, str | None],
) -> None:
    """Keep the prompt for the compactor's prefix request (`PromptKeeper.keep`): each
    message with its list of blocks as sent (the agent may add blocks to a message later;
    a shallow copy of the list, not of the blocks), and the call's marks and key."""
    try:
        sent = [
            msg.model_copy(update={"content": list(msg.content)})
            if isinstance(msg.content, list)
            else msg
            for msg in messages
        ]
        compaction.prompts.keep(
            sent, kwargs.get("tools"), kwargs.get("tool_choice"), model, cache=cache
        )
    except Exception:  # keeping the prompt is a nicety: never fail the call
        logger.exception("agentscope_ctx: could not keep the prompt")


def prompt_usage(usage: Any, model: Any) -> PromptUsage | None:
    """The prompt size a 2.x `ChatUsage` reports (`None` when it reports none).

    2.x models report the prompt's tokens in `input_tokens` (OpenAI, DashScope, Ollama,
    Gemini: the whole prompt, cache reads included) and the cache reads in
    `cache_input_tokens`; Anthropic's `input_tokens` leaves both cache fields out, so they are
    added. A cache read of 0 counts as reported (2.x cannot say "not reported"); cache writes
    (`cache_creation_input_tokens`) only AgentScope's Anthropic model fills in: elsewhere they
    are not reported (`None`)."""
    tokens = getattr(usage, "input_tokens", None)
    if not isinstance(tokens, int) or tokens < 0:
        return None
    cached = int(getattr(usage, "cache_input_tokens", 0) or 0)
    created = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
    if isinstance(getattr(model, "inner", model), AnthropicChatModel):  # (a wrapper's inner)
        tokens += cached + created  # (its input_tokens is 0 when all of it was cached)
        return (
            PromptUsage(tokens, complete=True, cached=cached, created=created) if tokens else None
        )
    return PromptUsage(tokens, complete=True, cached=cached) if tokens else None


async def _started(result: ModelResult) -> ModelResult:
    """A stream with its first chunk already received (errors raise here), or `result`."""
    if isinstance(result, ChatResponse):
        return result
    try:
        first = await anext(result)
    except StopAsyncIteration:
        return _empty()

    async def replay() -> AsyncGenerator[ChatResponse, None]:
        yield first
        async for chunk in result:
            yield chunk

    return replay()


async def _empty() -> AsyncGenerator[ChatResponse, None]:
    return
    yield  # an async generator that yields nothing


async def _observed(
    stream: AsyncGenerator[ChatResponse, None],
    binding: Binding,
    model: Any,
    done: Callable[[], None],
) -> AsyncGenerator[ChatResponse, None]:
    async for chunk in stream:
        if chunk.is_last:
            _observe(binding, chunk, model)
            done()
        yield chunk
    done()


def _observe(binding: Binding, response: ChatResponse, model: Any) -> None:
    try:
        usage = prompt_usage(response.usage, model)
        if usage is not None:
            binding.pipeline.observe_usage(usage)
    except Exception:  # learning from usage is a nicety: never fail the call
        logger.exception("agentscope_ctx: could not read the provider's usage")


async def _recover(
    manager: AgentRuns,
    agent: Agent,
    binding: Binding,
    error: Exception,
    messages: list[Msg],
) -> list[Msg] | None:
    """Compact after a context-length error; the messages to retry with, or `None`."""
    try:
        notice = (
            "[agentscope_ctx] the provider says the prompt is too long: "
            "emergency compaction, then one retry"
        )
        logger.info("%s", notice)
        binding.notify(notice)
        pipeline = binding.pipeline
        pipeline.calibration.on_overflow(error, pipeline.last_estimate)
        rejected = math.ceil(pipeline.last_estimate * pipeline.scale)
        report = await manager.run(
            binding,
            when="emergency",
            force=True,
            keep_ratio=manager.config.keep_recent_ratio / 2,
            target=int(rejected * EMERGENCY_SHRINK),
        )
        if report is None or not (report.compacted or report.truncated):
            return None
        state = agent.state
        system = [msg for msg in messages[:1] if msg.role == "system"]
        summary = [UserMsg(name="user", content=state.summary)] if state.summary else []
        return [*system, *summary, *binding.mirror.shown(list(state.context))]
    except Exception:
        logger.exception("agentscope_ctx: the emergency compaction failed")
        return None
