"""What `read_file` shows one tenant of a working dir (DESIGN.md §15, docs/tenants.md).

- A saved output (``tool_result/<agent tag>-<session tag>-<uuid>.txt``) or a 2.x media file
  (``media/<agent tag>-<session tag>/...``) of another tenant, or one without an owner in its
  name (written before owners were kept), does not exist for it: `hidden` says so, and the
  reader answers exactly as for a missing file.
- A day of the dialog (``dialog/YYYY-MM-DD.jsonl``) is shown through `DialogDayView`: the
  tenant's own records, the others' lines left empty.

The tenant of a call is the reader's own (`FileReader.scoped`), else the one the caller set
for the current task (`CALLER`: the 2.x middleware sets it around each tool call of an agent).
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from ..core._tenant import Tenant
from ..stores._tool_results import name_tags

__all__ = ["CALLER", "ReadScope"]

CALLER: ContextVar[Tenant | None] = ContextVar("agentscope_ctx_read_tenant", default=None)
"""The tenant a `read_file` call is made for, when its reader has none of its own."""
_DAY_FILE = re.compile(r"\d{4}-\d{2}-\d{2}\.jsonl")
_TAG_DIR = re.compile(r"([0-9a-f]{16})-([0-9a-f]{16})")


@dataclass(frozen=True)
class ReadScope:
    """Where the working dir keeps tenants' records (`None`: that kind is not kept there)."""

    store_dir: Path | None = None
    """``tool_result/``."""
    dialog_dir: Path | None = None
    """``dialog/``."""
    media_dir: Path | None = None
    """``media/`` (2.x)."""

    def hidden(self, real: Path, tenant: Tenant) -> bool:
        """Whether `real` (a resolved path) is a record `tenant` may not see."""
        if tenant.scope == "shared":
            return False
        if self.store_dir is not None and real.parent == self.store_dir:
            tags = name_tags(real.name)
            return tags is None or not tenant.sees_tags(*tags)
        if self.media_dir is not None and real.is_relative_to(self.media_dir):
            parts = real.relative_to(self.media_dir).parts
            match = _TAG_DIR.fullmatch(parts[0]) if len(parts) > 1 else None
            return match is None or not tenant.sees_tags(match.group(1), match.group(2))
        return False

    def is_day(self, real: Path) -> bool:
        """Whether `real` is a day file of the dialog."""
        return (
            self.dialog_dir is not None
            and real.parent == self.dialog_dir
            and _DAY_FILE.fullmatch(real.name) is not None
        )
