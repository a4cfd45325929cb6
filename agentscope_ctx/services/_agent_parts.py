"""`AgentParts`: what an agent config gives the installed line's `build_agent` (read and
checked by the edge, `agentscope_ctx._agent_config.load_agent_spec`), line-neutral."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentscope.formatter import FormatterBase
    from agentscope.model import ChatModelBase

__all__ = ["AgentParts"]


@dataclass(frozen=True)
class AgentParts:
    """The parts of the agent a config describes, as the line's builder gets them
    (`agentscope1._agent.build_agent_1x`, `agentscope2._agent.build_agent_v2`).

    Attributes:
        name: The agent's name.
        sys_prompt: Its system prompt.
        max_iters: Most reasoning-acting steps in one reply.
        tools: The built-in tool functions the config asks for.
        model: The agent's model.
        compactor_model: The Compactor's and the Summarizer's model.
        formatter: The formatter of `model` (1.x; a 2.x model owns its own: `None`).
        compactor_formatter: The formatter of `compactor_model` (likewise).
    """

    name: str
    sys_prompt: str
    max_iters: int
    tools: Sequence[Callable[..., Any]]
    model: ChatModelBase
    compactor_model: ChatModelBase
    formatter: FormatterBase | None = None
    compactor_formatter: FormatterBase | None = None
