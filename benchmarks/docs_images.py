"""Regenerate the documentation's two pictures of the offline logs demo from the current code:
``python -m benchmarks.docs_images`` (from the repository root, on either AgentScope line).

- ``docs/demo-report.svg``: the chart the demo writes as ``report.svg`` (README, docs/index);
- ``docs/img/viewer.png``: the top of the demo's session viewer page (``view.html``, what
  ``agentscope-ctx view`` writes), as the system's chromium draws it (Playwright, no browser
  download), 960 pixels wide (docs/viewer).

The demo is scripted and offline: no key, no network. It runs in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "docs" / "demo-report.svg"
SCREENSHOT = ROOT / "docs" / "img" / "viewer.png"
WIDTH, HEIGHT = 960, 1000
"""The screenshot's size: the page's figures, the timeline and the first model calls."""


async def screenshot(
    page_file: Path, out: Path, *, width: int = WIDTH, height: int = HEIGHT
) -> None:
    """Write the top `width` x `height` of `page_file` as chromium draws it to `out` (PNG)."""
    from playwright.async_api import async_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        raise SystemExit("no chromium here (Debian: apt-get install chromium)")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = await browser.new_page(viewport={"width": width, "height": height})
            await page.goto(page_file.as_uri())
            await page.screenshot(path=str(out), full_page=False)
        finally:
            await browser.close()


async def regenerate(chart: Path = CHART, shot: Path = SCREENSHOT) -> None:
    """Run the logs demo and write its chart to `chart` and its page's screenshot to `shot`."""
    from agentscope_ctx.demo import run_demo

    with tempfile.TemporaryDirectory(prefix="ctx-docs-images-") as tmp:
        run = Path(tmp) / "run"
        report = await run_demo("logs", run, out=lambda _: None)
        assert report.chart is not None and report.viewer is not None, "the demo wrote no page"
        chart.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(report.chart, chart)
        shot.parent.mkdir(parents=True, exist_ok=True)
        await screenshot(report.viewer, shot)
    print(f"wrote {chart} and {shot}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.parse_args(argv)
    asyncio.run(regenerate())
    return 0


if __name__ == "__main__":
    sys.exit(main())
