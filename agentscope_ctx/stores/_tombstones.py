"""Tombstones: what is left of a record that retention deleted, so that a notice pointing at
it never reads as a plain "does not exist" (DESIGN.md §19, docs/data.md).

A tombstone says *that* a record was deleted, *why* and *when*; never what it held. One,
version 1::

    {"v": 1, "reason": "retention", "deleted_at": 1796572800.0, "bytes": 273114}

- a local saved output ``tool_result/NAME.txt``: the file ``tool_result/NAME.txt.deleted``
  (``0600``; its name keeps the owner tags of the output's, so that only a tenant who saw
  the output learns it was deleted);
- a local day of the dialog ``dialog/YYYY-MM-DD.jsonl``: ``dialog/YYYY-MM-DD.jsonl.deleted``,
  with ``owners``, the owner tags (`core._tenant.owner_tag`, agent and session) of the records
  the day held: only those tenants are told;
- the fleet store: a row of the ``tombstones`` table (`postgres._tombstones`), per ref and
  owner, under the same row-level security as the rows it replaces.

`read_file`, the CLI's ``read`` and the viewer answer a ref with a tombstone with `gone_text`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..core._private import FILE_MODE
from ..core._tenant import Tenant

__all__ = ["SUFFIX", "TOMBSTONE_VERSION", "Tombstone", "gone_text", "read_local", "write_local"]

TOMBSTONE_VERSION = 1
SUFFIX = ".deleted"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class Tombstone:
    """A deleted record: why (``retention``) and when (epoch seconds)."""

    reason: str
    deleted_at: float
    size: int | None = None
    owners: tuple[tuple[str, str], ...] | None = None
    """The owner tags told (`None`: the owner its name or row carries)."""

    def told(self, tenant: Tenant | None) -> bool:
        """Whether `tenant` may learn of it (`None`: the operator, yes)."""
        if tenant is None or tenant.scope == "shared" or self.owners is None:
            return True
        return any(tenant.sees_tags(agent, session) for agent, session in self.owners)


def gone_text(ref: str, tombstone: Tombstone) -> str:
    """What a read of a deleted ref answers."""
    when = datetime.fromtimestamp(tombstone.deleted_at, timezone.utc)
    return (
        f"{ref!r} was deleted by {tombstone.reason} on {when:%Y-%m-%d %H:%M} UTC "
        "(it was kept for the configured retention period and is no longer stored)"
    )


def write_local(
    path: Path,
    *,
    reason: str,
    at: float,
    size: int | None = None,
    owners: Iterable[tuple[str, str]] | None = None,
) -> None:
    """Leave the tombstone of the deleted file `path` beside it (best effort: raises
    `OSError`)."""
    record: dict[str, object] = {
        "v": TOMBSTONE_VERSION,
        "reason": reason,
        "deleted_at": at,
        "bytes": size,
    }
    if owners is not None:
        record["owners"] = sorted({(pair[0], pair[1]) for pair in owners})
    data = json.dumps(record).encode("utf-8")
    stone = path.with_name(path.name + SUFFIX)
    fd = os.open(stone, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, FILE_MODE)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_local(path: Path) -> Tombstone | None:
    """The tombstone of the file `path` (`None`: none, or unreadable)."""
    stone = path.with_name(path.name + SUFFIX)
    try:
        fd = os.open(stone, os.O_RDONLY | _NOFOLLOW)
    except (OSError, ValueError):
        return None
    try:
        raw = os.read(fd, 1 << 20)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        record = json.loads(raw)
        owners = record.get("owners")
        return Tombstone(
            reason=str(record["reason"]),
            deleted_at=float(record["deleted_at"]),
            size=record.get("bytes"),
            owners=None if owners is None else tuple((str(a), str(s)) for a, s in owners),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
