"""Native mode on a 2.x agent (``compactor.mode: native``; docs/providers.md).

- `native_call`, at each model call (`_calls.guarded_call`): the call's `NativeCall` when
  the agent's model speaks a native compaction (`AnthropicChatModel`, `OpenAIResponseModel`)
  and its provider has not refused it: the trigger, the OpenAI items the request may send
  back, and the ids of the live messages it sends. The model's client is wrapped once
  (`models._native_client`).
- `keep_native`, after it: a block the response opened with is kept in the agent's state,
  `state.middle_context["agentscope_ctx.native"]`: ``pending`` (the block and what it
  replaced, until taken into the memory) and ``items`` (OpenAI's items by name, which the
  summary's stand-in names: the item itself is too big and opaque for the summary). The
  state travels with the session (AgentScope's app storage, Redis or SQL), so another worker
  takes it up.
- `take_pending`, before the next pipeline run (`on_reasoning`): each pending block is taken
  into the memory (`models._native_apply`: what it replaced saved to the dialog store first,
  the summary its stand-in), and the state written back.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..core._errors import PersistenceError
from ..models._native import ANTHROPIC_MIN_TRIGGER, NativeCall, item_key, native_kind
from ..models._native_apply import apply_native
from ..models._native_client import native_client

if TYPE_CHECKING:
    from agentscope.agent import Agent

    from ._agents import AgentRuns
    from ._binding import Binding

__all__ = ["NATIVE_KEY", "keep_native", "native_call", "take_pending"]

logger = logging.getLogger("agentscope_ctx")

NATIVE_KEY = "agentscope_ctx.native"
"""The native blocks' slot in `AgentState.middle_context`."""


def _slot(agent: Agent) -> dict[str, Any]:
    slot = agent.state.middle_context.get(NATIVE_KEY)
    if not isinstance(slot, dict):
        slot = {}
        agent.state.middle_context[NATIVE_KEY] = slot
    return slot


def native_call(
    manager: AgentRuns, agent: Agent, binding: Binding, model: Any
) -> NativeCall | None:
    """The native-mode part of one model call (`None`: off, not this provider, refused)."""
    try:
        config = manager.config.compactor
        kind = native_kind(model)
        if config.mode != "native" or kind is None or not native_client(model):
            return None
        trigger = int(config.native_trigger_ratio * binding.pipeline.calibration.budget)
        if kind == "anthropic":
            trigger = max(trigger, ANTHROPIC_MIN_TRIGGER)
        memory = binding.memory
        items = _slot(agent).get("items")
        return NativeCall(
            kind,
            trigger,
            items=dict(items) if isinstance(items, dict) else {},
            replaced=[m.id for m in memory.messages() if m.id not in memory.hidden],
        )
    except Exception:  # native mode is a saving: never fail the call for it
        logger.exception("agentscope_ctx: could not prepare native context management")
        return None


def keep_native(agent: Agent, call: NativeCall | None) -> None:
    """Keep the block `call` captured in the agent's state (once)."""
    if call is None or call.captured is None:
        return
    block, call.captured = call.captured, None
    try:
        slot = _slot(agent)
        pending = slot.setdefault("pending", [])
        pending.append({"kind": call.kind, "block": block, "replaced": list(call.replaced)})
        if call.kind == "responses":
            slot.setdefault("items", {})[item_key(block)] = block
    except Exception:
        logger.exception("agentscope_ctx: could not keep the provider's compaction")


async def take_pending(manager: AgentRuns, agent: Agent, binding: Binding) -> None:
    """Take the pending blocks into the memory and write the state back (see the module)."""
    slot = agent.state.middle_context.get(NATIVE_KEY)
    if not isinstance(slot, dict) or not slot.get("pending"):
        return
    pending: list[dict[str, Any]] = slot["pending"]
    async with binding.lock:
        state = agent.state
        try:
            await binding.mirror.pull(state)
        except Exception:
            logger.exception("agentscope_ctx: could not read the agent's state")
            return
        compaction = binding.pipeline.compaction
        taken = 0
        for entry in list(pending):
            try:
                n = await apply_native(
                    binding.memory, compaction.dialog, entry["kind"], entry["block"],
                    entry["replaced"],
                )  # fmt: skip
            except PersistenceError as exc:  # kept pending: tried again at the next run
                logger.warning("agentscope_ctx: could not save what the provider compacted: %s",
                               exc)  # fmt: skip
                break
            except Exception:
                logger.exception("agentscope_ctx: could not take the provider's compaction")
            pending.remove(entry)
            taken += n
        if taken:
            compaction.prompts.drop()
            binding.notify(
                f"[agentscope_ctx] the provider compacted {taken} messages (native mode); "
                "they are saved in dialog/"
            )
        summary = binding.memory.summary_text()
        items = slot.get("items")
        if isinstance(items, dict):  # only the items the summary or a pending entry names
            waiting = {item_key(e["block"]) for e in pending if e["kind"] == "responses"}
            slot["items"] = {
                k: v for k, v in items.items() if k in waiting or f"item={k})" in summary
            }
        try:
            binding.mirror.push(state)
        except Exception:
            logger.exception("agentscope_ctx: could not write the agent's state")
