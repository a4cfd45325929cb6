"""What AgentScope 1.x lends the core (`agentscope_ctx.core._host`): its `Msg` as the core's
message, its `TokenCounterBase` and `MemoryBase` as the bases of `TokenCounter` and
`ContextMemory`, tools answering a `ToolResponse`, and helper agents run as `ReActAgent`s
(`_runner`). Chosen by the edge (`agentscope_ctx/__init__.py`)."""

from __future__ import annotations

from typing import cast

from agentscope.memory import MemoryBase
from agentscope.message import Msg
from agentscope.token import TokenCounterBase

from ..core._host import Host, Runner
from . import _runner

__all__ = ["HOST"]

HOST = Host(
    runner=lambda: cast(Runner, _runner),
    message_class=Msg,
    token_counter_base=TokenCounterBase,
    memory_base=MemoryBase,
    needs_formatter=True,
    tool_text=_runner.tool_text,
)
