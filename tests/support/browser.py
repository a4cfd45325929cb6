"""The headless browser of the viewer's tests: Debian's chromium, driven by Playwright (no
browser download). `open_page` opens a page and collects what its console and script report
as errors; a missing browser or Playwright is a skip here and a failure under CI (which
installs both: `.ci/run`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.async_api import Page

__all__ = ["CHROMIUM", "browser_or_skip", "open_page"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def browser_or_skip() -> str:
    """The browser's executable; missing (or Playwright missing), a skip here, a failure in
    CI (which must run the test)."""
    missing = pytest.fail if os.environ.get("CI") else pytest.skip
    if CHROMIUM is None:
        missing("no chromium here (Debian: apt-get install chromium); CI installs it")
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        missing("playwright is not installed (pip install -e .[dev]); CI installs it")
    assert CHROMIUM is not None
    return CHROMIUM


@asynccontextmanager
async def open_page(
    page_file: Path | None = None, *, width: int = 1280, height: int = 800
) -> AsyncIterator[tuple[Page, list[str]]]:
    """A chromium page (`page_file` opened, when given) and the list its console errors and
    uncaught script errors are appended to, as they come; the browser is closed on exit.
    The test asserts the list is empty when it wants none."""
    executable = browser_or_skip()
    from playwright.async_api import async_playwright

    errors: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = await browser.new_page(viewport={"width": width, "height": height})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            if page_file is not None:
                await page.goto(page_file.as_uri())
            yield page, errors
        finally:
            await browser.close()
