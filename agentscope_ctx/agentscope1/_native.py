"""Native mode on a 1.x agent (``compactor.mode: native``; docs/providers.md).

`GuardedModel` asks `NativeHooks.call` for the native-mode part of each call (the agent's
model speaks Anthropic's compaction, its provider has not refused it: the trigger and the
ids of the live messages it sends; the model's client wrapped once,
`models._native_client`), and hands a call whose response opened with the provider's block
to `NativeHooks.taken`, which takes it into the memory at once (`models._native_apply`:
what it replaced saved to the dialog store first, the summary its stand-in). The agent adds
the response after that. The summary is the memory's state, so the block travels with the
session (`state_dict`, a shared memory backend). 1.x has no Responses model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..models._native import ANTHROPIC_MIN_TRIGGER, NativeCall, native_kind
from ..models._native_apply import apply_native
from ..models._native_client import native_client

if TYPE_CHECKING:
    from ..core._pipeline import ContextPipeline
    from ..core.config._config import ContextConfig
    from ..core.context._memory import ContextMemory

__all__ = ["NativeHooks"]

logger = logging.getLogger("agentscope_ctx")


@dataclass
class NativeHooks:
    """One agent's native mode: its config, model, memory and pipeline."""

    config: ContextConfig
    model: Any
    memory: ContextMemory
    pipeline: ContextPipeline

    def call(self) -> NativeCall | None:
        """The native-mode part of the next call (`None`: off, not this provider, refused)."""
        try:
            config = self.config.compactor
            kind = native_kind(self.model)
            if config.mode != "native" or kind is None or not native_client(self.model):
                return None
            trigger = int(config.native_trigger_ratio * self.pipeline.calibration.budget)
            memory = self.memory
            return NativeCall(
                kind,
                max(trigger, ANTHROPIC_MIN_TRIGGER) if kind == "anthropic" else trigger,
                replaced=[m.id for m in memory.messages() if m.id not in memory.hidden],
            )
        except Exception:  # native mode is a saving: never fail the call for it
            logger.exception("agentscope_ctx: could not prepare native context management")
            return None

    async def taken(self, call: NativeCall) -> None:
        """Take the block `call` captured into the memory (a failed save is logged: then
        nothing is removed, and the next compaction by the provider comes again)."""
        if call.captured is None:
            return
        compaction = self.pipeline.compaction
        n = await apply_native(
            self.memory, compaction.dialog, call.kind, call.captured, call.replaced
        )
        if n:
            compaction.prompts.drop()
            logger.info("agentscope_ctx: the provider compacted %d messages (native mode)", n)
