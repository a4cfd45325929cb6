"""One 2.x agent's part of the `ContextManager` (`Binding`: its memory, mirror, pipeline,
tools and flags, holding the agent weakly) and its budget (`budgeted`: `max_input_tokens`
lowered to what the agent's model's window leaves for the prompt)."""

from __future__ import annotations

import asyncio
import logging
import math
import weakref
from dataclasses import dataclass, field

from agentscope.agent import Agent
from agentscope.tool import ToolBase

from ..core._errors import ContextUsageError
from ..core._pipeline import ContextPipeline, PromptParts
from ..core.config._config import ContextConfig
from ..core.context._memory import ContextMemory
from ..core.tokens._calibration import WINDOW_MARGIN
from ..recall._recall import Recall
from ..stores.seams import OutputSeam
from ._images import ImageCounts
from ._mirror import StateMirror

__all__ = ["Binding", "budgeted"]

logger = logging.getLogger("agentscope_ctx")


@dataclass
class Binding:
    """One agent's part: its memory, mirror, pipeline and flags. It holds the agent weakly:
    the app makes an agent per chat run, and a binding ends with its agent (`bind`)."""

    agent_ref: weakref.ref[Agent]
    memory: ContextMemory
    mirror: StateMirror
    pipeline: ContextPipeline = field(init=False)
    recall: Recall | None = field(init=False)
    store: OutputSeam = field(init=False)
    tools: list[ToolBase] = field(default_factory=list)
    parts: PromptParts = field(default_factory=PromptParts)
    replying: bool = False
    cutting: bool = False
    note_loaded: bool = False
    notices: list[str] = field(default_factory=list)
    image_counts: ImageCounts = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def agent(self) -> Agent:
        agent = self.agent_ref()
        if agent is None:
            raise ContextUsageError("the agent of this binding is gone")
        return agent

    def notify(self, text: str) -> None:
        """Queue a notice for the user (yielded as an event before the next reasoning); the
        pipeline has logged it already."""
        self.notices.append(text)

    def take_notices(self) -> list[str]:
        notices, self.notices = self.notices, []
        return notices


def budgeted(config: ContextConfig, agent: Agent) -> ContextConfig:
    """`config` for `agent`: `max_input_tokens` lowered to what its model's window
    leaves for the prompt, when that is smaller. A 2.x model states its window (prompt
    and answer together) as `context_size`; the answer's share is the `max_tokens` its
    parameters state (up to half the window), else 5% of the window, as for a window a
    provider states in an error (`WINDOW_MARGIN`)."""
    window = getattr(agent.model, "context_size", None)
    if not isinstance(window, int) or window <= 0:
        return config
    stated = getattr(getattr(agent.model, "parameters", None), "max_tokens", None)
    if isinstance(stated, int) and 0 < stated <= window // 2:
        reserved = stated
    else:
        reserved = math.ceil(window * WINDOW_MARGIN)
    budget = window - reserved
    if budget >= config.max_input_tokens:
        return config
    logger.info(
        "agentscope_ctx: agent %r: budget %d tokens (its model's context_size %d, less "
        "%d for the answer; max_input_tokens is %d)",
        agent.name,
        budget,
        window,
        reserved,
        config.max_input_tokens,
    )
    return config.model_copy(update={"max_input_tokens": budget})
