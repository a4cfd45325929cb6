"""The README's Python snippets and every file in `examples/` run as pasted (issue 20), on each
AgentScope line they claim, against a local OpenAI-compatible server (`tests/support/openai_server.py`)
driving the line's real `OpenAIChatModel`, agent and tools.

Each runs as a newcomer runs it: ``python main.py`` (a snippet saved as main.py) or ``python
examples/NAME.py ARGS``, with ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` set and ``HOME`` in a
temporary directory; the interpreter is a child forked from one that has imported AgentScope
and the OpenAI SDK (`PRELOAD`, `tests/support/forked.py`): what the code imports of them is there
already, everything else runs as in a fresh interpreter. Every snippet names its line on its first line
(``# AgentScope 2.x ...``); every example says in its docstring "For AgentScope N.x" or "On
either AgentScope line". An example run on the line it is not for exits non-zero with one line
that says so, no traceback; a snippet of the other line is skipped here and runs in the other
venv (`.ci/run` runs both).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.forked import Done, Forker
from tests.support.lines import IS_1X
from tests.support.openai_server import Reply, Server, base_url, serving

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
LINE = "1" if IS_1X else "2"


@dataclass
class Snippet:
    name: str
    code: str
    lines: set[str]
    """The AgentScope lines (``"1"``, ``"2"``) it is for."""


def readme_snippets() -> list[Snippet]:
    text = README.read_text(encoding="utf-8")
    found = []
    for number, code in enumerate(re.findall(r"```python\n(.*?)```", text, re.S), start=1):
        label = re.match(r"# AgentScope ([12])\.x\b", code)
        found.append(Snippet(f"readme-{number}", code, {label[1]} if label else set()))
    return found


def example_lines(path: Path) -> set[str]:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    if "On either AgentScope line" in doc:
        return {"1", "2"}
    return set(re.findall(r"\bFor AgentScope ([12])\.x\b", doc))


@pytest.fixture
def server() -> Iterator[Server]:
    with serving() as srv:
        yield srv


PRELOAD = (
    "agentscope.agent",
    "agentscope.formatter",
    "agentscope.message",
    "agentscope.model",
    "agentscope.tool",
    "openai",
    "openai.resources.chat",
)
"""What the snippets and examples import from AgentScope and the OpenAI SDK (not what is
tested here), imported once before the children are forked."""


@pytest.fixture(scope="module")
def forker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forker]:
    forks = Forker(tmp_path_factory.mktemp("forker"), preload=PRELOAD)
    try:
        yield forks
    finally:
        forks.close()


def run(forker: Forker, args: list[str], cwd: Path, server: Server | None, stdin: str = "") -> Done:
    """``python ARGS`` in `cwd`: a child forked after `import agentscope` (`tests/support/forked.py`;
    the import takes seconds on 1.x), with its own HOME and the server's URL."""
    env = {"HOME": str(cwd / "home"), "OPENAI_API_KEY": "sk-local-test"}
    if server is not None:
        env["OPENAI_BASE_URL"] = base_url(server)
    return forker.run(args, cwd=cwd, env=env, stdin=stdin)


def a_repo(tmp_path: Path) -> Path:
    """Where the newcomer runs it: a directory with one file that mentions TODO."""
    (tmp_path / "notes.txt").write_text("ship it\nTODO: rotate the keys\n", encoding="utf-8")
    return tmp_path


def script_the_todo_search(server: Server) -> None:
    server.script += [
        Reply(tool="run_shell", arguments={"command": "grep -rn TODO ."}),
        Reply(text="notes.txt line 2 has a TODO: rotate the keys."),
    ]


def check_the_todo_search(server: Server) -> None:
    """The model saw our tools, and the tool's real output came back to it."""
    assert server.requests[0]["model"] == "gpt-4o-mini"
    tools = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert {"run_shell", "read_file", "remember", "log_today", "search_history"} <= tools
    tool_results = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "notes.txt:2:TODO: rotate the keys" in str(tool_results[0]["content"])


# -- the README ------------------------------------------------------------------------------


def test_i20_2_the_readme_leads_with_the_default_install() -> None:
    snippets = readme_snippets()
    assert [s.lines for s in snippets] == [{"2"}, {"1"}], "2.x first, then the labelled 1.x"
    use_it = README.read_text(encoding="utf-8").split("## Use it\n", 1)[1].split("\n## ", 1)[0]
    assert use_it.index("# AgentScope 2.x") < use_it.index("# AgentScope 1.x")
    assert 'pip install -e ".[agentscope1]"' in use_it
    assert 'pip install "agentscope-ctx[agentscope1]"' not in README.read_text(encoding="utf-8")


def test_i20_2_the_readme_keeps_two_setup_commands() -> None:
    setup = README.read_text(encoding="utf-8").split("## Set up\n", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", setup, re.S)
    assert len(commands) == 2
    assert commands[0].strip().endswith("agentscope-ctx demo")
    assert commands[1].strip().endswith("python -m pytest -q")


@pytest.mark.parametrize("snippet", readme_snippets(), ids=lambda s: s.name)
def test_i20_2_readme_snippet_runs_as_pasted(
    snippet: Snippet, forker: Forker, server: Server, tmp_path: Path
) -> None:
    assert snippet.lines, f"{snippet.name} does not name its line on its first line"
    if LINE not in snippet.lines:
        pytest.skip(f"{snippet.name} is for AgentScope {min(snippet.lines)}.x: run in that venv")
    cwd = a_repo(tmp_path)
    (cwd / "main.py").write_text(snippet.code, encoding="utf-8")
    script_the_todo_search(server)
    done = run(forker, ["main.py"], cwd, server)
    assert done.returncode == 0, done.stderr
    assert "assistant: notes.txt line 2 has a TODO" in done.stdout, done.stdout
    assert_usage_figures_agree(done.stdout)
    check_the_todo_search(server)
    assert (cwd / "home" / ".agentscope_ctx" / "usage").is_dir()


def assert_usage_figures_agree(stdout: str) -> None:
    """The snippet's usage line: tokens, budget and share, one the quotient of the others
    (not a raw count beside a calibrated share)."""
    found = re.search(r"context: ([\d,]+) of ([\d,]+) tokens \((\d+)%\)", stdout)
    assert found, stdout
    tokens, budget = (int(found[i].replace(",", "")) for i in (1, 2))
    assert 0 < tokens < budget, found[0]
    assert int(found[3]) == round(100 * tokens / budget), found[0]


def test_the_usage_check_refuses_figures_that_disagree() -> None:
    assert_usage_figures_agree("context: 4,000 of 128,000 tokens (3%)")
    with pytest.raises(AssertionError):  # a share that is not tokens / budget
        assert_usage_figures_agree("context: 5,668 of 128,000 tokens (54%)")
    with pytest.raises(AssertionError):  # the old form: a raw count beside a calibrated share
        assert_usage_figures_agree("context: 5,668 tokens, 54% of the budget")


def test_the_readme_fits_on_a_few_screens_and_cites_only_what_is_here() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        body = page.read_text(encoding="utf-8")
        assert not re.search(r"\bDESIGN\b|\b[Ii]ssue[ -]#?\d", body), page.name
    # a link to a docs page: a page in docs/, or one mkdocs.yml lists as coming
    mkdocs = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(docs/([\w-]+\.md)", text):
        assert (ROOT / "docs" / target).exists() or f": {target}" in mkdocs, target


def test_the_docs_snippets_are_the_readmes() -> None:
    """Getting started shows the README's snippets (the ones run above), not drifting copies."""
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    shown = re.findall(r"```python\n(.*?)```", page, re.S)
    assert shown == [s.code for s in readme_snippets()]


# -- examples/ -------------------------------------------------------------------------------


def test_i20_2_every_example_names_its_lines() -> None:
    lines = {path.name: example_lines(path) for path in EXAMPLES}
    assert all(lines.values()), lines
    assert lines["attach_in_code.py"] == {"2"} and lines["attach_in_code_1x.py"] == {"1"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_i20_2_example_runs_as_pasted(
    path: Path, forker: Forker, server: Server, tmp_path: Path
) -> None:
    cwd = a_repo(tmp_path)
    lines = example_lines(path)
    if LINE not in lines:  # the other line's example: one line that says so
        done = run(forker, [str(path)], cwd, server)
        assert done.returncode != 0
        assert done.stdout == "" and "Traceback" not in done.stderr
        (message,) = done.stderr.strip().splitlines()
        assert f"needs AgentScope {min(lines)}.x; AgentScope {LINE}." in message, message
        assert server.requests == []
        return
    if path.name == "log_detective.py":  # offline: the scripted demo
        done = run(forker, [str(path), str(tmp_path / "wd")], cwd, None)
        assert done.returncode == 0, done.stderr
        assert "chart:" in done.stdout and (tmp_path / "wd" / "report.svg").exists()
        return
    script_the_todo_search(server)
    if path.name == "attach_from_config.py":
        question = "Which files in this directory mention TODO?"
        done = run(
            forker,
            [str(path), str(ROOT / "configs" / "agent.yaml")],
            cwd,
            server,
            stdin=f"{question}\n/usage\n/compact keep the file names\n\n",
        )
        assert done.returncode == 0, done.stderr
        assert re.search(r"\d+ of 100000 tokens \(\d+%\)", done.stdout), done.stdout
    else:
        done = run(forker, [str(path)], cwd, server)
        assert done.returncode == 0, done.stderr
        assert "ContextUsage(" in done.stdout, done.stdout
    assert "notes.txt line 2 has a TODO" in done.stdout
    # the reason when nothing was compacted (issue 31 item 5: "compacted 0 messages", no reason)
    why = (
        r"\(nothing to compact: of the \d+ older message\(s\), \d+ belong to the current user turn"
    )
    assert re.search(rf"compacted 0 messages {why}", done.stdout), done.stdout
    check_the_todo_search(server)
