"""Two helpers of the 1.x `ContextManager`: the `ContextMemory` that takes an agent's memory
over at `attach` (`take_over`), and telling the user through the agent (`say`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from agentscope.memory import InMemoryMemory, MemoryBase
from agentscope.message import Msg

from ..core._errors import ContextUsageError
from ..core.config._config import ContextConfig
from ..core.context._memory import ContextMemory

__all__ = ["say", "take_over"]

logger = logging.getLogger("agentscope_ctx")


def take_over(
    source: MemoryBase, backend: MemoryBase | None, working_dir: Path, config: ContextConfig
) -> ContextMemory:
    """The `ContextMemory` replacing `source`: holding its messages (with marks) and summary
    when it lives in this process, else backed by it (or by `backend`)."""
    language = config.compactor.language
    local = isinstance(source, (InMemoryMemory, ContextMemory))
    if backend is None and not local:
        backend = source
    if backend is not None:
        held = getattr(source, "content", None) if local else None
        if held:
            raise ContextUsageError(
                f"the agent already holds {len(held)} messages in its {type(source).__name__}; "
                "with a backend, the backend is where messages live: add them to it first"
            )
        return ContextMemory(working_dir, language=language, backend=backend)
    memory = ContextMemory(working_dir, language=language)
    content = source.content if isinstance(source, (InMemoryMemory, ContextMemory)) else []
    memory.adopt(list(content), getattr(source, "_compressed_summary", "") or "")
    memory.kept = source.kept if isinstance(source, ContextMemory) else None
    return memory


async def say(agent: Any, text: str) -> None:
    """Tell the user through `agent.print` (never fails the pipeline)."""
    printer = getattr(agent, "print", None)
    if printer is None:
        return
    try:
        await printer(Msg("agentscope_ctx", text, "assistant"), True)
    except Exception:  # printing is best effort
        logger.debug("agentscope_ctx: agent.print failed", exc_info=True)
