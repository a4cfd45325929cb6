"""A stored ref read to its end the way an agent does: excerpt after excerpt of a seam (the
outputs, or the dialog's days), each notice's ``read_file`` hint naming where the next starts."""

from __future__ import annotations

from typing import Any

from agentscope_ctx.core.truncation._truncation import Position, parse_notice
from agentscope_ctx.stores.seams import excerpt


def follow_excerpts(seam: Any, ref: str, max_bytes: int) -> str:
    """The excerpts of `ref` in `seam` (`max_bytes` each) concatenated, following each
    notice's hint; every notice names `ref`."""
    got, start = [], Position()
    for _ in range(10_000):
        out = excerpt(seam, ref, start, max_bytes)
        parsed = parse_notice(out)
        if parsed is None:
            got.append(out)
            return "".join(got)
        got.append(parsed[0])
        assert parsed[1].file_path == ref
        start = parsed[1].next
    raise AssertionError(f"{ref}: no last excerpt after 10,000")
