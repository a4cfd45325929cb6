"""`PlainMsg`: AgentScope 1.x's `Msg` without AgentScope, the core's message on 2.x.

On 2.x, where `Msg` is a pydantic model with typed blocks, the core works on this plain class
(the same fields and methods as 1.x's), and the 2.x adapter converts the agent's messages to
and from it (`agentscope_ctx.agentscope2._entries`). On 1.x the core's message is AgentScope's
own `Msg` (`_entry`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import shortuuid

__all__ = ["PlainMsg"]


class PlainMsg:
    """AgentScope 1.x's message (`agentscope/message/_message_base.py` of 1.0.21): the
    core's entry on 2.x. Blocks are plain dicts."""

    def __init__(
        self,
        name: str,
        content: str | Sequence[dict[str, Any]],
        role: str,
        metadata: dict[str, Any] | None = None,
        timestamp: str | None = None,
        invocation_id: str | None = None,
    ) -> None:
        if not isinstance(content, (list, str)):
            raise TypeError("The content must be a string or a list of content blocks.")
        if role not in ("user", "assistant", "system"):
            raise ValueError(f"role must be user, assistant or system, not {role!r}")
        self.name = name
        self.content: str | list[dict[str, Any]] = content
        self.role = role
        self.metadata: dict[str, Any] = metadata or {}
        self.id: str = shortuuid.uuid()
        self.timestamp = timestamp or datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        self.invocation_id = invocation_id

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "role": self.role,
            "content": self.content,
            "metadata": self.metadata,
            "timestamp": self.timestamp,
        }

    @classmethod
    def from_dict(cls, json_data: dict[str, Any]) -> PlainMsg:
        new = cls(
            name=json_data["name"],
            content=json_data["content"],
            role=json_data["role"],
            metadata=json_data.get("metadata"),
            timestamp=json_data.get("timestamp"),
            invocation_id=json_data.get("invocation_id"),
        )
        new.id = json_data.get("id", new.id)
        return new

    def has_content_blocks(self, block_type: str | list[str] | None = None) -> bool:
        return len(self.get_content_blocks(block_type)) > 0

    def get_text_content(self, separator: str = "\n") -> str | None:
        if isinstance(self.content, str):
            return self.content
        texts = [b["text"] for b in self.content if b.get("type") == "text"]
        return separator.join(texts) if texts else None

    def get_content_blocks(self, block_type: str | list[str] | None = None) -> list[dict[str, Any]]:
        if isinstance(self.content, str):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": self.content}]
        else:
            blocks = list(self.content or [])
        if isinstance(block_type, str):
            return [b for b in blocks if b["type"] == block_type]
        if isinstance(block_type, list):
            return [b for b in blocks if b["type"] in block_type]
        return blocks

    def __repr__(self) -> str:
        return (
            f"Msg(id={self.id!r}, name={self.name!r}, content={self.content!r}, "
            f"role={self.role!r}, metadata={self.metadata!r}, "
            f"timestamp={self.timestamp!r}, invocation_id={self.invocation_id!r})"
        )
