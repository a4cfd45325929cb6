"""The public API: one sorted `__all__`, every name importable, nothing private leaked."""

from __future__ import annotations

import agentscope_ctx


def test_all_is_sorted_and_importable() -> None:
    names = agentscope_ctx.__all__
    # isort style, as ruff keeps it: CONSTANTS, then Classes, then the rest
    assert names == sorted(
        names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n)
    )
    for name in names:
        assert hasattr(agentscope_ctx, name), name


def test_public_names_are_exactly_all() -> None:
    public = {n for n in vars(agentscope_ctx) if not n.startswith("_")}
    public -= {"annotations", "cli", "demo"}  # submodules imported by name
    assert public == set(agentscope_ctx.__all__) - {"__version__"}


def test_design_contract_names() -> None:
    from agentscope_ctx import (  # noqa: F401
        TRUNCATION_NOTICE_MARKER,
        ContextConfig,
        ContextManager,
        ContextMemory,
    )

    assert TRUNCATION_NOTICE_MARKER == "<<<TRUNCATED>>>"
