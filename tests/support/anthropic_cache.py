"""Anthropic's prompt cache, for the simulator (`tests/support/anthropic_sim.py`): rule 3.

Sources: the prompt-caching page (platform.claude.com/docs/en/build-with-claude/prompt-caching)
and the ``claude-api`` skill's ``shared/prompt-caching.md`` (``anthropics/skills``).

- The prefix is tools -> system -> messages, one block per tool, per system text block, per
  message content block (string content: one block). A block's place in the prefix is a hash of
  everything up to it and itself (without ``cache_control``); caches are per model.
- ``cache_control`` ``{"type": "ephemeral"}`` (``ttl`` ``5m``/``1h``) marks a breakpoint (a
  nested block's marker counts on its block); a top-level ``cache_control`` is automatic
  caching: the breakpoint on the last block that may carry one (not a thinking block), a no-op
  where an explicit marker of the same TTL already is, refused where its TTL differs. At most 4
  breakpoints; 1h ones before 5m ones.
- A read is the longest prefix with an entry found at a breakpoint or up to 20 blocks before it;
  the hit refreshes its entry. An entry is written at each breakpoint past the hit whose prefix
  has at least the model's minimum. ``cache_read_input_tokens`` is the hit,
  ``cache_creation_input_tokens`` the rest up to the last breakpoint written, split by TTL in
  ``cache_creation``; ``input_tokens`` what follows.
- ``thinking``, ``output_config.effort`` and ``tool_choice`` are folded into the hash where the
  messages begin: changing them loses the messages' entries only ("Invalidation hierarchy").
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from tests.support.anthropic_wire import (
    THINKING,
    Rejected,
    canon,
    content_of,
    thinking_mode,
    tokens,
)

__all__ = ["LOOKBACK", "TTL_SECONDS", "Block", "PromptCache", "blocks", "breakpoints"]

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
LOOKBACK = 20
"""How many blocks before a breakpoint a read looks back."""


@dataclass
class Block:
    """One block of the prompt's prefix, in order."""

    section: str
    """``tools``, ``system`` or ``messages``."""
    where: str
    key: str
    """What its place in the prefix hash covers: the block without ``cache_control`` (for a
    message's block, also its role and whether it opens the message)."""
    tokens: int
    """Its tokens (a signature is not counted)."""
    ttl: str | None
    """Its breakpoint's TTL, if it carries one."""
    markers: int
    """Its ``cache_control`` markers (each a breakpoint toward the limit of 4)."""
    cacheable: bool
    """Whether it may carry the automatic breakpoint."""


def _ttl(value: Any, where: str) -> str:
    """The TTL of a ``cache_control`` value, or a `Rejected`."""
    if not isinstance(value, dict) or value.get("type") != "ephemeral":
        raise Rejected(f"{where}.type: Input should be 'ephemeral'")
    ttl = value.get("ttl", "5m")
    if ttl not in TTL_SECONDS:
        raise Rejected(f"{where}.ttl: Input should be '5m' or '1h'")
    return str(ttl)


def _unmarked(block: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """`block` without its ``cache_control`` (its nested blocks' too), and the markers found."""
    found = [block["cache_control"]] if "cache_control" in block else []
    clean = {k: v for k, v in block.items() if k != "cache_control"}
    if isinstance(clean.get("content"), list):
        inner = []
        for sub in clean["content"]:
            if isinstance(sub, dict):
                sub, more = _unmarked(sub)
                found += more
            inner.append(sub)
        clean["content"] = inner
    return clean, found


def blocks(body: dict[str, Any]) -> list[Block]:
    """The prefix blocks of `body` (its messages as the model sees them)."""
    out: list[Block] = []

    def add(section: str, where: str, block: dict[str, Any], head: Any) -> None:
        clean, markers = _unmarked(block)
        ttls = [_ttl(marker, f"{where}.cache_control") for marker in markers]
        counted = {k: v for k, v in clean.items() if k != "signature"}
        if clean.get("type") == "compaction":  # the summary is what the model reads
            clean = counted = {"type": "compaction", "content": clean.get("content")}
        out.append(
            Block(
                section,
                where,
                canon([head, clean]),
                tokens(canon(counted)),
                ttls[-1] if ttls else None,
                len(ttls),
                cacheable=clean.get("type") not in THINKING,
            )
        )

    for n, tool in enumerate(body.get("tools") or []):
        add("tools", f"tools.{n}", tool, "tool")
    system = body.get("system")
    if isinstance(system, str) and system:
        add("system", "system", {"type": "text", "text": system}, "system")
    elif isinstance(system, list):
        for n, block in enumerate(system):
            add("system", f"system.{n}", block, "system")
    for i, message in enumerate(body["messages"]):
        for k, block in enumerate(content_of(message)):
            add("messages", f"messages.{i}.content.{k}", block, [message.get("role"), k == 0])
    return out


def breakpoints(body: dict[str, Any], prefix: list[Block]) -> list[tuple[int, str]]:
    """The breakpoints (position, TTL) of `body` over its blocks `prefix`, explicit and
    automatic, checked (at most 4, 1h before 5m)."""
    marks = [(n, b.ttl) for n, b in enumerate(prefix) if b.ttl is not None]
    found = sum(b.markers for b in prefix)
    auto = body.get("cache_control")
    if auto is not None:
        ttl = _ttl(auto, "cache_control")
        target = next((n for n in range(len(prefix) - 1, -1, -1) if prefix[n].cacheable), None)
        if target is not None:
            own = prefix[target].ttl
            if own is None:
                marks = sorted([*marks, (target, ttl)])
                found += 1
            elif own != ttl:
                raise Rejected(
                    "cache_control: the automatic breakpoint's ttl differs from the explicit "
                    f"`cache_control` on the last cacheable block ({ttl!r} != {own!r})"
                )
    if found > 4:
        raise Rejected(f"A maximum of 4 blocks with cache_control may be provided. Found {found}.")
    seen_5m = False
    for n, ttl in marks:
        if ttl == "1h" and seen_5m:
            raise Rejected(
                f"{prefix[n].where}.cache_control: a ttl='1h' cache_control block cannot come "
                "after a ttl='5m' cache_control block (longer TTLs must come first)"
            )
        seen_5m = seen_5m or ttl == "5m"
    return marks  # type: ignore[return-value]


@dataclass
class _Entry:
    tokens: int
    ttl: float
    expires: float


class PromptCache:
    """The cache entries of one simulator (all its models), by prefix hash."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def use(
        self,
        body: dict[str, Any],
        prefix: list[Block],
        marks: list[tuple[int, str]],
        minimum: int,
        now: float,
    ) -> dict[str, Any]:
        """Read the longest cached prefix, write the breakpoints' entries; the usage (its
        ``output_tokens`` 0).

        Args:
            body: the request (its model and the parameters folded into the messages' hash).
            prefix: its blocks.
            marks: its breakpoints.
            minimum: the shortest prefix written.
            now: the time, in seconds of the simulator's clock.
        """
        hashes, sizes = self._hashes(body, prefix)
        hit = -1
        for position, _ in marks:
            for j in range(position, max(position - LOOKBACK - 1, -1), -1):
                entry = self._entries.get(hashes[j])
                if entry is not None and entry.expires > now:
                    hit = max(hit, j)
                    break
        if hit >= 0:
            entry = self._entries[hashes[hit]]
            entry.expires = now + entry.ttl
        read = sizes[hit] if hit >= 0 else 0
        written = {"5m": 0, "1h": 0}
        done = read
        for position, ttl in marks:
            seconds = TTL_SECONDS[ttl]
            if sizes[position] < minimum:
                continue  # under the model's minimum: never cached, read through or not
            if position > hit:
                written[ttl] += sizes[position] - done
                done = sizes[position]
            else:  # inside what was read: kept at no charge, its longer TTL too
                old = self._entries.get(hashes[position])
                seconds = max(seconds, old.ttl) if old and old.expires > now else seconds
            self._entries[hashes[position]] = _Entry(sizes[position], seconds, now + seconds)
        created = written["5m"] + written["1h"]
        total = sizes[-1] if sizes else 0
        return {
            "input_tokens": total - read - created,
            "cache_creation_input_tokens": created,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
            "output_tokens": 0,
        }

    @staticmethod
    def _hashes(body: dict[str, Any], prefix: list[Block]) -> tuple[list[str], list[int]]:
        """Each block's place in the prefix (a chained hash) and the prefix's tokens there."""
        chain = hashlib.sha256(f"model {body['model']}".encode()).hexdigest()
        params = {
            "thinking": body.get("thinking") if thinking_mode(body) else None,
            "tool_choice": body.get("tool_choice"),
            "effort": (body.get("output_config") or {}).get("effort"),
        }
        hashes, sizes, total, salted = [], [], 0, False
        for block in prefix:
            if block.section == "messages" and not salted:
                chain = hashlib.sha256(f"{chain} {canon(params)}".encode()).hexdigest()
                salted = True
            chain = hashlib.sha256(f"{chain} {block.key}".encode()).hexdigest()
            total += block.tokens
            hashes.append(chain)
            sizes.append(total)
        return hashes, sizes
