"""The headless browser of the viewer's tests: Debian's chromium, driven by Playwright (no
browser download). `open_page` opens a page and collects what its console and script report
as errors; a missing browser or Playwright is a skip here and a failure under CI (which
installs both: `.ci/run`).

One browser serves a test process: Playwright launches it on first use, on a thread and event
loop of its own (each test has its own loop, and a Playwright object is bound to one), with a
debugging port; each page is in a fresh browser context (an incognito profile: no cookies,
storage or cache of another test's) of a connection over that port, closed after the test.
A launch costs about 1 CPU-s; a dozen tests each made their own."""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page, Playwright

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


class _Shared:
    """The process's browser, launched on its own thread's loop; `url` its debugging port."""

    def __init__(self, executable: str) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True, name="chromium").start()
        self._pw: Playwright | None = None
        self._browser: Browser | None = None
        args = ["--no-sandbox", "--disable-gpu", f"--remote-debugging-port={port}"]
        asyncio.run_coroutine_threadsafe(self._launch(executable, args), self.loop).result()
        atexit.register(self.close)

    async def _launch(self, executable: str, args: list[str]) -> None:
        from playwright.async_api import async_playwright

        self._pw = await async_playwright().start()
        self._browser = await self._pw.chromium.launch(executable_path=executable, args=args)

    async def _close(self) -> None:
        if self._browser is not None:
            await self._browser.close()
        if self._pw is not None:
            await self._pw.stop()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)


_shared: _Shared | None = None
_lock = threading.Lock()


def _browser_url(executable: str) -> str:
    global _shared
    with _lock:
        if _shared is None:
            _shared = _Shared(executable)
        return _shared.url


@asynccontextmanager
async def open_page(
    page_file: Path | None = None, *, width: int = 1280, height: int = 800
) -> AsyncIterator[tuple[Page, list[str]]]:
    """A chromium page (`page_file` opened, when given) in a fresh browser context, and the
    list its console errors and uncaught script errors are appended to, as they come; the
    context is closed on exit. The test asserts the list is empty when it wants none."""
    executable = browser_or_skip()
    from playwright.async_api import async_playwright

    url = await asyncio.to_thread(_browser_url, executable)
    errors: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.connect_over_cdp(url)
        try:
            context = await browser.new_context(viewport={"width": width, "height": height})
            page = await context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            if page_file is not None:
                await page.goto(page_file.as_uri())
            yield page, errors
        finally:
            await browser.close()  # a connection's close: its contexts, not the browser
