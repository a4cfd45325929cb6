"""A local day of the dialog (``dialog/YYYY-MM-DD.jsonl``) as one tenant reads it.

Sessions that share a working dir share its day files. `DialogDayView` is a day file with
every record the tenant may not see (`core._tenant.Tenant.sees`; a line that is not a record
belongs to nobody) replaced by an empty line: line numbers stay those of the file, so a
search hit's pointer (its record's line) reads the same through the view. A day without one
record of the tenant's is no day at all (`KeyError`), as a missing file.

It is a `seams.RangedSource`, read by `seams.excerpt` with the same cut and notice as a file.
"""

from __future__ import annotations

from ..core._tenant import Tenant
from ._dialog_record import decode_owned

__all__ = ["DialogDayView"]


class DialogDayView:
    """The bytes of one day file as `tenant` sees them (see the module docstring).

    Raises:
        KeyError: the day holds no record `tenant` sees.
    """

    def __init__(self, data: bytes, tenant: Tenant) -> None:
        kept: list[bytes] = []
        starts: list[int] = []
        at, seen = 0, False
        for line in data.splitlines(keepends=True):
            msg, agent, session = decode_owned(line) if line.strip() else ("", "", "")
            visible = not isinstance(msg, str) and tenant.sees(agent, session)
            seen = seen or visible
            shown = line if visible else (b"\n" if line.endswith(b"\n") else b"")
            if shown:
                starts.append(at)
                kept.append(shown)
                at += len(shown)
        if not seen:
            raise KeyError("no record of this tenant")
        self.data = b"".join(kept)
        self._starts = starts

    def read_range(self, ref: str, offset: int, size: int) -> bytes:
        """Up to `size` bytes from `offset`."""
        offset = max(offset, 0)
        return self.data[offset : offset + max(size, 0)]

    def line_count(self, ref: str) -> int:
        """Lines of the day (those of the file)."""
        return len(self._starts)

    def line_start(self, ref: str, line: int) -> int:
        """Byte offset where `line` (from 1) begins."""
        if line <= 1:
            return 0
        if line > len(self._starts):
            return len(self.data)
        return self._starts[line - 1]
