"""`build_agent`: an agent with the context manager attached, from one YAML file.

The file (see ``configs/agent.yaml``) has four sections::

    agent:            # name, sys_prompt, max_iters, tools (from TOOLS), tool_root
    model:            # the agent's model (see `agentscope_ctx._providers`)
    compactor_model:  # optional: the Compactor's / Summarizer's model (default: model)
    context:          # `ContextConfig` fields

`read_file` (and the memory tools) are always added by agentscope_ctx. The file is read the
same way on both AgentScope lines (`load_agent_spec`); the agent built is a `ReActAgent` on
1.x, a 2.x `Agent` on 2.x (`agentscope_ctx.agentscope2._agent`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import Field

from ._line import IS_1X
from ._providers import Models, load_models
from .core._errors import ConfigError, _short_repr
from .core.config._config import AGENT_SECTIONS, ContextConfig
from .core.config._config_base import PlainName, _Section, section_of
from .core.config._config_file import read_config_mapping
from .services._agent_parts import AgentParts
from .tools import ShellTool, fetch_url

if TYPE_CHECKING:
    from agentscope.agent import ReActAgent

    from .agentscope1._manager import ContextManager

__all__ = ["TOOLS", "AgentSection", "AgentSpec", "build_agent", "load_agent_spec"]


def _shell(root: Path) -> Callable[..., Any]:
    return ShellTool(root).run_shell


def _fetch(root: Path) -> Callable[..., Any]:
    return fetch_url


TOOLS: dict[str, Callable[[Path], Callable[..., Any] | None]] = {
    "shell": _shell,
    "fetch_url": _fetch,
    "read_file": lambda root: None,  # always added by the manager
}
"""Built-in tools by name: each makes the tool function for a `tool_root`."""


class AgentSection(_Section):
    """The ``agent:`` section."""

    name: PlainName = Field(default="assistant", min_length=1)
    """The agent's name (no NUL or lone surrogate)."""

    sys_prompt: str = "You are a helpful assistant."
    """The system prompt."""

    max_iters: int = Field(default=30, ge=1)
    """Most reasoning-acting steps in one reply."""

    tools: list[str] = Field(default_factory=lambda: ["shell"])
    """Built-in tools: shell (read-only commands in tool_root), fetch_url, read_file."""

    tool_root: Path = Path(".")
    """Working directory of the shell tool (`~` expanded)."""


def _agent_section(data: object) -> AgentSection:
    section = section_of(AgentSection, data, "agent")
    unknown = [tool for tool in section.tools if tool not in TOOLS]
    if unknown:
        raise ConfigError(
            f"invalid config field 'agent.tools': unknown tool {_short_repr(unknown[0])}; "
            f"expected one of {', '.join(sorted(TOOLS))}",
            field="agent.tools",
        )
    return section


@dataclass(frozen=True)
class AgentSpec:
    """What an agent config file describes, read and checked: the same on both lines."""

    section: AgentSection
    config: ContextConfig
    models: Models

    def tool_functions(self) -> list[Callable[..., Any]]:
        """The built-in tools the ``agent:`` section asks for (`read_file` is added by
        agentscope_ctx), once each, in order."""
        root = self.section.tool_root.expanduser()
        tools = (TOOLS[name](root) for name in dict.fromkeys(self.section.tools))
        return [tool for tool in tools if tool is not None]


def load_agent_spec(source: str | Path | Mapping[str, Any]) -> AgentSpec:
    """Read and check an agent config (a YAML file path, or the same content as a mapping).

    Raises:
        ConfigError: a section or field is invalid, the model section is missing, an API
            key is not set (names the variable) or a provider SDK is missing.
    """
    data = read_config_mapping(source) if isinstance(source, (str, Path)) else dict(source)
    unknown = [key for key in data if key not in AGENT_SECTIONS]
    if unknown:
        raise ConfigError(
            f"unknown config section {_short_repr(unknown[0])}; expected "
            f"{', '.join(AGENT_SECTIONS)}",
            field=str(unknown[0]),
        )
    section = _agent_section(data.get("agent"))
    config = section_of(ContextConfig, data.get("context"), "context")
    models = load_models(data)
    if models is None:
        raise ConfigError(
            "the config needs a 'model' section (provider, model_name)", field="model"
        )
    return AgentSpec(section, config, models)


def build_agent(source: str | Path | Mapping[str, Any]) -> tuple[ReActAgent, ContextManager]:
    """Build the agent a config describes and attach a `ContextManager` to it.

    On AgentScope 2.x the agent is a 2.x `Agent` (its tools allowed without asking: the
    config's ``tools:`` list is the grant) and the second item is what keeps its context
    (its `ContextManager`); the types named here are 1.x's.

    Args:
        source: a YAML file path, or the same content as a mapping.

    Returns:
        The agent and its manager (call `await manager.close()` when done).

    Raises:
        ConfigError: a section or field is invalid, the model section is missing, an API
            key is not set (names the variable) or a provider SDK is missing.
    """
    spec = load_agent_spec(source)
    section, models = spec.section, spec.models
    parts = AgentParts(
        name=section.name,
        sys_prompt=section.sys_prompt,
        max_iters=section.max_iters,
        tools=spec.tool_functions(),
        model=models.model,
        compactor_model=models.compactor_model,
        formatter=models.formatter,
        compactor_formatter=models.compactor_formatter,
    )
    if not IS_1X:
        # imported by name: the 1.x type check does not follow it (it checks 2.x code)
        v2 = importlib.import_module("agentscope_ctx.agentscope2._agent")
        return cast("tuple[ReActAgent, ContextManager]", v2.build_agent_v2(spec.config, parts))
    from .agentscope1._agent import build_agent_1x

    return build_agent_1x(spec.config, parts)
