"""`build_agent`: a `ReActAgent` with the context manager attached, from one YAML file.

The file (see ``configs/agent.yaml``) has four sections::

    agent:            # name, sys_prompt, max_iters, tools (from TOOLS), tool_root
    model:            # the agent's model (see `agentscope_ctx._providers`)
    compactor_model:  # optional: the Compactor's / Summarizer's model (default: model)
    context:          # `ContextConfig` fields

`read_file` (and the memory tools) are always added by the manager.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentscope.agent import ReActAgent
from agentscope.tool import Toolkit
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._config import ContextConfig, _config_error
from ._errors import ConfigError
from ._manager import ContextManager
from ._providers import load_models, read_mapping
from .tools import ShellTool, fetch_url

__all__ = ["TOOLS", "AgentSection", "build_agent"]


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

_SECTIONS = ("agent", "model", "compactor_model", "context")


class AgentSection(BaseModel):
    """The ``agent:`` section."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(default="assistant", min_length=1)
    """The agent's name."""

    sys_prompt: str = "You are a helpful assistant."
    """The system prompt."""

    max_iters: int = Field(default=30, ge=1)
    """Most reasoning-acting steps in one reply."""

    tools: list[str] = Field(default_factory=lambda: ["shell"])
    """Built-in tools: shell (read-only commands in tool_root), fetch_url, read_file."""

    tool_root: Path = Path(".")
    """Working directory of the shell tool (`~` expanded)."""


def _agent_section(data: object) -> AgentSection:
    if data is None:
        return AgentSection()
    if not isinstance(data, Mapping):
        raise ConfigError(f"'agent' must be a mapping; got {type(data).__name__}", field="agent")
    try:
        section = AgentSection(**data)
    except ValidationError as exc:
        error = _config_error(exc)
        field = f"agent.{error.field}"
        raise ConfigError(str(error).replace(repr(error.field), repr(field)), field=field) from None
    unknown = [tool for tool in section.tools if tool not in TOOLS]
    if unknown:
        raise ConfigError(
            f"invalid config field 'agent.tools': unknown tool {unknown[0]!r}; expected one "
            f"of {', '.join(sorted(TOOLS))}",
            field="agent.tools",
        )
    return section


def build_agent(source: str | Path | Mapping[str, Any]) -> tuple[ReActAgent, ContextManager]:
    """Build the agent a config describes and attach a `ContextManager` to it.

    Args:
        source: a YAML file path, or the same content as a mapping.

    Returns:
        The agent and its manager (call `await manager.close()` when done).

    Raises:
        ConfigError: a section or field is invalid, the model section is missing, an API
            key is not set (names the variable) or a provider SDK is missing.
    """
    data = read_mapping(source) if isinstance(source, (str, Path)) else dict(source)
    unknown = [key for key in data if key not in _SECTIONS]
    if unknown:
        raise ConfigError(
            f"unknown config section {unknown[0]!r}; expected {', '.join(_SECTIONS)}",
            field=str(unknown[0]),
        )
    section = _agent_section(data.get("agent"))
    context = data.get("context") or {}
    if not isinstance(context, Mapping):
        raise ConfigError("'context' must be a mapping of ContextConfig fields", field="context")
    try:
        config = ContextConfig(**context)
    except ConfigError as exc:
        field = f"context.{exc.field}" if exc.field else "context"
        message = str(exc).replace(repr(exc.field), repr(field)) if exc.field else str(exc)
        raise ConfigError(message, field=field) from None
    models = load_models(data)
    if models is None:
        raise ConfigError(
            "the config needs a 'model' section (provider, model_name)", field="model"
        )
    toolkit = Toolkit()
    root = section.tool_root.expanduser()
    for name in dict.fromkeys(section.tools):
        tool = TOOLS[name](root)
        if tool is not None:
            toolkit.register_tool_function(tool)
    agent = ReActAgent(
        name=section.name,
        sys_prompt=section.sys_prompt,
        model=models.model,
        formatter=models.formatter,
        toolkit=toolkit,
        max_iters=section.max_iters,
    )
    manager = ContextManager(
        config, model=models.compactor_model, formatter=models.compactor_formatter
    )
    manager.attach(agent)
    return agent, manager
