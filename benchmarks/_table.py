"""What the benchmarks' reports share: a run whose numbers a report prints, a table printed
under its header, and byte sizes made readable."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from typing import Any


def run_and_report(
    run: Coroutine[Any, Any, dict[str, Any]], report: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Run a benchmark's coroutine `run`, print its numbers with `report`, return them."""
    result = asyncio.run(run)
    report(result)
    return result


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
