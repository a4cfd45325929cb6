"""The user's part of the documentation site (issue 48): short, and free of internal material.

mkdocs.yml's nav has two parts: the user's (every page before the "For contributors" section)
and the contributors' (design notes, benchmark logs, adapter internals). These tests read the
nav, so a page added to it is checked from the day it is added.

- **The word budget**: the user's pages hold at most `WORD_BUDGET` words. What counts is the
  Markdown source of each page as written, its prose, tables and code blocks alike. The parts
  `docs/gen_ref.py` generates at build time (a ``<!-- generated: NAME -->`` marker: the
  configuration table, the CLI and API reference, the events) do not count: they are the code's
  docstrings and help, one entry per field, option or name, read by looking one up, and they
  grow with the API rather than with the prose. They are held to the second rule instead.
- **No internal material**: no path or dotted name of a private module
  (``agentscope_ctx/core/_x.py``, ``stores/_search.py``, ``core._tenant``) or of the tests
  (``tests/...``), no commit id (7 to 40 hex digits with a letter and a digit, outside fenced
  code blocks, which show a program's output), no branch talk ("branch v2", "main's commit",
  "after merge", ``_v2/``) and no citation of the design notes (DESIGN.md, not on the site), in
  the user's pages as built (their Markdown with the generated parts in; link targets and
  mkdocstrings directives are addresses, not prose) and in every docstring the API reference
  renders (mkdocstrings, read through griffe as it does).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.docs_site import DOCS, ROOT, load_generator

CONTRIBUTORS = "For contributors"
WORD_BUDGET = 20_000

INTERNAL = {
    "a private module's path": re.compile(r"(?:\b[\w.-]+/)+_\w+\.py\b"),
    "a private module's name": re.compile(r"(?<![\w.#/])(?:[a-z]\w*\.)+_[a-z]\w*"),
    "a path in the tests": re.compile(r"(?<![\w/.-])tests/[\w./-]+"),
    "a commit id": re.compile(
        r"(?<![\w/.#-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-]|\.\w)"
    ),
    "the design notes": re.compile(r"\bDESIGN(?:\.md)?\b"),
    "a branch": re.compile(
        r"\bbranch v\d|\bmain's commit|\bafter (?:the )?merge\b|(?<!\w)_v\d/", re.IGNORECASE
    ),
}
"""What a user's page and a public docstring must not hold, each named for the failure."""

FENCED = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
NOT_PROSE = re.compile(r"\]\([^)\s]*\)|^::: .*$", re.MULTILINE)
"""A link's target and a mkdocstrings directive: addresses, not words a reader sees."""


def _pages(entries: list[object], section: str = "") -> Iterator[tuple[str, str]]:
    """Each page of a nav (sub)list with the top-level section it is in."""
    for entry in entries:
        items = entry.items() if isinstance(entry, dict) else [("", entry)]
        for title, value in items:
            top = section or str(title)
            if isinstance(value, list):
                yield from _pages(value, top)
            elif isinstance(value, str) and not value.startswith(("http:", "https:")):
                yield top, value


def nav_pages() -> list[tuple[str, str]]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return list(_pages(config["nav"]))


def user_pages() -> list[Path]:
    return [DOCS / page for section, page in nav_pages() if section != CONTRIBUTORS]


GENERATED = re.compile(r"^<!-- generated: [a-z-]+ -->$", re.MULTILINE)


def words(markdown: str) -> int:
    """The words of a page's Markdown source, its generated parts' markers left out."""
    return len(GENERATED.sub("", markdown).split())


def internal_material(text: str) -> list[str]:
    """What of `text` is internal: each find named, with what it matched."""
    prose = NOT_PROSE.sub("", FENCED.sub("", text))
    return [f"{name}: {m.group(0)!r}" for name, rx in INTERNAL.items() for m in rx.finditer(prose)]


# -- the nav -------------------------------------------------------------------------------


def test_the_contributors_section_ends_the_nav_and_every_page_is_in_it_or_before() -> None:
    pages = nav_pages()
    sections = [section for section, _ in pages]
    assert CONTRIBUTORS in sections
    first = sections.index(CONTRIBUTORS)
    assert set(sections[first:]) == {CONTRIBUTORS}, "the contributors' section ends the nav"
    for section, page in pages:
        assert (DOCS / page).is_file(), page
        assert page.startswith("contributors/") == (section == CONTRIBUTORS), page


def test_the_readme_links_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\((docs/[\w/.-]+\.md)", readme):
        assert (ROOT / target).is_file(), target


# -- the word budget -------------------------------------------------------------------------


def test_the_users_part_is_under_the_word_budget() -> None:
    counts = {path.name: words(path.read_text(encoding="utf-8")) for path in user_pages()}
    total = sum(counts.values())
    biggest = sorted(counts.items(), key=lambda c: -c[1])[:5]
    assert total <= WORD_BUDGET, f"{total:,} words (budget {WORD_BUDGET:,}); biggest: {biggest}"


def test_words_are_counted_in_the_source_generated_parts_excluded() -> None:
    assert words("# Title\n\nTwo words.\n\n<!-- generated: api -->\n") == 4
    assert words("| a | b |\n```\ncode here\n```") == 9


# -- internal material ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("see `agentscope_ctx/core/search/_background.py` for it", "a private module's path"),
        ("the constants in stores/_search.py", "a private module's path"),
        ("see `agentscope_ctx.core.context._pins`", "a private module's name"),
        ("(the app factory's: `agentscope2._app`)", "a private module's name"),
        ("as tests/stores/test_search_text_index.py shows", "a path in the tests"),
        ("(`tests/fleet/`)", "a path in the tests"),
        ("the code before it, `c2bf54c`, gave the same", "a commit id"),
        ("fixed in 6123909 and 31bf756.", "a commit id"),
        ("since 4a152b0e9d1c2f3a4b5c6d7e8f90a1b2c3d4e5f6 it holds", "a commit id"),
        ("what `recall.scope` shows (DESIGN.md §15, docs/tenants.md)", "the design notes"),
        ("## Prototype (branch v2)", "a branch"),
        ("as main's commit 1d3390d says", "a branch"),
        ("the adapter after merge", "a branch"),
        ("moved from `agentscope_ctx/_v2/` to", "a branch"),
    ],
)
def test_internal_material_is_found(text: str, name: str) -> None:
    found = internal_material(text)
    assert any(f.startswith(f"{name}:") for f in found), found


@pytest.mark.parametrize(
    "text",
    [
        "`agentscope_ctx.testing` and `agentscope_ctx/testing` are public",
        "read_file file_path=./demo/tool_result/c143edaf21db4564aa599a1acea5c5f1.txt",
        "`tool_result/c143edaf21db.txt`, a run of 1234567 tokens, 0xdeadbeef, sha256 ",
        "a deadbeef cafe: words made of hex letters only, and 100000 messages",
        "```\ncommit 1d3390d in a program's output\n```",
        "pytest's tests/ folder, the branch of a tree, the merge of two sessions",
        "`_private` names, `__init__.py` and `_v2_thing`",
        "[the config](reference/api.md#agentscope_ctx.core.config._config.ContextConfig)",
        "::: agentscope_ctx.core.config._config.ContextConfig",
        "`agentscope_ctx.testing.ScriptedChatModel`, `config.recall.scope`",
    ],
)
def test_user_text_is_not_taken_for_internal_material(text: str) -> None:
    assert internal_material(text) == []


def test_the_users_pages_hold_no_internal_material() -> None:
    gen = load_generator()
    found = {}
    for path in user_pages():
        hits = internal_material(gen.render(path.read_text(encoding="utf-8")))
        if hits:
            found[str(path.relative_to(DOCS))] = hits
    assert not found, found


def _docstrings(obj: object, seen: set[str]) -> Iterator[tuple[str, str]]:
    """The docstrings mkdocstrings renders for a griffe object: its own and its public
    members', recursively (the site's filter ``!^_``)."""
    import griffe

    path = getattr(obj, "path", "")
    if path in seen:
        return
    seen.add(path)
    docstring = getattr(obj, "docstring", None)
    if docstring is not None:
        yield path, docstring.value
    try:
        members = obj.members  # type: ignore[attr-defined]
    except griffe.AliasResolutionError:
        return
    for name, member in members.items():
        if name.startswith("_"):
            continue
        if isinstance(member, griffe.Alias):
            try:
                member = member.final_target
            except griffe.AliasResolutionError:
                continue  # a name of another package (pydantic's, AgentScope's)
            if not member.path.startswith("agentscope_ctx"):
                continue
        yield from _docstrings(member, seen)


def test_the_api_reference_cites_no_internal_path() -> None:
    griffe = pytest.importorskip("griffe")
    gen = load_generator()
    package = griffe.load("agentscope_ctx", search_paths=[str(ROOT)], allow_inspection=False)
    loader_root = {"agentscope_ctx": package}
    targets = re.findall(r"^::: ([\w.]+)$", gen.api(), re.MULTILINE)
    assert targets
    found, seen = {}, set()
    for target in targets:
        obj = loader_root["agentscope_ctx"]
        for part in target.split(".")[1:]:
            obj = obj.members[part]
        for path, text in _docstrings(obj, seen):
            hits = internal_material(text)
            if hits:
                found[path] = hits
    assert not found, found
