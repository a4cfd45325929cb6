"""Offline demos: a real `ReActAgent` with real tools and files, a scripted model, and the
context manager attached. Each run ends with a report and an SVG chart.

- ``logs``: the log detective (grep/tail/read_file over megabytes of logs);
- ``web``: a web reader fetching large HTML pages from a local server (the Browser Use case);
- ``skills``: reads several `SKILL.md` files and long Markdown docs (Markdown protection).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from .._config import ContextConfig
from ._report import DemoReport
from ._runner import SCRIPTED_NOTE, DemoSetup, run_setup

__all__ = ["DEMOS", "DemoReport", "run_demo"]

DEMOS: dict[str, str] = {
    "logs": "log detective: grep, tail and read megabytes of logs to find a buried failure",
    "web": "web reader: fetch large HTML pages from a local HTTP server (Browser Use case)",
    "skills": "skills reader: SKILL.md files and long Markdown docs (Markdown protection)",
}
"""Demo names and one-line descriptions."""


async def run_demo(
    name: str,
    working_dir: Path,
    *,
    config: ContextConfig | None = None,
    out: Callable[[str], None] = print,
) -> DemoReport:
    """Run demo `name` in `working_dir` (created if needed) and return its report.

    Args:
        name: one of `DEMOS`.
        working_dir: where the demo's data, `dialog/`, `tool_result/` and the chart go.
        config: context settings to use instead of the demo's (its `working_dir` and
            `read_roots` are replaced by the demo directory).
        out: where progress lines go.

    Raises:
        KeyError: `name` is not a demo.
    """
    if name not in DEMOS:
        raise KeyError(name)
    working_dir = Path(working_dir).resolve()
    working_dir.mkdir(parents=True, exist_ok=True)
    module = importlib.import_module(f"{__name__}._{name}")
    setup: DemoSetup = await module.setup(working_dir)
    out(SCRIPTED_NOTE)
    out(f"demo {name!r}: {setup.title}")
    out(f"working dir: {working_dir}")
    report = await run_setup(name, setup, working_dir, config=config, out=out)
    out(report.render())
    return report
