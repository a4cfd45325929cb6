"""`agentscope_ctx` imports on AgentScope 2.x: the names of both lines are there, except the
1.x-only ones, which say what they need; `ContextManager` is the 2.x adapter."""

from __future__ import annotations

import pytest

import agentscope_ctx
from agentscope_ctx.agentscope2 import ContextManager as V2Manager


def test_i14_2_package_imports_on_2x_and_names_what_needs_1x() -> None:
    names = set(agentscope_ctx.__all__)
    assert {"ContextConfig", "ContextManager", "ContextMiddleware", "TokenCounter"} <= names
    assert {"DialogStore", "Compactor", "build_agent", "build_model", "ShellTool"} <= names
    assert not names & {"ContextMemory", "AtomicJSONSession"}
    for name in names:
        assert hasattr(agentscope_ctx, name), name
    assert agentscope_ctx.ContextManager is V2Manager
    with pytest.raises(ImportError, match=r"ContextMemory needs AgentScope 1\.x; AgentScope 2\."):
        from agentscope_ctx import ContextMemory  # noqa: F401
    with pytest.raises(AttributeError):
        _ = agentscope_ctx.NoSuchName  # type: ignore[attr-defined]
