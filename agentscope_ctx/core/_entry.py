"""The message form the core works on: AgentScope 1.x's `Msg`, on both lines.

The core (cuts, ladder, accountant, compaction, dialog store, token counter, summaries) reads
messages as 1.x `Msg`s: `id`, `name`, `role`, `content` (a string or a list of dict blocks:
`text`, `thinking`, `tool_use`, `tool_result`, `image`, `audio`, `video`), `metadata`,
`timestamp`, `to_dict()`/`from_dict()`, `get_content_blocks()`. On 1.x that is AgentScope's
own `Msg`, lent by the 1.x adapter (`_host`: the core imports no AgentScope); on 2.x, where
`Msg` is a pydantic model with typed blocks, it is `_plain_msg.PlainMsg` (the same fields and
methods), and the 2.x adapter converts the agent's messages to and from it
(`agentscope_ctx.agentscope2._entries`). So one core serves both lines, unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._host import host
from ._plain_msg import PlainMsg

__all__ = ["Msg"]

if TYPE_CHECKING:  # each line's type check sees its own (mypy --always-true/false IS_1X)
    from .._line import IS_1X

    if IS_1X:
        from agentscope.message import Msg
    else:
        Msg = PlainMsg
else:
    Msg = host().message_class or PlainMsg
