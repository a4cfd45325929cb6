"""``usage/{agent}.json`` in the working dir: the latest prompt size and prompt-cache reuse of
each attached agent, written at the end of each reply, for `agentscope-ctx inspect`.

The record (one file per agent name, replaced atomically, private to its owner)::

    {"v": 1, "agent": "worker", "updated": "2026-12-03T08:20:00+00:00",
     "prompt_tokens": 9120, "max_input_tokens": 16000,
     "provider_prompt_tokens": 9301, "provider_cached_tokens": 8704, "cache_reuse": 0.81,
     "counter": "tiktoken:o200k_base"}

``prompt_tokens`` is the context manager's estimate of the agent's context after the reply
(its messages before formatting, the reply's answer included), counted by ``counter``;
``provider_prompt_tokens`` is the provider's count of the last prompt sent. ``provider_*``
and ``cache_reuse`` are ``null`` where the provider did not report them; ``counter`` is
missing in records written before it was added.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core._private import private_dir, write_atomic

__all__ = ["read_usage", "write_usage"]

logger = logging.getLogger("agentscope_ctx")

USAGE_VERSION = 1
_UNSAFE = re.compile(r"[^\w.-]+")


def _path(working_dir: Path, agent: str) -> Path:
    name = _UNSAFE.sub("_", agent).strip("._") or "agent"
    return working_dir / "usage" / f"{name[:100]}.json"


def write_usage(working_dir: Path, agent: str, fields: dict[str, Any]) -> None:
    """Replace the agent's record (best effort: a failure is logged, never raised)."""
    path = _path(working_dir, agent)
    record = {
        "v": USAGE_VERSION,
        "agent": agent,
        "updated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **fields,
    }
    try:
        private_dir(path.parent)
        write_atomic(path, json.dumps(record, ensure_ascii=False))
    except OSError as exc:
        logger.debug("agentscope_ctx: cannot write %s: %s", path, exc)


def read_usage(working_dir: Path) -> list[dict[str, Any]]:
    """The records in the working dir, by agent name; unreadable ones are skipped."""
    folder = working_dir / "usage"
    records: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("v") == USAGE_VERSION:
            records.append(record)
    return records
