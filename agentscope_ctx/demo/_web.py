"""Demo "web" — the web reader (the Browser Use case).

A local HTTP server (127.0.0.1, a free port, a daemon thread) serves generated HTML pages of
200 KB and more. The agent fetches them with a browser-like `fetch_url` tool; each page is cut
when it enters the context, and the full HTML stays in `tool_result/`, where the agent greps
it and reads on with `read_file`.
"""

from __future__ import annotations

import asyncio
import random
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..core._private import private_dir, write_atomic
from ..tools import ShellTool, fetch_url
from ._runner import DemoSetup
from ._scripted import Move, Observation, Step, answer, call, follow

__all__ = ["generate_site", "setup"]

_WORDS = (
    "request token batch quota endpoint client retry header payload region latency cache "
    "window burst tenant scope webhook cursor page limit policy gateway"
).split()
_LIMIT = "Batch API limit: 37 requests per minute per tenant (burst 5)"


def _paragraphs(rng: random.Random, n: int, tag: str) -> list[str]:
    out = []
    for i in range(n):
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(25, 45)))
        out.append(f'<p class="body" id="{tag}-{i}">{words.capitalize()}.</p>')
    return out


def _page(title: str, body: list[str]) -> str:
    nav = "".join(f'<li><a href="/docs/page-{i}.html">Section {i}</a></li>' for i in range(1, 9))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8">'
        f"<title>{title}</title>\n<style>body{{font-family:sans-serif}}</style></head>\n"
        f"<body>\n<nav><ul>{nav}</ul></nav>\n<main>\n<h1>{title}</h1>\n"
        + "\n".join(body)
        + "\n</main>\n</body>\n</html>\n"
    )


def generate_site(root: Path, *, seed: int = 7) -> dict[str, Any]:
    """Write the site under `root/site/docs` and return where the answer is hidden."""
    rng = random.Random(seed)
    docs = root / "site" / "docs"
    private_dir(docs)
    links = "\n".join(
        f'<li><a href="/docs/page-{i}.html">API guide, part {i}</a></li>' for i in range(1, 5)
    )
    write_atomic(docs / "index.html", _page("Acme API documentation", [f"<ul>\n{links}\n</ul>"]))
    for i in range(1, 5):
        body = _paragraphs(rng, 1_000, f"s{i}")
        if i == 3:
            body.insert(
                700,
                f'<div class="limits"><h2 id="batch">Limits</h2><p>{_LIMIT}.</p>'
                "<p>Exceeding it returns HTTP 429 with a Retry-After header.</p></div>",
            )
        write_atomic(docs / f"page-{i}.html", _page(f"API guide, part {i}", body))
    body = _paragraphs(rng, 900, "c")
    body.insert(
        850,
        "<h2>2026-11-30</h2><p>Batch API limit lowered from 60 to 37 requests "
        "per minute per tenant.</p>",
    )
    write_atomic(docs / "changelog.html", _page("Changelog", body))
    return {"limit": _LIMIT}


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _plan(base: str) -> list[list[Step]]:
    seen: dict[str, Any] = {}

    def index(obs: Observation) -> Move:
        return call("fetch_url", url=f"{base}/docs/index.html")

    def page(n: int) -> Step:
        return lambda obs: call("fetch_url", url=f"{base}/docs/page-{n}.html")

    def read_on(obs: Observation) -> Move:
        return follow(obs, call("fetch_url", url=f"{base}/docs/page-4.html"))

    def grep_saved(obs: Observation) -> Move:
        return call("run_shell", command="grep -n -o 'Batch API limit[^.]*' tool_result/*.txt")

    def open_hit(obs: Observation) -> Move:
        hit = obs.find(r"^(tool_result/\w+\.txt:\d+):")
        path, _, line = hit.partition(":")
        seen["where"] = hit
        seen["limit"] = obs.find(r"(Batch API limit[^<\n]*)")
        return call("read_file", file_path=path or "tool_result", start_line=max(1, int(line or 1)))

    def conclude(obs: Observation) -> Move:
        retry = "Retry-After" in obs.last_tool_text
        return answer(
            f"The documented limit is: {seen.get('limit')} (found in the saved page "
            f"{seen.get('where')}, from {base}/docs/page-3.html)."
            + (" Exceeding it returns HTTP 429 with a Retry-After header." if retry else "")
        )

    def changelog(obs: Observation) -> Move:
        return call("fetch_url", url=f"{base}/docs/changelog.html")

    def grep_changelog(obs: Observation) -> Move:
        notice = obs.notice
        target = Path(notice.file_path).name if notice else "*.txt"
        return call("run_shell", command=f"grep -n -B1 'lowered from' tool_result/{target}")

    def when(obs: Observation) -> Move:
        found = obs.find(r"<h2>(\d{4}-\d{2}-\d{2})</h2>", "recently")
        return answer(f"It changed on {found}: lowered from 60 to 37 requests per minute.")

    return [
        [index, page(1), read_on, page(2), page(3), grep_saved, open_hit, conclude],
        [changelog, read_on, grep_changelog, when],
    ]


async def setup(working_dir: Path) -> DemoSetup:
    """Generate the site, start the server, and return the demo."""
    await asyncio.to_thread(generate_site, working_dir)
    handler = partial(_Quiet, directory=str(working_dir / "site"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    async def cleanup() -> None:
        await asyncio.to_thread(server.shutdown)
        server.server_close()

    size = (working_dir / "site" / "docs" / "page-3.html").stat().st_size
    return DemoSetup(
        title=f"web reader: local server at {base}, pages of {size / 1e3:.0f} KB",
        sys_prompt=(
            "You research documentation on the web with fetch_url. Long pages are cut; their "
            "full HTML is saved under tool_result/, which you can search with run_shell "
            "(grep) and read with read_file."
        ),
        tools=[fetch_url, ShellTool(working_dir).run_shell],
        prompts=[
            f"What is the rate limit of the Batch API? The docs start at {base}/docs/index.html",
            "When did that limit change? Check the changelog.",
        ],
        turns=_plan(base),
        context={
            "max_input_tokens": 12_000,
            # pages enter at 15% of the budget (not 8%), so that the two questions pass the
            # trigger and an old page is cut again
            "tool_result": {
                "recent_max_bytes": 16_384,
                "old_max_bytes": 2_048,
                "recent_max_share": 0.15,
            },
        },
        cleanup=cleanup,
    )
