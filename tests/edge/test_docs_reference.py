"""The configuration and command-line pages, and the generated reference, against the code
(issue 48): every config field (nested sections too) and every CLI command and option is
documented, and no page names a field, a command or an option that does not exist.

The tables come from `docs/gen_ref.py`, the MkDocs hook that fills each page's
``<!-- generated: NAME -->`` at build time; the tests render the pages with it as the build
does. They read the model and the parser, never a list of their own, so a field or a command
added tomorrow is checked too.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

import agentscope_ctx
from agentscope_ctx.cli import _intermixed
from tests.support.docs_site import DOCS, load_generator

gen = load_generator()

CONFIG_PAGE = DOCS / "configuration.md"
CLI_PAGE = DOCS / "cli.md"
HAND_WRITTEN = (CONFIG_PAGE, CLI_PAGE, DOCS / "glossary.md")
"""Pages whose prose names config fields: each name must exist."""

FILE_SUFFIXES = (".md", ".yaml", ".yml", ".jsonl", ".json", ".txt", ".py", ".html", ".svg")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"(?<![\w.])[a-z][a-z0-9_]*(?:\.(?:[a-z][a-z0-9_]*|\*))+")


def _rendered(page: Path) -> str:
    return gen.render(page.read_text(encoding="utf-8"))


def _prose(page: Path) -> str:
    """A page as written, its generated parts left out."""
    return gen.MARKER.sub("", page.read_text(encoding="utf-8"))


# -- the config -------------------------------------------------------------------------------


def _config_paths() -> tuple[set[str], set[str]]:
    """The dotted paths of the leaf fields, and of the sections."""
    leaves = {field.path for field in gen.fields()}
    sections = {path for path, _, _ in gen.sections() if path}
    return leaves, sections


def test_every_config_field_and_section_has_a_docstring() -> None:
    undocumented = [field.path for field in gen.fields() if not field.doc.strip()]
    undocumented += [f"{path} (the section)" for path, _, doc in gen.sections() if path and not doc]
    assert not undocumented, f"fields without a docstring (the page's meaning): {undocumented}"


def test_configuration_page_documents_every_field() -> None:
    page = _rendered(CONFIG_PAGE)
    rows = set(re.findall(r"^\| `([^`]+)` \| `", page, re.MULTILINE))
    leaves, sections = _config_paths()
    assert leaves, "no field read from ContextConfig"
    missing = sorted(leaves - rows)
    assert not missing, f"config fields missing from docs/configuration.md: {missing}"
    stale = sorted(rows - leaves)
    assert not stale, f"docs/configuration.md has rows for no field: {stale}"
    headings = set(re.findall(r"^### `([^`]+)`$", page, re.MULTILINE))
    assert sections <= headings, f"sections without a table: {sorted(sections - headings)}"


def test_the_field_table_gives_defaults_and_ranges() -> None:
    page = _rendered(CONFIG_PAGE)
    row = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([^`]+)` \|.*$", page, re.MULTILINE)}
    assert "| `128,000` | integer >= 1,000 |" in row["max_input_tokens"]
    assert "| `5m` | `5m` / `1h` |" in row["cache.ttl"]
    assert "integer >= 2, <= 10,000" in row["store.max_connections"]
    assert "| `null` | integer, or `null` |" in row["clear_at_least"]


def _unknown_fields(text: str) -> list[str]:
    """The config fields a text names in its code spans (``section.field``, ``section.*``)
    that the model does not have; files, modules and other dotted names are let be."""
    leaves, sections = _config_paths()
    known = leaves | sections | {f"{section}.*" for section in sections}
    unknown = []
    for span in CODE_SPAN.findall(text):
        for name in DOTTED.findall(span):
            if name.endswith(FILE_SUFFIXES):
                continue
            # `section.field` (a YAML path); `manager.compact`, `dialog.bad_lines` are not
            if name.split(".")[0] in sections and name not in known:
                unknown.append(name)
    return unknown


@pytest.mark.parametrize("page", HAND_WRITTEN, ids=lambda p: p.name)
def test_pages_name_only_fields_that_exist(page: Path) -> None:
    unknown = _unknown_fields(_prose(page))
    assert not unknown, f"{page.name} names config fields that do not exist: {unknown}"


def test_a_dotted_name_that_is_no_field_is_found() -> None:
    """The check above finds a field that does not exist (and lets files and modules be)."""
    text = (
        "`recall.sesion`, `store.kind`, `configs/default.yaml`, `retention.*`, `cache.*`, "
        "`ContextManager.context_usage`, `tool_result.recent_max_byte`, `dialog.bad_lines`"
    )
    assert _unknown_fields(text) == ["recall.sesion", "tool_result.recent_max_byte"]


# -- the command line -------------------------------------------------------------------------


def _option_strings(command: argparse.ArgumentParser) -> set[str]:
    return {s for action in command._actions for s in action.option_strings}


def _command_table(text: str) -> dict[str, str]:
    """docs/cli.md's table of commands: command -> its row."""
    rows = {}
    inside = False
    for line in text.splitlines():
        if line.startswith("| command |"):
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        if inside and (match := re.match(r"^\| `([a-z][a-z-]*)", line)):
            rows[match.group(1)] = line
    return rows


def test_cli_page_has_a_row_for_every_command() -> None:
    commands = gen.commands()
    rows = _command_table(_prose(CLI_PAGE))
    assert commands, "no command read from the parser"
    missing = sorted(set(commands) - set(rows))
    assert not missing, f"commands missing from docs/cli.md's table: {missing}"
    stale = sorted(set(rows) - set(commands))
    assert not stale, f"docs/cli.md's table names commands that do not exist: {stale}"


def _sections(text: str) -> list[tuple[str, str]]:
    """The page cut at its headings: (heading, body)."""
    parts = re.split(r"^(#{1,3} .*)$", text, flags=re.MULTILINE)
    return [("", parts[0]), *zip(parts[1::2], parts[2::2], strict=True)]


def _unknown_options(text: str) -> list[tuple[str, str]]:
    """The options a page names that do not exist: one in a row of the command table, or under
    a heading naming a command, must be that command's; one in a code span that is a command
    line, that command's; any other, some command's (or the program's own). Console blocks
    are left to `_parse`."""
    commands = gen.commands()
    root = gen.parser()
    anywhere = _option_strings(root).union(*(_option_strings(c) for c in commands.values()))
    text = re.sub(r"```console\n.*?```", "", text, flags=re.DOTALL)
    option = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")
    unknown = []
    rows = _command_table(text)
    for name, row in rows.items():
        own = _option_strings(commands[name]) if name in commands else set()
        for span in CODE_SPAN.findall(row):
            unknown += [(name, o) for o in option.findall(span) if o not in own]
    for heading, body in _sections(text):
        named = [c for c in re.findall(r"`([a-z-]+)`", heading) if c in commands]
        own = _option_strings(commands[named[0]]) if named else anywhere
        for line in body.splitlines():
            if line in rows.values():
                continue
            for span in CODE_SPAN.findall(line):
                words = span.split()
                if words[0] == "agentscope-ctx" and len(words) > 1 and words[1] in commands:
                    cmd = words[1]
                    mine = _option_strings(commands[cmd])
                    unknown += [
                        (cmd, o) for o in option.findall(" ".join(words[2:])) if o not in mine
                    ]
                    continue
                unknown += [(heading or "top", o) for o in option.findall(span) if o not in own]
    return unknown


def test_cli_page_names_only_options_that_exist() -> None:
    unknown = _unknown_options(_prose(CLI_PAGE))
    assert not unknown, f"docs/cli.md names options that do not exist: {unknown}"


def test_an_option_that_does_not_exist_is_found() -> None:
    text = (
        "| command | what it does |\n|---|---|\n| `gc [WORKING_DIR]` | `--json`, `--colour` |\n\n"
        "## `search`\n\nFilters: `--agent NAME`, `--start-line N`.\n\n"
        "## Other\n\n`agentscope-ctx read x --limit 3`, `--dry-run`, `--nothing`\n"
    )
    assert _unknown_options(text) == [
        ("gc", "--colour"),
        ("## `search`", "--start-line"),
        ("read", "--limit"),
        ("## Other", "--nothing"),
    ]


def _examples(text: str) -> list[str]:
    """The command lines of the page's console blocks (``$ agentscope-ctx ...``)."""
    found = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.DOTALL):
        found += [line[2:] for line in block.splitlines() if line.startswith("$ agentscope-ctx")]
    return found


def _parse(words: list[str]) -> tuple[argparse.Namespace | None, list[str], int | None]:
    """What the CLI's own parsing makes of `words` (options anywhere): the arguments, what
    is left over, and the exit code when argparse exits (--version, a usage error)."""
    root = gen.parser()
    try:
        args, extra = root.parse_known_args(words)
        if extra:
            args, extra = _intermixed(args, words)
    except SystemExit as exc:
        return None, [], exc.code if isinstance(exc.code, int) else 2
    return args, extra, None


def test_cli_page_examples_parse(capsys: pytest.CaptureFixture[str]) -> None:
    examples = _examples(_prose(CLI_PAGE))
    assert len(examples) >= 5
    bad = []
    for line in examples:
        words = shlex.split(line.split(" | ")[0])[1:]
        args, extra, code = _parse(words)
        if code not in (None, 0) or extra:
            bad.append((line, code, extra, capsys.readouterr().err.strip().splitlines()[-1:]))
    assert not bad, f"docs/cli.md's examples the parser refuses: {bad}"


def test_a_wrong_example_is_found(capsys: pytest.CaptureFixture[str]) -> None:
    """The check above refuses an option of another command, and one of no command."""
    assert _parse(["read", "x", "--limit", "3"])[1:] != ([], None)
    assert _parse(["search", "--colour", "disk"])[1:] != ([], None)
    assert _parse(["search", "dir", "--json", "disk"])[1:] == ([], None)
    capsys.readouterr()


def test_cli_reference_lists_every_command_and_option() -> None:
    page = _rendered(DOCS / "reference" / "cli.md")
    by_command = dict(_sections(page))
    missing = []
    for name, command in gen.commands().items():
        body = by_command.get(f"## `{name}`")
        if body is None:
            missing.append(name)
            continue
        table = [line for line in body.splitlines() if line.startswith("| `")]
        for action in gen.arguments(command):
            label = gen._argument_name(action)
            if not any(line.startswith(f"| `{label}`") for line in table):
                missing.append(f"{name} {label}")
    assert not missing, f"missing from docs/reference/cli.md: {missing}"


# -- the Python API and the events ------------------------------------------------------------


def test_api_page_has_a_block_for_every_public_name() -> None:
    page = _rendered(DOCS / "reference" / "api.md")
    blocks = set(re.findall(r"^::: [\w.]+\.(\w+)$", page, re.MULTILINE))
    missing = sorted(set(agentscope_ctx.__all__) - blocks - {"__version__"})
    assert not missing, f"public names missing from docs/reference/api.md: {missing}"
    sections = {model.__name__ for _, model, _ in gen.sections()}
    assert sections <= blocks, f"config sections missing: {sorted(sections - blocks)}"
    for module in gen.PUBLIC_MODULES:  # a public module, documented whole once it exists
        if (gen.PACKAGE.parent / module.replace(".", "/") / "__init__.py").is_file():
            assert f"::: {module}\n" in page, module
    for name in set(agentscope_ctx.__all__) - {"__version__"}:  # each block names its source
        modules = gen.public_names()[name]
        assert any(f"::: {m}.{name}\n" in page for m, _ in modules), name


def test_events_page_explains_every_figure() -> None:
    figures = gen.figures()
    unexplained = sorted(name for name, (_, meaning) in figures.items() if not meaning)
    assert not unexplained, f"pipeline figures without a meaning (a docstring): {unexplained}"
    stale = sorted(set(gen.FIGURE_MEANINGS) - set(figures))
    assert not stale, f"gen_ref.FIGURE_MEANINGS names figures that are gone: {stale}"
    page = _rendered(DOCS / "reference" / "events.md")
    for name in figures:
        assert f"\n| `{name}` |" in page


def test_generated_markers_are_known() -> None:
    for page in DOCS.rglob("*.md"):
        for name in gen.MARKER.findall(page.read_text(encoding="utf-8")):
            assert name in gen.GENERATORS, f"{page}: unknown marker {name!r}"


GLOSSARY_TERMS = (
    "CoPaw",
    "rung",
    "ladder",
    "seam",
    "carried block",
    "pins",
    "eviction index",
    "the line",
    "trigger",
    "budget",
    "notice",
    "masking",
    "stable prefix",
    "breakpoint",
)


def test_glossary_has_every_term() -> None:
    headings = [
        h.lower()
        for h in re.findall(r"^## (.+)$", (DOCS / "glossary.md").read_text(), re.MULTILINE)
    ]
    missing = [t for t in GLOSSARY_TERMS if not any(t.lower() in h for h in headings)]
    assert not missing, f"terms missing from docs/glossary.md: {missing}"
