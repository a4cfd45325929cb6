"""The AgentScope line the suite runs on, and what a test bound to one line says when skipped.

The suite runs on both lines (`.ci/run`: a 1.x venv and a 2.x venv). A module whose subject is
the 1.x adapter (a `ReActAgent` driven through its hooks, `ContextMemory` as a 1.x `MemoryBase`,
the 1.x Toolkit middleware, `AtomicJSONSession`, the 1.x providers and demos) skips before its
1.x imports (so that the report names the module):

    if not IS_1X:
        pytest.skip(reason_1x("drives a ReActAgent ..."), allow_module_level=True)

The 2.x adapter is tested in `tests/agentscope2`. Modules whose subject is the line-neutral core run on
both; a test of theirs that needs 1.x is marked `@requires_1x(...)`.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentscope_ctx._line import AGENTSCOPE_VERSION, IS_1X
from agentscope_ctx.core._entry import Msg

__all__ = [
    "IS_1X",
    "ImageBlock",
    "Msg",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "reason_1x",
    "requires_1x",
    "text_of",
]

# The core's message form on this line (`agentscope_ctx.core._entry`): `Msg` with dict blocks. On
# 1.x the blocks are AgentScope's TypedDicts (calling one makes a dict); 2.x's blocks are
# pydantic models, so there the core's blocks are made as plain dicts.
if IS_1X:
    from agentscope.message import (
        ImageBlock,
        TextBlock,
        ThinkingBlock,
        ToolResultBlock,
        ToolUseBlock,
    )
else:
    ImageBlock = TextBlock = ThinkingBlock = ToolResultBlock = ToolUseBlock = dict


def reason_1x(subject: str) -> str:
    """Why a test of the 1.x adapter is skipped here; `subject` names what of the 1.x adapter
    it drives."""
    return (
        f"AgentScope 1.x only: {subject}; AgentScope {AGENTSCOPE_VERSION} is installed "
        "(the 2.x adapter is tested in tests/agentscope2)"
    )


def requires_1x(subject: str) -> pytest.MarkDecorator:
    """The mark for one test of a line-neutral module that drives the 1.x adapter."""
    return pytest.mark.skipif(not IS_1X, reason=reason_1x(subject))


def text_of(response: Any) -> str:
    """The text of a `ToolResponse` on either line: 1.x blocks are dicts, 2.x blocks pydantic
    models (`agentscope.message.TextBlock` on both)."""
    parts = []
    for block in response.content:
        parts.append(block["text"] if isinstance(block, dict) else block.text)
    return "".join(parts)
