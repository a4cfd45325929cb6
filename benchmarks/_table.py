"""What the benchmarks' reports share: a table printed under its header, and byte sizes
made readable."""

from __future__ import annotations

from collections.abc import Iterable


def human(n: float) -> str:
    """`n` bytes in decimal units (``"12 KB"``)."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}"
        n /= 1000
    return f"{n:.0f} TB"


def print_table(header: str, rows: Iterable[str]) -> None:
    """Print `header`, a rule as long, then one line per row."""
    print(header)
    print("-" * len(header))
    for row in rows:
        print(row)
