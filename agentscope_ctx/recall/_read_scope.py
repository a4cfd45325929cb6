"""What `read_file` shows one tenant of a working dir (DESIGN.md §15, docs/tenants.md).

- A saved output (``tool_result/<agent tag>-<session tag>-<uuid>.txt``) or a 2.x media file
  (``media/<agent tag>-<session tag>/...``) of another tenant, or one without an owner in its
  name (written before owners were kept), does not exist for it: `hidden` says so, and the
  reader answers exactly as for a missing file.
- A day of the dialog (``dialog/YYYY-MM-DD.jsonl``) is shown through `DialogDayView`: the
  tenant's own records, the others' lines left empty.
- The package's own bookkeeping in the working dir (`BOOKKEEPING`: ``usage/``, the steps
  record and the usage records, which keep summaries and name every tenant; ``index/``;
  ``audit.jsonl``; a ``dialog/`` or ``tool_result/`` file that is not a record: a lock, a
  tombstone, a file being written) is no tenant's record: every tenant, ``shared`` too, reads
  it as a missing file (`bookkeeping`). A reader with no tenant (the operator's) reads it.

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

__all__ = ["BOOKKEEPING", "CALLER", "ReadScope"]

CALLER: ContextVar[Tenant | None] = ContextVar("agentscope_ctx_read_tenant", default=None)
"""The tenant a `read_file` call is made for, when its reader has none of its own."""
_DAY_FILE = re.compile(r"\d{4}-\d{2}-\d{2}\.jsonl")
_TAG_DIR = re.compile(r"([0-9a-f]{16})-([0-9a-f]{16})")
BOOKKEEPING = ("usage", "index", "audit.jsonl")
"""What the package keeps for itself at the top of a working dir (folders and files)."""


@dataclass(frozen=True)
class ReadScope:
    """Where the working dir keeps tenants' records (`None`: that kind is not kept there)."""

    store_dir: Path | None = None
    """``tool_result/``."""
    dialog_dir: Path | None = None
    """``dialog/``."""
    media_dir: Path | None = None
    """``media/`` (2.x)."""
    working_dir: Path | None = None
    """The working dir, whose `BOOKKEEPING` no tenant reads."""

    def bookkeeping(self, real: Path) -> bool:
        """Whether `real` (a resolved path) is the package's own bookkeeping (see the module
        docstring)."""
        if self.working_dir is not None and real.is_relative_to(self.working_dir):
            parts = real.relative_to(self.working_dir).parts
            if parts and parts[0] in BOOKKEEPING:
                return True
        if self.dialog_dir is not None and real.parent == self.dialog_dir:
            return _DAY_FILE.fullmatch(real.name) is None
        if self.store_dir is not None and real.parent == self.store_dir:
            return not real.name.endswith(".txt") or real.name.startswith(".")
        return False

    def hidden(self, real: Path, tenant: Tenant) -> bool:
        """Whether `real` (a resolved path) is a record `tenant` may not see, or no record
        (`bookkeeping`)."""
        if self.bookkeeping(real):
            return True
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
