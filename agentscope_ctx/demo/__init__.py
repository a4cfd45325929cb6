"""Offline demos: a real `ReActAgent` with real tools and files, a scripted model, and the
context manager attached. Each run ends with a report and an SVG chart.

- ``logs`` (the default): the log detective (grep/tail/read_file over megabytes of logs),
  then the incident report: one run walks up the whole ladder, from a first truncation to a
  model compaction into dialog/ and a search_history hit in what left the context;
- ``web``: a web reader fetching large HTML pages from a local server (the Browser Use case);
- ``skills``: reads several `SKILL.md` files and long Markdown docs (Markdown protection).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from pathlib import Path

from .._providers import Models
from ..core._private import private_dir
from ..core.config._config import ContextConfig
from ._report import DemoReport
from ._runner import DemoSetup, model_note, run_setup

__all__ = ["DEMOS", "DemoReport", "run_demo"]

DEMOS: dict[str, str] = {
    "logs": "log detective: grep, tail and read megabytes of logs to find a buried failure",
    "web": "web reader: fetch large HTML pages from a local HTTP server (Browser Use case)",
    "skills": "skills reader: SKILL.md files and long Markdown docs (Markdown protection)",
}
"""Demo names and one-line descriptions."""


def _prepare(working_dir: Path) -> Path:
    working_dir = working_dir.resolve()
    private_dir(working_dir, tighten=False)  # 0700 when made here; one given is left as it is
    return working_dir


async def run_demo(
    name: str,
    working_dir: Path,
    *,
    config: ContextConfig | None = None,
    models: Models | None = None,
    out: Callable[[str], None] = print,
) -> DemoReport:
    """Run demo `name` in `working_dir` (created if needed) and return its report.

    Args:
        name: one of `DEMOS`.
        working_dir: where the demo's data, `dialog/`, `tool_result/` and the chart go.
        config: context settings to use instead of the demo's (its `working_dir` and
            `read_roots` are replaced by the demo directory; the CLI picks that directory
            inside the config's `working_dir` when the config sets one).
        models: a real model (and compactor model) to run instead of the scripted one
            (see `agentscope_ctx.load_models`).
        out: where progress lines go.

    Raises:
        KeyError: `name` is not a demo.
    """
    if name not in DEMOS:
        raise KeyError(name)
    working_dir = await asyncio.to_thread(_prepare, Path(working_dir))
    module = importlib.import_module(f"{__name__}._{name}")
    setup: DemoSetup = await module.setup(working_dir)
    out(model_note(models))
    out(f"demo {name!r}: {setup.title}")
    out(f"working dir: {working_dir}")
    report = await run_setup(name, setup, working_dir, config=config, models=models, out=out)
    out(report.render())
    return report
