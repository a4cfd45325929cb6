"""A pytest plugin: every AgentScope 2.x `Agent` built during the run gets a `ContextManager`.

Load it into a run of AgentScope's own tests (`-p tests.agentscope_suite.plugin`, with this
repository on `PYTHONPATH`): `Agent.__init__` is wrapped so that, once AgentScope has built
the agent, a `ContextManager` with the default `ContextConfig` and a fresh temporary
`working_dir` (no model: extractive summaries) is attached to it, exactly as a user's
`manager.attach(agent)` does. Agents that already carry one of this package's middlewares
(our own Compactor/Summarizer runners, an agent built with `manager.middleware()`) are left
as they are.

`run.py` runs the selected AgentScope tests with and without this plugin and prints the
comparison; nothing of AgentScope is copied here.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

ATTACHED: list[Any] = []
"""The managers attached during the run (for the summary line)."""

_BASE: Path | None = None
_ORIGINAL: Any = None
"""`Agent.__init__` as AgentScope defines it (restored at the end of the run)."""


def _working_dir() -> Path:
    assert _BASE is not None
    return Path(tempfile.mkdtemp(prefix="ctx-", dir=_BASE))


def _ours(agent: Any) -> bool:
    """Whether `agent` already has a middleware of this package."""
    chains = ("_reply_middlewares", "_reasoning_middlewares", "_model_call_middlewares")
    return any(
        type(m).__module__.startswith("agentscope_ctx")
        for name in chains
        for m in getattr(agent, name, [])
    )


def pytest_configure(config: pytest.Config) -> None:
    global _BASE, _ORIGINAL
    from agentscope.agent import Agent

    from agentscope_ctx import ContextConfig, ContextManager

    original = Agent.__init__
    if getattr(original, "__agentscope_ctx__", False):
        return
    _BASE = Path(tempfile.mkdtemp(prefix="agentscope-suite-"))
    _ORIGINAL = original

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if _ours(self):
            return
        manager = ContextManager(ContextConfig(working_dir=str(_working_dir())))
        manager.attach(self)
        ATTACHED.append(manager)

    __init__.__agentscope_ctx__ = True  # type: ignore[attr-defined]
    Agent.__init__ = __init__  # type: ignore[method-assign]


def pytest_report_header(config: pytest.Config) -> str:
    import agentscope

    return f"agentscope_ctx: a ContextManager on every Agent (AgentScope {agentscope.__version__})"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(f"agentscope_ctx: {len(ATTACHED)} agents had a ContextManager")


def pytest_unconfigure(config: pytest.Config) -> None:
    global _BASE, _ORIGINAL
    if _ORIGINAL is not None:
        from agentscope.agent import Agent

        Agent.__init__ = _ORIGINAL  # type: ignore[method-assign]
        _ORIGINAL = None
    if _BASE is not None:
        shutil.rmtree(_BASE, ignore_errors=True)
        _BASE = None
