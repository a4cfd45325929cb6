"""The release a user installs (issue 48): the version in one place, the license file and its
SPDX name, a changelog section for the version, and no install command for an index the
package is not on. The wheel itself is built, installed and run in `.ci/run`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tomllib

import agentscope_ctx
from agentscope_ctx import _version

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_version_lives_in_one_place() -> None:
    assert "version" not in PROJECT["project"] and "version" in PROJECT["project"]["dynamic"]
    attr = PROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "agentscope_ctx._version.__version__"
    assert agentscope_ctx.__version__ == _version.__version__
    # a literal, so that setuptools reads it without importing the package (and AgentScope)
    tree = ast.parse(Path(_version.__file__).read_text(encoding="utf-8"))
    [value] = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__version__"
    ]
    assert isinstance(value, ast.Constant) and value.value == agentscope_ctx.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", agentscope_ctx.__version__)


def test_the_license_file_and_its_spdx_name() -> None:
    assert PROJECT["project"]["license"] == "Apache-2.0"
    assert PROJECT["project"]["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the full text, not a notice
    assert "Apache-2.0" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_changelog_has_the_version_and_unreleased() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", text, flags=re.MULTILINE)
    assert headings[:2] == ["Unreleased", agentscope_ctx.__version__], headings
    assert "keepachangelog.com" in text


def test_no_install_from_an_index_the_package_is_not_on() -> None:
    """``pip install "agentscope-ctx[otel]"`` cannot work: the package is on no index."""
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [
        f"{page.relative_to(ROOT)}: {line.strip()}"
        for page in pages
        for line in page.read_text(encoding="utf-8").splitlines()
        if re.search(r"pip install [\"']?agentscope-ctx\b", line)
    ]
    assert found == []


def test_python_311_or_newer() -> None:
    """tantivy 0.27 and AgentScope 2.x need Python 3.11 (docs/compatibility.md): on 3.10 the
    install failed on tantivy, under a ``requires-python`` that admitted it."""
    assert PROJECT["project"]["requires-python"] == ">=3.11"
    assert "| | 3.10 | **does not install**" in (ROOT / "docs" / "compatibility.md").read_text(
        encoding="utf-8"
    )
