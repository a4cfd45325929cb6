"""Which AgentScope line is installed: 1.x (`ReActAgent`, hooks, `MemoryBase`, `Msg` with
TypedDict blocks) or 2.x (`Agent`, middlewares, `AgentState`, pydantic `Msg` and blocks).

Both lines export ``agentscope.__version__``; nothing else names the line as cheaply (the
module layouts differ: 1.x has ``agentscope.memory`` and ``agentscope.token``, 2.x has
``agentscope.middleware`` and ``agentscope.state``). A 0.x or 3.x AgentScope counts as 2.x:
the code for the newest line is the better guess, and it fails loudly where it does not fit.
"""

from __future__ import annotations

import agentscope

__all__ = ["AGENTSCOPE_VERSION", "IS_1X"]

AGENTSCOPE_VERSION: str = str(agentscope.__version__)
"""The installed AgentScope version, e.g. ``"1.0.21"`` or ``"2.0.11"``."""

IS_1X: bool = AGENTSCOPE_VERSION.split(".", 1)[0] == "1"
"""Whether the installed AgentScope is a 1.x release. Type checkers see both branches of an
``if IS_1X:`` unless told otherwise (mypy: ``--always-false IS_1X`` for the 2.x run)."""
