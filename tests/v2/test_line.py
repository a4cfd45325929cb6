"""`agentscope_ctx` imports on AgentScope 2.x: the line-neutral names are there, the 1.x-only
ones say what they need."""

from __future__ import annotations

import pytest

import agentscope_ctx


def test_i14_2_package_imports_on_2x_and_names_what_needs_1x() -> None:
    names = set(agentscope_ctx.__all__)
    assert {"ContextConfig", "ContextUsageError", "TRUNCATION_NOTICE_MARKER"} <= names
    assert not names & {"ContextManager", "ContextMemory", "TokenCounter", "DialogStore"}
    for name in names:
        assert hasattr(agentscope_ctx, name), name
    with pytest.raises(ImportError, match=r"ContextManager needs AgentScope 1\.x; AgentScope 2\."):
        from agentscope_ctx import ContextManager  # noqa: F401
    with pytest.raises(AttributeError):
        _ = agentscope_ctx.NoSuchName  # type: ignore[attr-defined]
