"""Ready-made agent tools: a confined, read-only shell and `fetch_url`.

They are what `build_agent`'s ``shell`` and ``fetch_url`` tools and the demos use, and they
produce the large outputs this package is for. They answer the way tools of the installed
AgentScope line do: a `ToolResponse` on 1.x, a `ToolChunk` on 2.x. Add them to your toolkit::

    # AgentScope 1.x
    toolkit.register_tool_function(ShellTool(".").run_shell)
    toolkit.register_tool_function(fetch_url)
    # AgentScope 2.x (they read only: allowing them without asking is your call)
    Toolkit(tools=[FunctionTool(ShellTool(".").run_shell, is_read_only=True, permission=...)])

`ShellTool.run_shell` runs read-only text tools (grep, tail, wc, ...) through `/bin/sh` in
one directory: no `..`, no absolute paths, no redirection or command chaining, only
whitelisted programs in a pipeline. It keeps an agent from wandering off by mistake; it is
not a security sandbox (run untrusted agents in a container).
"""

from __future__ import annotations

import asyncio
import re
import shlex
import urllib.error
import urllib.request
from pathlib import Path

from agentscope.message import TextBlock

from ._line import IS_1X

if IS_1X:
    from agentscope.tool import ToolResponse as ToolOutput
else:  # the 2.x tool answer (a function tool's final chunk)
    from agentscope.tool import ToolChunk as ToolOutput  # type: ignore[attr-defined,no-redef]

__all__ = ["ALLOWED_PROGRAMS", "ShellTool", "ToolOutput", "fetch_url"]

ALLOWED_PROGRAMS = frozenset(
    {
        "grep",
        "egrep",
        "fgrep",
        "tail",
        "head",
        "wc",
        "ls",
        "find",
        "cat",
        "sort",
        "uniq",
        "cut",
        "tr",
        "nl",
        "du",
    }
)
_FORBIDDEN_CHARS = re.compile(r"[;&><$`\n\\(){}]")
_FORBIDDEN_ARGS = frozenset({"-exec", "-execdir", "-delete", "-ok", "-okdir", "-fprint"})
_MAX_OUTPUT = 20_000_000
_MAX_FETCH = 10_000_000


def _text(text: str) -> ToolOutput:
    return ToolOutput(content=[TextBlock(type="text", text=text)])


class ShellTool:
    """A shell confined to `root` (see the module docstring).

    Args:
        root: the working directory of every command.
        timeout: seconds before a command is killed.
    """

    def __init__(self, root: Path, timeout: float = 30.0) -> None:
        self.root = Path(root).resolve()
        self.timeout = timeout

    def check(self, command: str) -> str | None:
        """Why `command` is refused, or `None` when it may run."""
        if _FORBIDDEN_CHARS.search(command):
            return "redirection, chaining, substitution and escapes are not allowed"
        for segment in command.split("|"):
            try:
                words = shlex.split(segment)
            except ValueError as exc:
                return f"cannot parse {segment.strip()!r}: {exc}"
            if not words:
                return "empty command in the pipeline"
            if words[0] not in ALLOWED_PROGRAMS:
                allowed = ", ".join(sorted(ALLOWED_PROGRAMS))
                return f"{words[0]!r} is not allowed; use one of: {allowed}"
            for word in words[1:]:
                if word in _FORBIDDEN_ARGS:
                    return f"{word!r} is not allowed"
                if word.startswith(("/", "~")) or ".." in Path(word).parts:
                    return f"{word!r} leaves the working directory"
        return None

    async def run_shell(self, command: str) -> ToolOutput:
        """Run a read-only shell command (grep, tail, head, wc, ls, find, cat, sort, uniq,
        cut; pipes allowed) in the working directory and return its output.

        Args:
            command (str): the command line, e.g. `grep -rn ERROR logs | head -50`.
        """
        refused = self.check(command)
        if refused is not None:
            return _text(f"Error: command refused: {refused}")
        proc = await asyncio.create_subprocess_shell(
            command,
            cwd=self.root,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout=self.timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            return _text(f"Error: command timed out after {self.timeout:g} s")
        text = out[:_MAX_OUTPUT].decode("utf-8", "replace")
        if err:
            text += ("" if not text or text.endswith("\n") else "\n") + err.decode(
                "utf-8", "replace"
            )
        if proc.returncode not in (0, None):
            text += f"[exit code {proc.returncode}]\n"
        return _text(text or "(no output)\n")


def _fetch(url: str, timeout: float) -> str:
    request = urllib.request.Request(url, headers={"User-Agent": "agentscope-ctx/0.1"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        charset = response.headers.get_content_charset() or "utf-8"
        data: bytes = response.read(_MAX_FETCH)
    return data.decode(charset, "replace")


async def fetch_url(url: str) -> ToolOutput:
    """Fetch a web page (http or https) and return its HTML source, like a browser's
    "view source".

    Args:
        url (str): the address of the page.
    """
    if not url.startswith(("http://", "https://")):
        return _text(f"Error: expected an http(s) URL, got {url!r}")
    try:
        page = await asyncio.to_thread(_fetch, url, 30.0)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return _text(f"Error: cannot fetch {url}: {exc}")
    return _text(page)
